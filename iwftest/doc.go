// Package iwftest runs workflows end to end inside go test: the real engine
// of iwf-server on a temporary SQLite file, its real REST API and the
// test's worker (iwf.NewWorkerService), each on a loopback port, and an SDK
// client wired to both. A test needs no server, database or network set-up:
//
//	func TestSignUp(t *testing.T) {
//		registry, err := iwf.NewRegistry(SignUpWorkflow)
//		...
//		env := iwftest.New(t, registry, iwftest.WithFakeClock())
//		ctx := t.Context()
//
//		_, err = env.Client().StartWorkflow(ctx, SignUpWorkflow, "user-1", 0, "ann@example.com", nil)
//		...
//		env.Advance(96 * time.Hour) // four days of daily reminders, at once
//		status, err := env.WaitForCompletion(ctx, "user-1")
//		...
//	}
//
// The samples in the repository's samples/ directory are tested this way.
//
// # Time
//
// By default the engine runs on real time. WithFakeClock gives it a
// FakeClock instead: durable timers, retry backoffs, workflow timeouts and
// start delays then fire only when the test moves time with Env.Advance,
// which steps through every moment at which something falls due and waits
// for the engine after each step. A workflow that sleeps for a month
// completes in milliseconds, and in the same order of events as it would
// in a month. Worker calls, long polls and RPC timeouts still take real
// time.
//
// WaitIdle waits until the engine has done everything due at the current
// time, so a test can look at a running workflow at a point where it waits
// for time or for input.
//
// # What it owns
//
// The package wires engine, internal/httpapi, internal/store/sqlite and
// internal/workerclient as cmd/iwf-server does, with a store wrapper that
// lets it see the engine's pending tasks. It is for tests only and lives in
// the server's module; the SDK module does not depend on it.
package iwftest
