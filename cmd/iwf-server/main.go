// Command iwf-server runs the iWF-compatible workflow server: the REST API
// of package httpapi over the engine, on an embedded SQLite store or on
// PostgreSQL. `iwf-server migrate` applies the database migrations and exits;
// `iwf-server backup` copies a SQLite store while it serves; `iwf-server
// version` (or --version) prints the build (package buildinfo).
//
// This package owns configuration, wiring, signals and the migrate, backup
// and version subcommands; it may import every other package of the module.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
)

// defaultGCPercent is the garbage collector's target (GOGC) when the
// environment sets none. The server's live heap is small (tens of MB) and
// it allocates per request, so at Go's default of 100 the collector runs
// very often: at 200 PostgreSQL W1 @64 in four interleaved pairs gave
// 1,621 -> 1,828, 1,644 -> 1,531, 1,499 -> 1,706 and 1,509 -> 1,767
// state executions/s, server CPU per 1,000 workflows 0.78-0.86 -> 0.69-0.80
// s, for a peak RSS of 55 MB instead of 44 (docs/benchmarks.md). GOGC, or a
// memory limit with GOMEMLIMIT, still decides when set.
const defaultGCPercent = 200

// setGCPercent applies defaultGCPercent unless GOGC is set.
func setGCPercent() {
	if _, ok := os.LookupEnv("GOGC"); !ok {
		debug.SetGCPercent(defaultGCPercent)
	}
}

// fail prints err as the one line an operator reads: some errors (pgx's,
// for a server tried over TLS and then without) span several lines.
func fail(err error) {
	fmt.Fprintln(os.Stderr, "iwf-server:", strings.ReplaceAll(strings.TrimSpace(err.Error()), "\n", "; "))
}

func main() {
	setGCPercent()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	if len(os.Args) > 1 && os.Args[1] == CommandBackup {
		if err := runBackup(ctx, os.Args[2:], os.LookupEnv, os.Stdout, os.Stderr); errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		} else if err != nil {
			fail(err)
			os.Exit(1)
		}
		return
	}
	m := NewMain()
	if err := m.ParseFlags(ctx, os.Args[1:]); errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	} else if err != nil {
		// Every start-up error, a bad setting included, exits 1.
		fail(err)
		os.Exit(1)
	}
	// Run gets a context that signals do not cancel: Close shuts down in order.
	if err := m.Run(context.WithoutCancel(ctx)); err != nil {
		fail(err)
		_ = m.Close()
		os.Exit(1)
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		for range hup {
			_ = m.Reload() // logs its outcome
		}
	}()
	err := m.Wait(ctx)
	signal.Stop(hup)
	stop() // a second signal now kills the process at once
	if cerr := m.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		fail(err)
		os.Exit(1)
	}
}
