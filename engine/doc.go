// Package engine is the durable interpreter of iWF state machines.
//
// It owns the workflow and state-execution lifecycle (start, waitUntil,
// command waiting, execute, decisions, completion), worker-call retries,
// durable timers and the task queue, and it defines the interfaces it needs
// from the outside: Store (persistence), WorkerClient (calls to the user's
// worker) and Clock (time). It imports the generated wire types of
// api/iwfapi and the pure channel logic of package channels; it never
// imports a store implementation or the HTTP layer.
package engine
