package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/store/postgres"
	"github.com/iwf-server/iwf-server/internal/store/postgres/pgtest"
	"github.com/iwf-server/iwf-server/internal/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) engine.Store { return pgtest.NewStore(t) })
}

func waitGroup(t *testing.T, wg *sync.WaitGroup) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("goroutines did not finish within 30s")
	}
}

// TestMigrateConcurrent starts several stores on one new schema at once:
// every Migrate succeeds and each migration is applied exactly once.
func TestMigrateConcurrent(t *testing.T) {
	u := pgtest.URL(t)
	schema := pgtest.NewSchemaName()
	t.Cleanup(func() { pgtest.DropSchema(t, u, schema) })
	ctx := context.Background()

	const n = 6
	var wg sync.WaitGroup
	errs := make(chan error, n)
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := postgres.Open(ctx, u, postgres.WithSchema(schema))
			if err != nil {
				errs <- err
				return
			}
			defer s.Close()
			<-start
			errs <- s.Migrate(ctx)
		}()
	}
	close(start)
	waitGroup(t, &wg)
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("Migrate: %v", err)
		}
	}

	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var rows, distinct int
	if err := conn.QueryRow(ctx, `SELECT count(*), count(DISTINCT version) FROM `+pgx.Identifier{schema, "schema_migrations"}.Sanitize()).Scan(&rows, &distinct); err != nil {
		t.Fatal(err)
	}
	if rows == 0 || rows != distinct {
		t.Fatalf("schema_migrations has %d rows for %d versions", rows, distinct)
	}

	// Migrating again changes nothing.
	s, err := postgres.Open(ctx, u, postgres.WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("second Migrate: %v", err)
	}
	var again int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM `+pgx.Identifier{schema, "schema_migrations"}.Sanitize()).Scan(&again); err != nil {
		t.Fatal(err)
	}
	if again != rows {
		t.Fatalf("second Migrate recorded %d migrations, had %d", again, rows)
	}
}

// TestUpdateRetriesDeadlock makes two transactions lock two runs in opposite
// orders. PostgreSQL aborts one of them with a deadlock; Update must run it
// again transparently, so both succeed.
func TestUpdateRetriesDeadlock(t *testing.T) {
	u := pgtest.URL(t)
	// Detect the deadlock quickly (a superuser-only setting: without the
	// privilege the test still runs, on the server's default timeout).
	fast, err := url.Parse(u)
	if err == nil {
		q := fast.Query()
		q.Set("deadlock_timeout", "50ms")
		fast.RawQuery = q.Encode()
	}
	schema := pgtest.NewSchemaName()
	t.Cleanup(func() { pgtest.DropSchema(t, u, schema) })
	ctx := context.Background()
	s, err := postgres.Open(ctx, fast.String(), postgres.WithSchema(schema))
	if err != nil {
		t.Logf("cannot set deadlock_timeout (%v); using the server default", err)
		if s, err = postgres.Open(ctx, u, postgres.WithSchema(schema)); err != nil {
			t.Fatal(err)
		}
	}
	defer s.Close()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"r1", "r2"} {
		if err := s.Update(ctx, func(ctx context.Context, tx engine.Tx) error {
			return tx.RunInsert(ctx, &engine.Run{RunID: id, WorkflowID: id, WorkflowType: "T", Status: engine.RunRunning, StartedAt: time.Now(), Data: []byte("0")})
		}); err != nil {
			t.Fatal(err)
		}
	}

	var calls atomic.Int32
	firstLocked := [2]chan struct{}{make(chan struct{}), make(chan struct{})}
	incr := func(ctx context.Context, tx engine.Tx, id string) error {
		r, err := tx.RunLock(ctx, id)
		if err != nil {
			return err
		}
		k, err := strconv.Atoi(string(r.Data))
		if err != nil {
			return err
		}
		r.Data = []byte(strconv.Itoa(k + 1))
		return tx.RunUpdate(ctx, r)
	}
	run := func(me int, first, second string) error {
		attempt := 0
		return s.Update(ctx, func(ctx context.Context, tx engine.Tx) error {
			attempt++
			calls.Add(1)
			if err := incr(ctx, tx, first); err != nil {
				return err
			}
			if attempt == 1 {
				// Both hold their first lock before either asks for its second.
				close(firstLocked[me])
				select {
				case <-firstLocked[1-me]:
				case <-time.After(20 * time.Second):
					return errors.New("the other transaction never took its first lock")
				}
			}
			return incr(ctx, tx, second)
		})
	}
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	wg.Add(2)
	go func() { defer wg.Done(); errs <- run(0, "r1", "r2") }()
	go func() { defer wg.Done(); errs <- run(1, "r2", "r1") }()
	waitGroup(t, &wg)
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("Update: %v", err)
		}
	}
	if n := calls.Load(); n < 3 {
		t.Fatalf("fn ran %d times; a deadlock should have made one transaction run again", n)
	}
	for _, id := range []string{"r1", "r2"} {
		if err := s.View(ctx, func(ctx context.Context, tx engine.ReadTx) error {
			r, err := tx.RunGet(ctx, id)
			if err != nil {
				return err
			}
			if string(r.Data) != "2" {
				return fmt.Errorf("run %s counter = %s, want 2 (the aborted attempt must leave nothing behind)", id, r.Data)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSchemaIsolation checks that WithSchema keeps two stores on one
// database apart.
func TestSchemaIsolation(t *testing.T) {
	a, b := pgtest.NewStore(t), pgtest.NewStore(t)
	ctx := context.Background()
	if err := a.Update(ctx, func(ctx context.Context, tx engine.Tx) error {
		return tx.WorkflowSetCurrentRun(ctx, "wf", "run")
	}); err != nil {
		t.Fatal(err)
	}
	err := b.View(ctx, func(ctx context.Context, tx engine.ReadTx) error {
		_, err := tx.WorkflowGetCurrentRun(ctx, "wf")
		return err
	})
	if !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("store b sees store a's workflow: %v", err)
	}
}

func BenchmarkStore(b *testing.B) {
	storetest.Bench(b, func(b *testing.B) engine.Store { return pgtest.NewStore(b) })
}
