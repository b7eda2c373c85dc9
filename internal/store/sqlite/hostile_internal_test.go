package sqlite

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/search"
)

// sqlEndless is a read that never ends by itself.
const sqlEndless = `WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c`

// endlessRead runs sqlEndless in a View under ctx and returns its error,
// failing the test when it has not returned within a minute.
func endlessRead(t *testing.T, s *Store, ctx context.Context) error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		done <- s.View(ctx, func(ctx context.Context, tx engine.ReadTx) error {
			var n int64
			return tx.(*txn).tx.QueryRowContext(ctx, sqlEndless).Scan(&n)
		})
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(time.Minute):
		t.Fatal("an endless read was not interrupted within a minute")
		return nil
	}
}

// readersAnswer checks that every read connection of the pool serves a
// View: as many Views at once as the pool has connections.
func readersAnswer(t *testing.T, s *Store) {
	t.Helper()
	n := s.r.Stats().MaxOpenConnections
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	hold := make(chan struct{})
	var in sync.WaitGroup
	in.Add(n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- s.View(ctx, func(ctx context.Context, tx engine.ReadTx) error {
				var one int
				if err := tx.(*txn).tx.QueryRowContext(ctx, `SELECT 1`).Scan(&one); err != nil {
					return err
				}
				in.Done()
				<-hold // all n connections in use at once
				return nil
			})
		}()
	}
	in.Wait()
	close(hold)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("a View after the interrupted reads: %v", err)
		}
	}
	if st := s.r.Stats(); st.InUse != 0 {
		t.Fatalf("%d read connections still in use", st.InUse)
	}
}

// TestEndlessReadIsInterrupted runs a read that never ends on every read
// connection at once, under a context with a short deadline: the driver
// interrupts each (sqlite3_interrupt), the View reports
// CodeDeadlineExceeded, and every connection goes back to the pool and
// serves the next Views.
func TestEndlessReadIsInterrupted(t *testing.T) {
	s := openMigrated(t, true)
	s.SetReadTimeout(0) // only the context's deadline ends the reads
	n := s.r.Stats().MaxOpenConnections
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			errs <- endlessRead(t, s, ctx)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if got := engine.CodeOf(err); got != engine.CodeDeadlineExceeded || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("View: %v (code %s), want %s matching context.DeadlineExceeded", err, got, engine.CodeDeadlineExceeded)
		}
	}
	readersAnswer(t, s)

	// A cancellation ends a read the same way.
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		// Cancel once the read runs: when a read connection is in use.
		for s.r.Stats().InUse == 0 {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	if err := endlessRead(t, s, ctx); engine.CodeOf(err) != engine.CodeDeadlineExceeded || !errors.Is(err, context.Canceled) {
		t.Fatalf("View: %v, want %s matching context.Canceled", err, engine.CodeDeadlineExceeded)
	}
	readersAnswer(t, s)
}

// TestReadTimeoutEndsEndlessRead: a View whose context has no deadline
// runs no longer than the store's read timeout.
func TestReadTimeoutEndsEndlessRead(t *testing.T) {
	s := openMigrated(t, true)
	s.SetReadTimeout(100 * time.Millisecond)
	if err := endlessRead(t, s, context.Background()); engine.CodeOf(err) != engine.CodeDeadlineExceeded {
		t.Fatalf("View: %v, want %s", err, engine.CodeDeadlineExceeded)
	}
	readersAnswer(t, s)
}

// TestStatementLimitsAreInvalidArgument searches with more conditions
// than SQLite nests in one expression: CodeInvalidArgument, not an
// internal error, and the store answers the next request.
func TestStatementLimitsAreInvalidArgument(t *testing.T) {
	s := openMigrated(t, true)
	ctx := context.Background()
	terms := make([]search.Expr, 1500)
	for i := range terms {
		terms[i] = &search.Cond{Field: search.Field{Builtin: search.BuiltinWorkflowID, Type: search.Keyword}, Op: search.Eq, Values: []any{fmt.Sprint("wf-", i)}}
	}
	err := s.View(ctx, func(ctx context.Context, tx engine.ReadTx) error {
		_, err := tx.RunSearch(ctx, &search.Query{Filter: &search.Or{Terms: terms}, Limit: 10})
		return err
	})
	if got := engine.CodeOf(err); got != engine.CodeInvalidArgument || engine.IsUnavailable(err) {
		t.Fatalf("a search of %d ORed conditions: %v (code %s), want %s", len(terms), err, got, engine.CodeInvalidArgument)
	}
	t.Logf("%v", err)
	readersAnswer(t, s)
}
