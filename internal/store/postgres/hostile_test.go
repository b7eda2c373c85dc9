package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/store/postgres"
	"github.com/iwf-server/iwf-server/internal/store/postgres/pgtest"
	"github.com/iwf-server/iwf-server/search"
)

// waitFor polls cond until it holds, failing the test after a generous
// deadline. The conditions it waits on are changes of the server's state
// that the test cannot be told about otherwise.
func waitFor(t *testing.T, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ok, err := cond()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after 60s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// activeBackend waits until a backend runs a statement holding marker,
// and returns its pid.
func activeBackend(t *testing.T, admin *pgx.Conn, marker string) int32 {
	t.Helper()
	var pid int32
	waitFor(t, "a backend running the slow statement", func() (bool, error) {
		err := admin.QueryRow(context.Background(), `SELECT pid FROM pg_stat_activity
			WHERE state = 'active' AND query LIKE '%' || $1 || '%' AND pid <> pg_backend_pid()`, marker).Scan(&pid)
		if errors.Is(err, pgx.ErrNoRows) {
			return false, nil
		}
		return err == nil, err
	})
	return pid
}

// waitIdle waits until backend pid is idle: its statement stopped and its
// connection, still open, is back in the pool.
func waitIdle(t *testing.T, admin *pgx.Conn, pid int32) {
	t.Helper()
	waitFor(t, "the backend idle again, its connection kept", func() (bool, error) {
		var state string
		err := admin.QueryRow(context.Background(), `SELECT coalesce(state, '') FROM pg_stat_activity WHERE pid = $1`, pid).Scan(&state)
		if errors.Is(err, pgx.ErrNoRows) {
			return false, errors.New("the backend is gone: the connection was closed instead of the statement cancelled")
		}
		return state == "idle", err
	})
}

// TestCancelledReadStopsItsStatement cancels a View's context while its
// statement runs on the server: the server stops the statement (the
// backend is idle again, not still sleeping behind a closed socket), the
// View reports the cancellation as CodeDeadlineExceeded, and the pool's
// connection is kept and serves the next View.
func TestCancelledReadStopsItsStatement(t *testing.T) {
	s, schema := pgtest.NewStoreWith(t)
	admin := pgtest.Conn(t, schema)
	marker := "cancel_" + schema
	for _, end := range []string{"cancel", "server"} {
		t.Run(end, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() {
				_, err := postgres.ViewQuery(ctx, s, `SELECT 'x' FROM pg_sleep(300) /* `+marker+end+` */`)
				done <- err
			}()
			pid := activeBackend(t, admin, marker+end)
			if end == "cancel" {
				cancel()
			} else {
				// Cancelled on the server (an operator's pg_cancel_backend):
				// the store answered, it is no outage.
				if _, err := admin.Exec(context.Background(), `SELECT pg_cancel_backend($1)`, pid); err != nil {
					t.Fatal(err)
				}
			}
			var err error
			select {
			case err = <-done:
			case <-time.After(60 * time.Second):
				t.Fatal("the View did not return within 60s of its cancellation")
			}
			if got := engine.CodeOf(err); got != engine.CodeDeadlineExceeded || engine.IsUnavailable(err) {
				t.Fatalf("View: %v (code %s), want %s", err, got, engine.CodeDeadlineExceeded)
			}
			if end == "cancel" && !errors.Is(err, context.Canceled) {
				t.Fatalf("View: %v does not match context.Canceled", err)
			}
			waitIdle(t, admin, pid)
			if got, err := postgres.ViewQuery(context.Background(), s, `SELECT 'after'`); err != nil || got != "after" {
				t.Fatalf("the next View: %q, %v", got, err)
			}
		})
	}
}

// TestReadTimeoutEndsSlowRead: a View whose context has no deadline runs
// with the store's read timeout as its statement timeout; a statement
// that runs longer is stopped by the server and reported as
// CodeDeadlineExceeded, and the connection stays usable.
func TestReadTimeoutEndsSlowRead(t *testing.T) {
	s, schema := pgtest.NewStoreWith(t, postgres.WithReadTimeout(200*time.Millisecond))
	admin := pgtest.Conn(t, schema)
	marker := "timeout_" + schema
	done := make(chan error, 1)
	go func() {
		_, err := postgres.ViewQuery(context.Background(), s, `SELECT 'x' FROM pg_sleep(300) /* `+marker+` */`)
		done <- err
	}()
	var err error
	select {
	case err = <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("the View ran past its statement timeout for 60s")
	}
	if got := engine.CodeOf(err); got != engine.CodeDeadlineExceeded || engine.IsUnavailable(err) {
		t.Fatalf("View: %v (code %s), want %s", err, got, engine.CodeDeadlineExceeded)
	}
	var n int
	if err := admin.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
		WHERE state = 'active' AND query LIKE '%' || $1 || '%' AND pid <> pg_backend_pid()`, marker).Scan(&n); err != nil || n != 0 {
		t.Fatalf("backends still running the statement: %d, %v", n, err)
	}
	if got, err := postgres.ViewQuery(context.Background(), s, `SELECT 'after'`); err != nil || got != "after" {
		t.Fatalf("the next View: %q, %v", got, err)
	}
}

// TestStatementTimeoutFollowsDeadline reads the statement_timeout a
// transaction runs with: the time left until its context's deadline; for a
// View without one the store's read timeout, and for an Update without
// one the database's own setting (the engine's work is not cut short).
func TestStatementTimeoutFollowsDeadline(t *testing.T) {
	s, schema := pgtest.NewStoreWith(t)
	admin := pgtest.Conn(t, schema)
	const q = `SELECT setting FROM pg_settings WHERE name = 'statement_timeout'`
	var dflt string
	if err := admin.QueryRow(context.Background(), q).Scan(&dflt); err != nil {
		t.Fatal(err)
	}
	ms := func(what, v string, err error) int64 {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatalf("%s: %q", what, v)
		}
		return n
	}
	deadline := func(d time.Duration) context.Context {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		t.Cleanup(cancel)
		return ctx
	}

	v, err := postgres.ViewQuery(context.Background(), s, q)
	if got := ms("View without a deadline", v, err); got != postgres.DefaultReadTimeout.Milliseconds() {
		t.Errorf("View without a deadline: statement_timeout %dms, want the read timeout %v", got, postgres.DefaultReadTimeout)
	}
	v, err = postgres.ViewQuery(deadline(20*time.Second), s, q)
	if got := ms("View with a 20s deadline", v, err); got <= 0 || got > 20000 {
		t.Errorf("View with a 20s deadline: statement_timeout %dms", got)
	}
	v, err = postgres.ViewQuery(deadline(time.Hour), s, q)
	if got := ms("View with a 1h deadline", v, err); got != postgres.DefaultReadTimeout.Milliseconds() {
		t.Errorf("View with a 1h deadline: statement_timeout %dms, want the read timeout %v", got, postgres.DefaultReadTimeout)
	}
	v, err = postgres.UpdateQuery(deadline(20*time.Second), s, q)
	if got := ms("Update with a 20s deadline", v, err); got <= 0 || got > 20000 {
		t.Errorf("Update with a 20s deadline: statement_timeout %dms", got)
	}
	v, err = postgres.UpdateQuery(context.Background(), s, q)
	if err != nil || v != dflt {
		t.Errorf("Update without a deadline: statement_timeout %q, %v; want the database's %q", v, err, dflt)
	}
	unbounded, _ := pgtest.NewStoreWith(t, postgres.WithReadTimeout(0))
	v, err = postgres.ViewQuery(context.Background(), unbounded, q)
	if err != nil || v != dflt {
		t.Errorf("View without a deadline or a read timeout: statement_timeout %q, %v; want the database's %q", v, err, dflt)
	}
}

// TestClientMistakesAreInvalidArgument writes and searches what
// PostgreSQL refuses because of the data itself: a NUL character in a
// text (SQLSTATE 22021) and a value too large for its index (54000). Each
// is engine.CodeInvalidArgument, not an outage, and the store answers the
// next request.
func TestClientMistakesAreInvalidArgument(t *testing.T) {
	s := pgtest.NewStore(t)
	ctx := context.Background()
	run := &engine.Run{RunID: "r1", WorkflowID: "wf-1", WorkflowType: "T", Status: engine.RunRunning, StartedAt: time.Now()}
	if err := s.Update(ctx, func(ctx context.Context, tx engine.Tx) error { return tx.RunInsert(ctx, run) }); err != nil {
		t.Fatal(err)
	}
	var b [16 << 10]byte
	rand.Read(b[:])
	huge := hex.EncodeToString(b[:]) // incompressible: no index row holds it
	str := func(v string) *string { return &v }
	cases := []struct {
		name string
		run  func() error
	}{
		{"NUL in a search attribute key", func() error {
			return s.Update(ctx, func(ctx context.Context, tx engine.Tx) error {
				return tx.SearchAttributeUpsert(ctx, "r1", []*engine.SearchAttribute{{Key: "k\x00", ValueType: search.Keyword, String: str("v")}})
			})
		}},
		{"NUL in a search attribute value", func() error {
			return s.Update(ctx, func(ctx context.Context, tx engine.Tx) error {
				return tx.SearchAttributeUpsert(ctx, "r1", []*engine.SearchAttribute{{Key: "k", ValueType: search.Text, String: str("a\x00b")}})
			})
		}},
		{"NUL in a data attribute key", func() error {
			return s.Update(ctx, func(ctx context.Context, tx engine.Tx) error {
				return tx.DataAttributeUpsert(ctx, "r1", []*engine.Attribute{{Key: "k\x00", Value: []byte(`1`)}})
			})
		}},
		{"NUL in a search literal", func() error {
			return s.View(ctx, func(ctx context.Context, tx engine.ReadTx) error {
				_, err := tx.RunSearch(ctx, &search.Query{Limit: 10, Filter: &search.Cond{
					Field: search.Field{Builtin: search.BuiltinWorkflowID, Type: search.Keyword}, Op: search.Eq, Values: []any{"wf\x00"}}})
				return err
			})
		}},
		{"a keyword too large for its index", func() error {
			return s.Update(ctx, func(ctx context.Context, tx engine.Tx) error {
				return tx.SearchAttributeUpsert(ctx, "r1", []*engine.SearchAttribute{{Key: "big", ValueType: search.Keyword, String: &huge}})
			})
		}},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.run()
			if got := engine.CodeOf(err); got != engine.CodeInvalidArgument || engine.IsUnavailable(err) {
				t.Fatalf("%v (code %s), want %s", err, got, engine.CodeInvalidArgument)
			}
			var e *engine.Error
			if errors.As(err, &e); strings.Contains(e.Message, "SQLSTATE") {
				t.Errorf("the client's message carries the driver's error: %q", e.Message)
			}
			id := "r-after-" + strconv.Itoa(i)
			if err := s.Update(ctx, func(ctx context.Context, tx engine.Tx) error {
				return tx.RunInsert(ctx, &engine.Run{RunID: id, WorkflowID: id, WorkflowType: "T", Status: engine.RunRunning, StartedAt: time.Now()})
			}); err != nil {
				t.Fatalf("the next Update: %v", err)
			}
		})
	}
}
