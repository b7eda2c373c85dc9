// Package compattest holds end-to-end compatibility tests: one test per
// scenario of iWF's own server integration suite (integ/*_test.go in
// indeedeng/iwf, listed in §13 of the API reference), written anew against
// this server.
//
// Every test drives a real server over HTTP with the generated client of
// api/iwfapi, so that requests pass through validation and the error table
// exactly as an SDK's would, and the server calls a real HTTP test worker
// (net/http/httptest) that implements the three worker endpoints for the
// scenario. Each test runs twice, on SQLite (a temporary file) and on
// PostgreSQL (a fresh schema); the PostgreSQL half is skipped when no server
// answers, unless IWF_TEST_POSTGRES_REQUIRED=1 (see package pgtest).
//
// The servers are assembled in the test process from the exported packages,
// the way cmd/iwf-server wires them: engine.New on sqlite.Open or
// postgres.Open, workerclient.New for worker calls and httpapi.NewHandler
// for the REST API. One server per store (and per special configuration,
// such as configured worker headers) is shared by all tests; workflow ids
// keep the tests apart.
//
// Most of the time of these tests is spent waiting for timers, backoffs and
// long polls, so the package raises the default -test.parallel to 64 unless
// the flag is given explicitly. IWF_COMPATTEST_LOG=1 sends the servers' logs
// to stderr.
//
// The package has no non-test code; docs/compatibility.md maps each iWF
// scenario to the test that covers it.
package compattest
