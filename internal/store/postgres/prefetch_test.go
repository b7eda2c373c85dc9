package postgres_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/store/postgres"
	"github.com/iwf-server/iwf-server/internal/store/postgres/pgtest"
)

// TestReadForCallAfterCommit: a read queued behind the commit sees what the
// transaction wrote and shares the commit's round trip; it is delivered
// only when the transaction committed.
func TestReadForCallAfterCommit(t *testing.T) {
	ctx := context.Background()
	var trips atomic.Int64
	s, _ := pgtest.NewStoreWith(t, postgres.WithRoundTripCounter(&trips))
	at := time.UnixMilli(time.Now().UnixMilli())
	run := &engine.Run{RunID: "run-1", WorkflowID: "wf-1", WorkflowType: "T", Status: engine.RunRunning, StartedAt: at, Data: []byte(`{}`)}
	x := &engine.Execution{RunID: "run-1", ExecutionID: "S-1", StateID: "S", Status: engine.ExecExecute, CreatedAt: at, Data: []byte(`{}`)}

	var got, missing *engine.CallRead
	before := trips.Load()
	err := s.Update(ctx, func(ctx context.Context, tx engine.Tx) error {
		pf, ok := tx.(engine.CallPrefetcher)
		if !ok {
			t.Fatal("the PostgreSQL Tx is no engine.CallPrefetcher")
		}
		if err := tx.RunInsert(ctx, run); err != nil {
			return err
		}
		if err := tx.ExecutionInsert(ctx, []*engine.Execution{x}); err != nil {
			return err
		}
		pf.ReadForCallAfterCommit("run-1", "S-1", func(cr *engine.CallRead) { got = cr })
		pf.ReadForCallAfterCommit("no-such-run", "S-1", func(cr *engine.CallRead) { missing = cr })
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := trips.Load() - before; n != 1 {
		t.Errorf("the transaction and its reads took %d round trips, want 1", n)
	}
	if got == nil || got.Run == nil || got.Execution == nil {
		t.Fatalf("read after the commit: %+v, want the run and execution just written", got)
	}
	if got.Run.RunID != "run-1" || got.Execution.ExecutionID != "S-1" || got.Execution.Status != engine.ExecExecute {
		t.Errorf("read after the commit: run %+v execution %+v", got.Run, got.Execution)
	}
	if missing == nil || missing.Run != nil || missing.Execution != nil {
		t.Errorf("read of a missing run: %+v, want an empty read", missing)
	}

	// A transaction that rolls back, or whose commit fails, delivers nothing.
	called := false
	errStop := errors.New("stop")
	err = s.Update(ctx, func(ctx context.Context, tx engine.Tx) error {
		tx.(engine.CallPrefetcher).ReadForCallAfterCommit("run-1", "S-1", func(*engine.CallRead) { called = true })
		if err := tx.ExecutionUpdate(ctx, x); err != nil {
			return err
		}
		return errStop
	})
	if !errors.Is(err, errStop) || called {
		t.Errorf("rolled back: err %v, read delivered %v", err, called)
	}
	err = s.Update(ctx, func(ctx context.Context, tx engine.Tx) error {
		tx.(engine.CallPrefetcher).ReadForCallAfterCommit("run-1", "S-1", func(*engine.CallRead) { called = true })
		return tx.RunInsert(ctx, run) // a duplicate key: the commit fails
	})
	if err == nil || called {
		t.Errorf("failed commit: err %v, read delivered %v", err, called)
	}
}
