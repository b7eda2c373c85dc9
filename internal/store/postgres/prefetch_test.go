package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/store/postgres"
	"github.com/iwf-server/iwf-server/internal/store/postgres/pgtest"
	"github.com/iwf-server/iwf-server/search"
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

// TestReadForCallAfterCommitOfANewRun: the first call of a run that the
// transaction created is handed over without a read, attributes of every
// type included, exactly as the read returns it once committed; an update
// of the run or of the execution after its insert sends the read; a failed
// commit delivers nothing.
func TestReadForCallAfterCommitOfANewRun(t *testing.T) {
	ctx := context.Background()
	var reads atomic.Int64
	s, _ := pgtest.NewStoreWith(t, postgres.WithCallReadCounter(&reads))
	// Times with nanoseconds: the row keeps milliseconds.
	at := time.Date(2026, 11, 28, 13, 0, 0, 123_456_789, time.UTC)

	cases := []struct {
		name     string
		write    func(ctx context.Context, tx engine.Tx, run *engine.Run, x *engine.Execution) error
		wantRead bool
	}{
		{"run and execution inserted", nil, false},
		{"with attributes", func(ctx context.Context, tx engine.Tx, run *engine.Run, x *engine.Execution) error {
			if err := tx.DataAttributeUpsert(ctx, run.RunID, []*engine.Attribute{
				{Key: "b", Value: []byte(`1`)}, {Key: "a", Value: nil}, {Key: "c", Value: []byte{}}, {Key: "b", Value: []byte(`2`)},
			}); err != nil {
				return err
			}
			if err := tx.DataAttributeUpsert(ctx, run.RunID, []*engine.Attribute{{Key: "c", Value: []byte(`"last"`)}}); err != nil {
				return err
			}
			when := time.Date(2026, 11, 28, 13, 0, 0, 987_654_321, time.FixedZone("x", 3600))
			if err := tx.SearchAttributeUpsert(ctx, run.RunID, []*engine.SearchAttribute{
				{Key: "kw", ValueType: search.Keyword, Raw: []byte(`"v"`), String: ptrTo("v")},
				{Key: "arr", ValueType: search.KeywordArray, Raw: []byte(`["x","y"]`), Strings: []string{"x", "y"}},
				{Key: "empty", ValueType: search.KeywordArray, Raw: []byte(`[]`)},
				{Key: "n", ValueType: search.Int, Raw: []byte(`7`), Int: ptrTo(int64(7))},
				{Key: "f", ValueType: search.Double, Raw: []byte(`1.5`), Double: ptrTo(1.5)},
				{Key: "ok", ValueType: search.Bool, Raw: []byte(`true`), Bool: ptrTo(true)},
				{Key: "at", ValueType: search.Datetime, Raw: []byte(`"2026-11-28T14:00:00.987654321+01:00"`), Time: &when},
				{Key: "txt", ValueType: search.Text, Raw: []byte(`"some text"`), String: ptrTo("some text")},
			}); err != nil {
				return err
			}
			// A later write of a key replaces the earlier one.
			return tx.SearchAttributeUpsert(ctx, run.RunID, []*engine.SearchAttribute{
				{Key: "arr", ValueType: search.KeywordArray, Raw: []byte(`["z"]`), Strings: []string{"z"}},
			})
		}, false},
		{"execution updated", func(ctx context.Context, tx engine.Tx, run *engine.Run, x *engine.Execution) error {
			x.Status, x.Data = engine.ExecExecute, []byte(`{"updated":true}`)
			return tx.ExecutionUpdate(ctx, x)
		}, true},
		{"run updated", func(ctx context.Context, tx engine.Tx, run *engine.Run, x *engine.Execution) error {
			run.Data = []byte(`{"updated":true}`)
			return tx.RunUpdate(ctx, run)
		}, true},
	}
	for i, c := range cases {
		runID := fmt.Sprintf("new-run-%d", i)
		run := &engine.Run{RunID: runID, WorkflowID: "wf-" + runID, WorkflowType: "T", Status: engine.RunRunning, StartedAt: at, Data: []byte(`{"v":1}`)}
		x := &engine.Execution{RunID: runID, ExecutionID: "S1-1", StateID: "S1", Status: engine.ExecWaitUntil, CreatedAt: at, Data: []byte(`{}`)}
		var got *engine.CallRead
		before := reads.Load()
		err := s.Update(ctx, func(ctx context.Context, tx engine.Tx) error {
			got = nil
			// A start's order: the execution first, the run last.
			if err := tx.ExecutionInsert(ctx, []*engine.Execution{x}); err != nil {
				return err
			}
			if err := tx.RunInsert(ctx, run); err != nil {
				return err
			}
			if c.write != nil {
				if err := c.write(ctx, tx, run, x); err != nil {
					return err
				}
			}
			tx.(engine.CallPrefetcher).ReadForCallAfterCommit(runID, "S1-1", func(cr *engine.CallRead) { got = cr })
			return nil
		})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if read := reads.Load() > before; read != c.wantRead {
			t.Errorf("%s: read sent %v, want %v", c.name, read, c.wantRead)
		}
		want, err := s.ReadForCall(ctx, runID, "S1-1")
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: delivered\n%s\nthe database reads\n%s", c.name, describeCallRead(got), describeCallRead(want))
		}
	}

	// A new run whose commit fails (its workflow row exists already)
	// delivers nothing.
	called := false
	err := s.Update(ctx, func(ctx context.Context, tx engine.Tx) error {
		called = false
		if err := tx.(engine.WorkflowCreator).WorkflowCreateExpecting(ctx, "wf-taken", "run-a"); err != nil {
			return err
		}
		return tx.RunInsert(ctx, &engine.Run{RunID: "run-a", WorkflowID: "wf-taken", WorkflowType: "T", Status: engine.RunRunning, StartedAt: at})
	})
	if err != nil {
		t.Fatal(err)
	}
	err = s.Update(ctx, func(ctx context.Context, tx engine.Tx) error {
		called = false
		if err := tx.(engine.WorkflowCreator).WorkflowCreateExpecting(ctx, "wf-taken", "run-b"); err != nil {
			return err
		}
		if err := tx.ExecutionInsert(ctx, []*engine.Execution{{RunID: "run-b", ExecutionID: "S1-1", StateID: "S1", Status: engine.ExecWaitUntil, CreatedAt: at}}); err != nil {
			return err
		}
		if err := tx.RunInsert(ctx, &engine.Run{RunID: "run-b", WorkflowID: "wf-taken", WorkflowType: "T", Status: engine.RunRunning, StartedAt: at}); err != nil {
			return err
		}
		tx.(engine.CallPrefetcher).ReadForCallAfterCommit("run-b", "S1-1", func(*engine.CallRead) { called = true })
		return nil
	})
	if err == nil || called {
		t.Errorf("failed commit: err %v, read delivered %v", err, called)
	}
}

// describeCallRead prints a CallRead with what its pointers point to.
func describeCallRead(cr *engine.CallRead) string {
	if cr == nil {
		return "nil"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "run %+v\nexecution %+v\n", cr.Run, cr.Execution)
	for _, a := range cr.DataAttributes {
		fmt.Fprintf(&b, "data %s = %q (nil %v)\n", a.Key, a.Value, a.Value == nil)
	}
	for _, a := range cr.SearchAttributes {
		fmt.Fprintf(&b, "search %s %s raw %q string %v int %v double %v bool %v time %v strings %#v\n", a.Key, a.ValueType, a.Raw,
			deref(a.String), deref(a.Int), deref(a.Double), deref(a.Bool), deref(a.Time), a.Strings)
	}
	return b.String()
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}
