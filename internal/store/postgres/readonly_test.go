package postgres_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/store/postgres"
	"github.com/iwf-server/iwf-server/internal/store/postgres/pgtest"
)

// TestReadOnlyServerConnectionIsDiscarded: a write that a server refuses as
// read-only (SQLSTATE 25006, what a standby answers) is reported as the
// store being unavailable, and the connection that met it is not reused:
// the pool opens a new one, which with target_session_attrs=read-write
// reaches the current primary. Connections that met no such error are
// kept.
func TestReadOnlyServerConnectionIsDiscarded(t *testing.T) {
	_, schema := pgtest.NewStoreWith(t)
	u, err := url.Parse(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	// Every session of this pool refuses writes, like one on a standby.
	q := u.Query()
	q.Set("default_transaction_read_only", "on")
	q.Set("pool_max_conns", "1")
	u.RawQuery = q.Encode()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := postgres.Open(ctx, u.String(), postgres.WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	if _, err := postgres.ViewQuery(ctx, s, `SELECT 'a'`); err != nil {
		t.Fatal(err)
	}
	if _, err := postgres.ViewQuery(ctx, s, `SELECT 'b'`); err != nil {
		t.Fatal(err)
	}
	kept := postgres.NewConns(s)
	if kept != 1 {
		t.Fatalf("the pool opened %d connections for two reads, want 1 (a healthy connection is kept)", kept)
	}
	for i := range 2 {
		_, err := postgres.UpdateQuery(ctx, s, `INSERT INTO workflows (workflow_id) VALUES ('ro') RETURNING workflow_id`)
		if err == nil {
			t.Fatal("a write on a read-only session succeeded")
		}
		if !engine.IsUnavailable(err) {
			t.Fatalf("write %d: %v, want an unavailable error (503)", i, err)
		}
	}
	if _, err := postgres.ViewQuery(ctx, s, `SELECT 'c'`); err != nil {
		t.Fatal(err)
	}
	// The connection of each refused write was discarded: the second write
	// and the last read each needed a new one.
	if got := postgres.NewConns(s); got != kept+2 {
		t.Fatalf("the pool opened %d connections, want %d: a connection that met 25006 was reused", got, kept+2)
	}
}
