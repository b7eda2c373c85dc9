// Package upgradetest proves that a new release reads and finishes the
// workflows that a previous release stored (design property 17).
//
// It owns the stored data of past releases, committed as test data, and
// the scenario that wrote it:
//
//   - testdata/v1/iwf.db: a SQLite store written by release v1 (one file,
//     checkpointed: no -wal or -shm file belongs with it);
//   - testdata/v1/postgres.sql: a pg_dump of the PostgreSQL schema
//     iwf_upgrade_v1, written by the same scenario on release v1.
//
// The scenario starts 19 workflows on a server assembled in process as
// cmd/iwf-server assembles it (store, engine, REST API), with a real HTTP
// test worker, and drives them to a chosen point. Seven end closed, one per
// way a run closes; the others wait: for a timer in 2100, a timer that falls
// due a minute after the data was written, a signal (with a message of
// another channel buffered), an internal channel, a combination of commands,
// an RPC, the last state of a graceful completion, or the next attempt of a
// state API that failed three times (one of them holding a lock). A
// workflow retry and a reset leave two runs each. Between them the rows
// hold data and search attributes of all seven types, state locals, custom
// state options, completion records for waitForStateCompletion and external
// inputs in the history. The files are:
//
//   - scenario_test.go, closed_test.go, failing_test.go, waiting_test.go,
//     attributes_test.go, runs_test.go: the workflows, what the data must
//     show for each, and how each one is finished after the upgrade;
//   - states_test.go: the user code, what the worker answers for each state
//     and RPC; worker_test.go: the worker, which records every call;
//   - server_test.go, client_test.go, assert_test.go: the in-process server,
//     its REST client and the assertions; pgdump_test.go: dump and restore.
//
// TestSQLiteUpgradeV1 and TestPostgresUpgradeV1 run with every `make test`,
// their engine under a concurrency limit on the worker host, so that the
// limits' tables of the latest migrations serve the upgraded data.
// They open a copy of the data with the code of the checkout (which
// migrates it) and, before the engine does any work, read every run through
// the REST API (get with results, data and search attributes, history,
// search, waitForStateCompletion, a locking RPC) and compare it with what
// the scenario wrote. Then they start the engine, finish every workflow
// that has something left to do (signals, a timer skip, RPCs, resets, and
// the worker now answering) and check the results, and that the worker
// received each state API call exactly as often as expected. The engine of
// these tests runs on a clock an hour ahead (laterClock), as if the upgrade
// happened at least an hour after the data was written, so that the
// minute-long timer is due even right after the data is written again. The
// testdata is never modified. The PostgreSQL test follows package pgtest:
// it is skipped when no server answers, unless IWF_TEST_POSTGRES_REQUIRED=1.
//
// # Writing the data
//
// The data of a release is written once, with that release checked out,
// and kept: a change that breaks the upgrade tests is a change of the
// stored format that needs a migration or a compatible reader, not new test
// data. To write it, from the repository root, with PostgreSQL reachable
// and pg_dump on the PATH:
//
//	IWF_UPGRADE_WRITE=1 IWF_TEST_POSTGRES_REQUIRED=1 \
//	    go test ./internal/upgradetest/ -run TestWriteUpgradeData -count=1
//
// TestWriteUpgradeData skips without IWF_UPGRADE_WRITE=1. It takes about
// 15 seconds, as it waits for real retries, a workflow retry and a workflow
// timeout; it fails, and must be run again, if the machine is so slow that
// the engine made an attempt or fired a timer the data should still have
// pending. To capture a later release's format, add a testdata/vN directory
// written by that release and a pair of tests for it, and keep the old ones.
//
// The worker URL stored in every run is the placeholder
// http://upgrade-worker.test; the tests route it to their live worker with
// a wrapper of the engine's WorkerClient.
//
// The package has no non-test code. It imports the engine, the stores, the
// REST API and the worker client, as cmd/iwf-server does.
package upgradetest
