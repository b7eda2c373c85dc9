// Command iwf is the command line of an iwf-server: it starts, inspects,
// signals, stops and resets workflows, reads their history and checks the
// server's health, all over the server's REST API (the iWF v1 API and this
// server's extensions, described by api/openapi.yaml).
//
// The package owns the command line only: parsing flags, one HTTP call (or
// a few) per command, and printing the answer as a table or as the server's
// JSON. It imports the generated wire types of api/iwfapi and nothing of the
// server itself, so it talks to any iwf-server it can reach; only
// archivedoc, to read runs that retention archived and
// deleted (get and history --archived) from a file:// archive, and
// internal/buildinfo, for `iwf version`, both of the standard library
// only. It links neither the engine nor gocloud.dev nor a cloud SDK (a
// test checks).
// docs/cli.md documents every command, its flags and the exit codes.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(code)
}
