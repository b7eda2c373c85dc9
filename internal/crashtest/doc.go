// Package crashtest proves, with real operating-system processes, that the
// iwf-server binary is crash safe and scales out (design properties 1–5).
//
// The tests build cmd/iwf-server once per test run, start it as a child
// process on SQLite or PostgreSQL, drive it through its REST API with the
// generated iwfapi client, and run a real HTTP worker (Worker) inside the
// test process. They kill the server with SIGKILL at chosen moments — while
// the worker holds a waitUntil or execute call, while a durable timer is
// pending, right after a signal was acknowledged, in the middle of a parallel
// fan-out — restart it on the same database, and check that every workflow
// ends exactly as it would have without the crash: calls may be repeated
// (with a higher attempt number), but every worker answer and every
// acknowledged API call takes effect exactly once. A second group of tests
// runs two server processes on one PostgreSQL database, kills one of them
// under load, and checks that the survivor takes its work over within the
// lease duration and finishes every workflow once.
//
// The package's non-test files are the harness: BuildServer and Server run
// the binary (Kill, Start, and on Unix Pause and Resume), Worker is the
// worker, PostgresDB and SQLiteDB give each test a fresh database.
package crashtest
