package pgtest

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestReachableFailsFast checks that an unreachable server is reported
// within a bounded time (the probe's budget is 2 s; the bound below leaves
// room for a loaded machine and is still far below a TCP connect timeout),
// so that URL skips quickly.
func TestReachableFailsFast(t *testing.T) {
	start := time.Now()
	if err := reachable("postgres://postgres@127.0.0.1:1/test?sslmode=disable"); err == nil {
		t.Fatal("reachable reported a closed port as reachable")
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Fatalf("probe took %v", d)
	}
}

// TestStartOwnWithSettings starts an own server with a setting and checks
// that the server runs with it, also after a restart.
func TestStartOwnWithSettings(t *testing.T) {
	s := StartOwnWith(t, OwnOptions{Settings: map[string]string{"work_mem": "7MB"}})
	check := func(when string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, s.URL)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(ctx)
		var workMem string
		if err := c.QueryRow(ctx, `SELECT setting || unit FROM pg_settings WHERE name = 'work_mem'`).Scan(&workMem); err != nil {
			t.Fatal(err)
		}
		if workMem != "7168kB" {
			t.Errorf("%s: work_mem is %s, want 7MB (7168kB)", when, workMem)
		}
		var source string
		if err := c.QueryRow(ctx, `SELECT source FROM pg_settings WHERE name = 'work_mem'`).Scan(&source); err != nil {
			t.Fatal(err)
		}
		if source != "command line" {
			t.Errorf("%s: work_mem comes from %q, want the command line", when, source)
		}
	}
	check("after start")
	s.Stop()
	s.Start()
	check("after restart")
}
