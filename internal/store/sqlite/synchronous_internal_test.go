package sqlite

import (
	"context"
	"database/sql"
	"path/filepath"
	"runtime"
	"testing"
)

// TestSynchronousOnEveryConnection: the synchronous level reaches every
// connection the store opens — the writer, each read connection and the
// checkpointer's, whose checkpoints then sync as the level says — read
// back with PRAGMA synchronous (1 NORMAL, 2 FULL).
func TestSynchronousOnEveryConnection(t *testing.T) {
	for _, c := range []struct {
		opts []Option
		want int
	}{
		{nil, 1}, // the default: NORMAL
		{[]Option{WithSynchronous(SyncNormal)}, 1},
		{[]Option{WithSynchronous(SyncFull)}, 2},
	} {
		ctx := context.Background()
		s, err := Open(ctx, filepath.Join(t.TempDir(), "iwf.db"), c.opts...)
		if err != nil {
			t.Fatal(err)
		}
		level := func(what string, q interface {
			QueryRowContext(context.Context, string, ...any) *sql.Row
		}) {
			t.Helper()
			var got int
			if err := q.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&got); err != nil || got != c.want {
				t.Fatalf("%v: %s: synchronous = %d, %v; want %d", c.opts, what, got, err, c.want)
			}
		}
		level("writer", s.w)
		level("checkpointer", s.ckpt.db)
		// Hold every read connection at once, so that each is asked.
		n := max(4, runtime.GOMAXPROCS(0))
		var conns []*sql.Conn
		for range n {
			conn, err := s.r.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			conns = append(conns, conn)
			level("a read connection", conn)
		}
		if st := s.r.Stats(); st.OpenConnections != n {
			t.Fatalf("%d read connections open, want every one of the pool's %d asked", st.OpenConnections, n)
		}
		for _, conn := range conns {
			conn.Close()
		}
		s.Close()
	}
	if _, err := Open(context.Background(), filepath.Join(t.TempDir(), "x.db"), WithSynchronous("off")); err == nil {
		t.Fatal("synchronous=off accepted")
	}
	if _, err := ParseSynchronous("OFF"); err == nil {
		t.Fatal("ParseSynchronous(OFF) accepted")
	}
	if v, err := ParseSynchronous(" Full "); err != nil || v != SyncFull {
		t.Fatalf("ParseSynchronous(Full) = %q, %v", v, err)
	}
}
