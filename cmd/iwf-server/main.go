// Command iwf-server runs the iWF-compatible workflow server: the REST API
// of package httpapi over the engine, on an embedded SQLite store or on
// PostgreSQL. `iwf-server migrate` applies the database migrations and exits.
//
// This package owns configuration, wiring, signals and the migrate
// subcommand; it may import every other package of the module.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

// fail prints err as the one line an operator reads: some errors (pgx's,
// for a server tried over TLS and then without) span several lines.
func fail(err error) {
	fmt.Fprintln(os.Stderr, "iwf-server:", strings.ReplaceAll(strings.TrimSpace(err.Error()), "\n", "; "))
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

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
