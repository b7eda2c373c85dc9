package pgpair

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) {
	code := m.Run()
	Cleanup()
	os.Exit(code)
}

func exec1(t *testing.T, url, sql string, args ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func count(t *testing.T, url string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM t`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestSyncFailover: a commit acknowledged by the primary survives two
// failovers, and the two-host URL reaches whichever node is the primary.
func TestSyncFailover(t *testing.T) {
	t.Parallel()
	p := Start(t, Options{})
	exec1(t, p.URL, `CREATE TABLE t (v int)`)
	for i := range 2 {
		exec1(t, p.URL, `INSERT INTO t VALUES ($1)`, i)
		before := p.Primary()
		if err := p.KillPrimary(); err != nil {
			t.Fatal(err)
		}
		if err := p.Promote(); err != nil {
			t.Fatal(err)
		}
		if p.Primary() == before {
			t.Fatalf("the primary is still %s after the promotion", before)
		}
		if n := count(t, p.URL); n != i+1 {
			t.Fatalf("after failover %d: %d rows, want %d", i+1, n, i+1)
		}
		if err := p.Rebuild(); err != nil {
			t.Fatal(err)
		}
		if n := count(t, p.Standby()); n != i+1 {
			t.Fatalf("the rebuilt standby has %d rows, want %d", n, i+1)
		}
	}
	if p.Failovers() != 2 {
		t.Fatalf("Failovers() = %d, want 2", p.Failovers())
	}
}
