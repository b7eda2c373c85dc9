package storetest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/search"
)

// testReadForCallAfterCommit checks engine.CallPrefetcher, for the stores
// whose Tx has it: what done is handed is exactly what ReadForCall returns
// once the transaction committed. For the first call of a run the
// transaction created the store knows it (PostgreSQL and SQLite hand over
// the rows they wrote, as their columns give them back), so done must be
// called: attributes of every type are written, edge values included (sub-
// millisecond times, -0, nil and empty bytes, keys written twice). When
// the run or the execution was updated after its insert, or written after
// the read was asked for, a store may leave the read to the engine, but
// what it hands over must show those writes. done is never called for a
// transaction that did not commit.
func testReadForCallAfterCommit(t *testing.T, s engine.Store) {
	cr, ok := s.(engine.CallReader)
	if !ok {
		t.Skip("the store reads call inputs through View")
	}
	prefetches := false
	update(t, s, func(ctx context.Context, tx engine.Tx) error {
		_, prefetches = tx.(engine.CallPrefetcher)
		return nil
	})
	if !prefetches {
		t.Skip("the store's Tx is no engine.CallPrefetcher")
	}
	ctx := ctxT(t)

	// newRunAndExecution returns a run and its first execution, as a start
	// writes them.
	newRunAndExecution := func(id string) (*engine.Run, *engine.Execution) {
		return newRun(id), &engine.Execution{RunID: id, ExecutionID: "S1-1", StateID: "S1", Status: engine.ExecWaitUntil,
			CreatedAt: at(time.Millisecond), Data: []byte(`{"input":1}`)}
	}
	// start inserts run and x in a start's order: the execution first, the
	// run last.
	start := func(ctx context.Context, tx engine.Tx, run *engine.Run, x *engine.Execution) error {
		if err := tx.ExecutionInsert(ctx, []*engine.Execution{x}); err != nil {
			return err
		}
		return tx.RunInsert(ctx, run)
	}
	// prefetch runs write in a transaction, asks for the read of runID's
	// S1-1, runs later (when not nil), and returns what done was handed,
	// whether it was called, and Update's error. The function may run more
	// than once: only its last run counts.
	prefetch := func(runID string, write, later func(ctx context.Context, tx engine.Tx) error) (got *engine.CallRead, called bool, err error) {
		err = s.Update(ctx, func(ctx context.Context, tx engine.Tx) error {
			got, called = nil, false
			if err := write(ctx, tx); err != nil {
				return err
			}
			tx.(engine.CallPrefetcher).ReadForCallAfterCommit(runID, "S1-1", func(cr *engine.CallRead) { got, called = cr, true })
			if later != nil {
				return later(ctx, tx)
			}
			return nil
		})
		return got, called, err
	}
	// check fails unless got is what ReadForCall reads now.
	check := func(t *testing.T, what string, got *engine.CallRead) {
		t.Helper()
		want, err := cr.ReadForCall(ctx, got.Run.RunID, "S1-1")
		if err != nil {
			t.Fatalf("%s: ReadForCall: %v", what, err)
		}
		equal(t, what+": handed over", got, want)
		// DeepEqual compares doubles with ==, to which -0 is 0.
		for i, a := range got.SearchAttributes {
			if w := want.SearchAttributes[i]; a.Double != nil && math.Float64bits(*a.Double) != math.Float64bits(*w.Double) {
				t.Fatalf("%s: search attribute %s handed over as %v, ReadForCall reads %v", what, a.Key, *a.Double, *w.Double)
			}
		}
	}

	t.Run("NewRun", func(t *testing.T) {
		run, x := newRunAndExecution("born-1")
		negZero := math.Copysign(0, -1)
		when := time.Date(2026, 11, 28, 14, 0, 0, 987_654_321, time.FixedZone("x", 3600))
		got, called, err := prefetch(run.RunID, func(ctx context.Context, tx engine.Tx) error {
			if err := start(ctx, tx, run, x); err != nil {
				return err
			}
			if err := tx.DataAttributeUpsert(ctx, run.RunID, []*engine.Attribute{
				{Key: "b", Value: []byte(`1`)}, {Key: "a"}, {Key: "c", Value: []byte{}}, {Key: "b", Value: []byte(`2`)},
				{Key: "bytes", Value: []byte{0xff, 0, 1}},
			}); err != nil {
				return err
			}
			if err := tx.DataAttributeUpsert(ctx, run.RunID, []*engine.Attribute{{Key: "c", Value: []byte(`"last"`)}}); err != nil {
				return err
			}
			if err := tx.SearchAttributeUpsert(ctx, run.RunID, []*engine.SearchAttribute{
				{Key: "kw", ValueType: search.Keyword, Raw: []byte(`"v"`), String: ptr("v")},
				{Key: "arr", ValueType: search.KeywordArray, Raw: []byte(`["x","y"]`), Strings: []string{"x", "y"}},
				{Key: "arrEmpty", ValueType: search.KeywordArray, Raw: []byte(`[]`)},
				{Key: "arrKept", ValueType: search.KeywordArray, Raw: []byte(`["b","a","b"]`), Strings: []string{"b", "a", "b"}},
				{Key: "n", ValueType: search.Int, Raw: []byte(`7`), Int: ptr(int64(7))},
				{Key: "nMax", ValueType: search.Int, Raw: []byte(`9223372036854775807`), Int: ptr(int64(math.MaxInt64))},
				{Key: "nNeg", ValueType: search.Int, Raw: []byte(`-7`), Int: ptr(int64(-7))},
				{Key: "f", ValueType: search.Double, Raw: []byte(`1.5`), Double: ptr(1.5)},
				{Key: "fIntegral", ValueType: search.Double, Raw: []byte(`3`), Double: ptr(3.0)},
				{Key: "fNegZero", ValueType: search.Double, Raw: []byte(`-0`), Double: &negZero},
				{Key: "fHuge", ValueType: search.Double, Raw: []byte(`1e300`), Double: ptr(1e300)},
				{Key: "fTiny", ValueType: search.Double, Raw: []byte(`-2.5e-300`), Double: ptr(-2.5e-300)},
				{Key: "ok", ValueType: search.Bool, Raw: []byte(`true`), Bool: ptr(true)},
				{Key: "notOk", ValueType: search.Bool, Raw: []byte(`false`), Bool: ptr(false)},
				{Key: "at", ValueType: search.Datetime, Raw: []byte(`"2026-11-28T14:00:00.987654321+01:00"`), Time: &when},
				{Key: "txt", ValueType: search.Text, Raw: []byte(`"some text"`), String: ptr("some text")},
				{Key: "txtEmpty", ValueType: search.Text, Raw: []byte{}, String: ptr("")},
				{Key: "rawNil", ValueType: search.Keyword, String: ptr("r")},
			}); err != nil {
				return err
			}
			// A later write of a key replaces the earlier one.
			return tx.SearchAttributeUpsert(ctx, run.RunID, []*engine.SearchAttribute{
				{Key: "arr", ValueType: search.KeywordArray, Raw: []byte(`["z"]`), Strings: []string{"z"}},
				{Key: "kw", ValueType: search.Int, Raw: []byte(`8`), Int: ptr(int64(8))},
			})
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !called {
			t.Fatal("the first call of a run the transaction created was not handed its read")
		}
		check(t, "new run", got)
		if len(got.DataAttributes) != 4 || len(got.SearchAttributes) != 18 {
			t.Fatalf("new run: handed over %s", show(got))
		}
		// What is handed over shares no memory with what the transaction
		// was given, which its caller may go on to change.
		run.Data[0], x.Data[0] = 'x', 'x'
		check(t, "new run, its inputs changed since", got)
	})

	t.Run("NewRunWithoutData", func(t *testing.T) {
		run, x := newRunAndExecution("born-2")
		run.Data, x.Data = nil, nil
		got, called, err := prefetch(run.RunID, func(ctx context.Context, tx engine.Tx) error { return start(ctx, tx, run, x) }, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !called {
			t.Fatal("the first call of a run the transaction created was not handed its read")
		}
		check(t, "new run without data", got)
	})

	// Writes the rows inserted do not show: a store may read, or leave the
	// read to the engine, but must not hand over the rows as inserted.
	changes := []struct {
		name  string
		late  bool // written after the read was asked for
		write func(ctx context.Context, tx engine.Tx, run *engine.Run, x *engine.Execution) error
	}{
		{"RunUpdated", false, func(ctx context.Context, tx engine.Tx, run *engine.Run, x *engine.Execution) error {
			run.Data = []byte(`{"updated":true}`)
			return tx.RunUpdate(ctx, run)
		}},
		{"ExecutionUpdated", false, func(ctx context.Context, tx engine.Tx, run *engine.Run, x *engine.Execution) error {
			x.Status, x.Data = engine.ExecExecute, []byte(`{"updated":true}`)
			return tx.ExecutionUpdate(ctx, x)
		}},
		{"AttributeWrittenAfterTheAsk", true, func(ctx context.Context, tx engine.Tx, run *engine.Run, x *engine.Execution) error {
			return tx.DataAttributeUpsert(ctx, run.RunID, []*engine.Attribute{{Key: "late", Value: []byte(`1`)}})
		}},
		{"ExecutionUpdatedAfterTheAsk", true, func(ctx context.Context, tx engine.Tx, run *engine.Run, x *engine.Execution) error {
			x.Status = engine.ExecWaiting
			return tx.ExecutionUpdate(ctx, x)
		}},
	}
	for i, c := range changes {
		t.Run(c.name, func(t *testing.T) {
			run, x := newRunAndExecution(fmt.Sprintf("changed-%d", i))
			change := func(ctx context.Context, tx engine.Tx) error { return c.write(ctx, tx, run, x) }
			write, later := func(ctx context.Context, tx engine.Tx) error {
				if err := start(ctx, tx, run, x); err != nil {
					return err
				}
				return change(ctx, tx)
			}, (func(ctx context.Context, tx engine.Tx) error)(nil)
			if c.late {
				write, later = func(ctx context.Context, tx engine.Tx) error { return start(ctx, tx, run, x) }, change
			}
			got, called, err := prefetch(run.RunID, write, later)
			if err != nil {
				t.Fatal(err)
			}
			if called {
				check(t, c.name, got)
			}
		})
	}

	t.Run("RunNotCreated", func(t *testing.T) {
		run, x := newRunAndExecution("existing")
		insertRun(t, s, run)
		got, called, err := prefetch(run.RunID, func(ctx context.Context, tx engine.Tx) error {
			return tx.ExecutionInsert(ctx, []*engine.Execution{x})
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if called {
			check(t, "run not created by the transaction", got)
		}
	})

	t.Run("NotCommitted", func(t *testing.T) {
		errStop := errors.New("stop")
		run, x := newRunAndExecution("rolled-back")
		_, called, err := prefetch(run.RunID, func(ctx context.Context, tx engine.Tx) error {
			if err := start(ctx, tx, run, x); err != nil {
				return err
			}
			return errStop
		}, nil)
		if !errors.Is(err, errStop) || called {
			t.Fatalf("rolled back: err %v, read handed over %v", err, called)
		}
		// A write that fails, at once or at the commit: the run exists.
		dup, dupX := newRunAndExecution("duplicate")
		insertRun(t, s, dup)
		_, called, err = prefetch(dup.RunID, func(ctx context.Context, tx engine.Tx) error { return start(ctx, tx, dup, dupX) }, nil)
		if err == nil || called {
			t.Fatalf("failed insert: err %v, read handed over %v", err, called)
		}
	})
}
