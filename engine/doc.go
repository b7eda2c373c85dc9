// Package engine is the durable interpreter of iWF state machines.
//
// It owns the workflow and state-execution lifecycle (start, waitUntil,
// command waiting, execute, decisions, completion), worker-call retries,
// durable timers and the task queue, and it defines the interfaces it needs
// from the outside: Store (persistence), WorkerClient (calls to the user's
// worker) and Clock (time), and PayloadStore (iWF's external storage of
// big payloads, optional). It imports the generated wire types of
// api/iwfapi (its long-established single-run calls take them; the batch
// calls and the stored records have types of their own), the pure channel
// logic of package channels and the archived document's types
// (archivedoc); it never imports a store implementation,
// the HTTP layer or a blob store.
package engine
