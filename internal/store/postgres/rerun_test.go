package postgres_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/store/postgres/pgtest"
	"github.com/iwf-server/iwf-server/internal/store/storetest"
)

// TestUpdateRerun makes Update run a function twice through its deadlock
// retry: after the function's writes, its transaction and a second one lock
// two workflow rows in opposite orders. The second transaction waits for
// deadlocks far longer than the store's, so the store's transaction is the
// one PostgreSQL aborts, and Update runs the function again.
func TestUpdateRerun(t *testing.T) {
	s, schema := pgtest.NewStoreWith(t)
	ctx := context.Background()
	if err := s.Update(ctx, func(ctx context.Context, tx engine.Tx) error {
		for _, id := range []string{"w1", "w2"} {
			if _, err := tx.WorkflowLock(ctx, id); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	conn := pgtest.Conn(t, schema)
	storetest.UpdateRerun(t, s, func(t *testing.T, _ engine.Store, fn func(ctx context.Context, tx engine.Tx) error) error {
		other, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer other.Rollback(context.Background())
		for _, q := range []string{`SET LOCAL deadlock_timeout = '60s'`, `SELECT 1 FROM workflows WHERE workflow_id = 'w1' FOR UPDATE`} {
			if _, err := other.Exec(ctx, q); err != nil {
				t.Fatal(err)
			}
		}
		holding := make(chan struct{})
		var runs atomic.Int32
		result := make(chan error, 1)
		go func() {
			result <- s.Update(ctx, func(ctx context.Context, tx engine.Tx) error {
				if err := fn(ctx, tx); err != nil {
					return err
				}
				if runs.Add(1) > 1 {
					return nil
				}
				if _, err := tx.WorkflowLock(ctx, "w2"); err != nil {
					return err
				}
				close(holding)
				_, err := tx.WorkflowLock(ctx, "w1") // waits for other: a deadlock once other asks for w2
				return err
			})
		}()
		<-holding
		if _, err := other.Exec(ctx, `SELECT 1 FROM workflows WHERE workflow_id = 'w2' FOR UPDATE`); err != nil {
			t.Fatalf("the second transaction was aborted instead of the store's: %v", err)
		}
		if err := other.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		return <-result
	})
}
