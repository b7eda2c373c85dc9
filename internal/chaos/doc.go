// Package chaos proves durability under random crashes (the "chaos" run):
// a mixed workload of durable timers, signals, internal channels, parallel
// threads, RPCs that write data attributes, resets, stops and workflow
// retries runs against the real iwf-server binary while the server is
// killed with SIGKILL at random moments and restarted, paused past its
// lease (PostgreSQL, two nodes), cut off from its database
// (pg_terminate_backend), and — when the test may mount a tmpfs — runs out
// of disk (SQLite), or — on a PostgreSQL primary and standby the test owns
// (pgpair) — loses its database's primary to a failover; and an operator
// pauses the workload's workflow type and the worker's host through the
// API and resumes them (scopepause_test.go). A checker then verifies from
// the worker's records and the API that every workflow reached the
// outcome its script implies, that no state execution's effects were
// applied twice, that nothing acknowledged to a client was lost, that
// worker calls were repeated only when a fault struck while they were in
// flight, and that no worker call of a paused scope was made while it was
// paused (beyond the engine's bound for every node to hold the pause).
//
// Beside it, the linear workload (linear_test.go) has concurrent clients
// increment a counter through a locking RPC, set and get a register, and
// signal a workflow that counts the signals, on a few long-lived workflows;
// porcupine checks that the recorded histories are linearizable with
// respect to those models (linearcheck_test.go), with every call whose
// outcome is unknown taken as one that may or may not have taken effect.
//
// The package has only tests; they use the harness of internal/crashtest
// (server processes, the recording worker, the dump reader). `make chaos`
// runs them with CHAOS_KILLS kills per store; `make test` runs a 10-kill
// version; `make chaos-failover` (also run by `make chaos`) does
// CHAOS_FAILOVERS failovers, and `make test` one. See docs/reliability.md.
//
// `make chaos-net` runs the network faults between a node and PostgreSQL
// (TestNetFaults, through internal/faultproxy) and a node whose clock is
// 90 s off (TestClockSkew), both under the same workload and checker;
// `make test` runs TestWorkerLinkFaults (faults between the server and a
// worker). `make soak` runs TestSoak: the workload at half capacity for
// SOAK_DURATION, sampled for leaks and latency drift. `make mixed-version`
// runs TestMixedVersion: the workload on nodes of the previous release
// (internal/mixedtest) and of this tree side by side on one PostgreSQL
// database, across this tree's migrations, with the same checker.
package chaos
