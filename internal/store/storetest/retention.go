package storetest

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

// retentionTests cover the store's half of retention: finding expired runs
// and deleting them whole.
var retentionTests = []struct {
	name string
	fn   func(t *testing.T, s engine.Store)
}{
	{"RunsExpiredSelects", testRunsExpiredSelects},
	{"RunsDeleteRemovesEverything", testRunsDeleteRemovesEverything},
	{"RunsDeleteKeepsNewerCurrentRun", testRunsDeleteKeepsNewerCurrentRun},
	{"RunsDeleteBatchKeepsNeighbours", testRunsDeleteBatchKeepsNeighbours},
	{"RetentionLockIsExclusive", testRetentionLock},
	{"RetentionStartIsRecordedOnce", testRetentionStart},
	{"RetentionStartConcurrent", testRetentionStartConcurrent},
}

// testRetentionStartConcurrent: callers that record at once all get the
// time one of them recorded.
func testRetentionStartConcurrent(t *testing.T, s engine.Store) {
	ctx := ctxT(t)
	const n = 8
	got := make([]time.Time, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], errs[i] = s.RetentionStart(ctx, at(time.Duration(i)*time.Minute))
		}()
	}
	wg.Wait()
	for i := range got {
		if errs[i] != nil || !got[i].Equal(got[0]) {
			t.Fatalf("caller %d: %v, %v; caller 0: %v", i, got[i], errs[i], got[0])
		}
	}
	if d := got[0].Sub(ms(at(0))); d < 0 || d >= n*time.Minute || d%time.Minute != 0 {
		t.Fatalf("recorded %v, want one of the callers' times", got[0])
	}
}

// testRetentionStart: the first call records its time, truncated to the
// millisecond; later calls, and calls made at once, return that time.
func testRetentionStart(t *testing.T, s engine.Store) {
	ctx := ctxT(t)
	first, err := s.RetentionStart(ctx, at(0))
	if err != nil || !first.Equal(ms(at(0))) {
		t.Fatalf("first RetentionStart = %v, %v; want %v", first, err, ms(at(0)))
	}
	if first.Location() != time.UTC {
		t.Errorf("RetentionStart returned %v, want UTC", first.Location())
	}
	if got, err := s.RetentionStart(ctx, at(time.Hour)); err != nil || !got.Equal(first) {
		t.Fatalf("second RetentionStart = %v, %v; want the first, %v", got, err, first)
	}
	if got, err := s.RetentionStart(ctx, at(-time.Hour)); err != nil || !got.Equal(first) {
		t.Fatalf("an earlier time = %v, %v; want the first, %v", got, err, first)
	}
}

// closeRun marks a run closed at the given time.
func closeRun(t *testing.T, s engine.Store, id, typ string, closed time.Time) {
	t.Helper()
	update(t, s, func(ctx context.Context, tx engine.Tx) error {
		r, err := tx.RunLock(ctx, id)
		if err != nil {
			return err
		}
		r.Status, r.ClosedAt = engine.RunCompleted, closed
		return tx.RunUpdate(ctx, r)
	})
}

func testRunsExpiredSelects(t *testing.T, s engine.Store) {
	ctx := ctxT(t)
	// a1 and a2 of type A closed at 1 h and 3 h, b1 of type B at 2 h; open
	// runs of both types never expire, whatever their age.
	for _, r := range []struct{ id, typ string }{{"a1", "A"}, {"a2", "A"}, {"b1", "B"}, {"a-open", "A"}, {"b-open", "B"}} {
		run := newRun(r.id)
		run.WorkflowType = r.typ
		run.StartedAt = at(-time.Hour)
		insertRun(t, s, run)
	}
	closeRun(t, s, "a2", "A", at(3*time.Hour))
	closeRun(t, s, "a1", "A", at(time.Hour))
	closeRun(t, s, "b1", "B", at(2*time.Hour))
	expired := func(e engine.RunExpiry) []string {
		t.Helper()
		ids, err := s.RunsExpired(ctx, e)
		if err != nil {
			t.Fatalf("RunsExpired(%+v): %v", e, err)
		}
		n, err := s.RunsExpiredCount(ctx, e)
		if err != nil || n != len(ids) && len(ids) < e.Limit {
			t.Fatalf("RunsExpiredCount(%+v) = %d, %v; RunsExpired found %d", e, n, err, len(ids))
		}
		return ids
	}
	later := at(10 * time.Hour).UnixMilli()
	equal(t, "every type, oldest close first", expired(engine.RunExpiry{ClosedBefore: later, Limit: 10}), []string{"a1", "b1", "a2"})
	equal(t, "limit", expired(engine.RunExpiry{ClosedBefore: later, Limit: 2}), []string{"a1", "b1"})
	equal(t, "closed before", expired(engine.RunExpiry{ClosedBefore: at(3 * time.Hour).UnixMilli(), Limit: 10}), []string{"a1", "b1"})
	equal(t, "except B", expired(engine.RunExpiry{ClosedBefore: later, ExceptTypes: []string{"B"}, Limit: 10}), []string{"a1", "a2"})
	equal(t, "only B", expired(engine.RunExpiry{ClosedBefore: later, Types: []string{"B"}, Limit: 10}), []string{"b1"})
	equal(t, "only A, oldest close first", expired(engine.RunExpiry{ClosedBefore: later, Types: []string{"A"}, Limit: 10}), []string{"a1", "a2"})
	equal(t, "only A, limit", expired(engine.RunExpiry{ClosedBefore: later, Types: []string{"A"}, Limit: 1}), []string{"a1"})
	equal(t, "only A, closed before", expired(engine.RunExpiry{ClosedBefore: at(3 * time.Hour).UnixMilli(), Types: []string{"A"}, Limit: 10}), []string{"a1"})
	equal(t, "only a type with none", len(expired(engine.RunExpiry{ClosedBefore: later, Types: []string{"C"}, Limit: 10})), 0)
	if n, err := s.RunsExpiredCount(ctx, engine.RunExpiry{ClosedBefore: later, Limit: 2}); err != nil || n != 2 {
		t.Fatalf("RunsExpiredCount with a cap of 2 = %d, %v", n, err)
	}
}

func testRunsDeleteRemovesEverything(t *testing.T, s engine.Store) {
	ctx := ctxT(t)
	text := &engine.SearchAttribute{Key: "t", ValueType: search.Text, Raw: []byte(`"hello world"`), String: ptr("hello world")}
	for _, r := range []string{"r1", "live"} {
		update(t, s, func(ctx context.Context, tx engine.Tx) error {
			if err := writeEverything(ctx, tx, r); err != nil {
				return err
			}
			return tx.SearchAttributeUpsert(ctx, r, []*engine.SearchAttribute{text})
		})
	}
	closeRun(t, s, "r1", "Type", at(time.Hour))
	n, err := s.RunsDelete(ctx, []string{"r1", "live", "unknown"})
	if err != nil || n != 1 {
		t.Fatalf("RunsDelete = %d, %v; want 1 (the running run and the unknown id skipped)", n, err)
	}
	// checkNothing also claims every due task: the live run's must go.
	if got := listTasks(t, s, "live"); len(got) != 1 {
		t.Fatalf("the running run's tasks: %s", show(got))
	}
	update(t, s, func(ctx context.Context, tx engine.Tx) error { return tx.TaskDeleteByRun(ctx, "live") })
	checkNothing(t, s, "r1")
	if got := getRun(t, s, "live"); got.Status != engine.RunRunning {
		t.Fatalf("the running run: %+v", got)
	}
	// The index rows of its search attributes went with it: a new run
	// under the same id, without attributes, matches none of them.
	insertRun(t, s, newRun("r1"))
	equal(t, "TEXT word of a deleted run", searchAll(t, s, cond(field("t", search.Text), search.Match, "hello"), search.Order{}, 10), []string{"live"})
	equal(t, "KEYWORD_ARRAY element of a deleted run", searchAll(t, s, cond(field("k", search.KeywordArray), search.Eq, "a"), search.Order{}, 10), []string{"live"})
	if n, err := s.RunsDelete(ctx, []string{"r1"}); err != nil || n != 0 {
		t.Fatalf("RunsDelete of a running run = %d, %v", n, err)
	}
}

func testRunsDeleteKeepsNewerCurrentRun(t *testing.T, s engine.Store) {
	ctx := ctxT(t)
	old, cur := newRun("old"), newRun("cur")
	old.WorkflowID, cur.WorkflowID = "wf", "wf"
	update(t, s, func(ctx context.Context, tx engine.Tx) error {
		if _, err := tx.WorkflowLock(ctx, "wf"); err != nil {
			return err
		}
		if err := tx.RunInsert(ctx, old); err != nil {
			return err
		}
		if err := tx.RunInsert(ctx, cur); err != nil {
			return err
		}
		return tx.WorkflowSetCurrentRun(ctx, "wf", "cur")
	})
	closeRun(t, s, "old", "Type", at(time.Hour))
	if n, err := s.RunsDelete(ctx, []string{"old"}); err != nil || n != 1 {
		t.Fatalf("RunsDelete = %d, %v", n, err)
	}
	view(t, s, func(ctx context.Context, tx engine.ReadTx) error {
		id, err := tx.WorkflowGetCurrentRun(ctx, "wf")
		if err != nil || id != "cur" {
			t.Fatalf("current run after deleting an older one: %q, %v", id, err)
		}
		return nil
	})
}

func testRetentionLock(t *testing.T, s engine.Store) {
	ctx := ctxT(t)
	release, ok, err := s.RetentionLock(ctx)
	if err != nil || !ok {
		t.Fatalf("first RetentionLock: %v, %v", ok, err)
	}
	if _, ok, err := s.RetentionLock(ctx); err != nil || ok {
		t.Fatalf("second RetentionLock while the first holds it: %v, %v", ok, err)
	}
	release()
	release2, ok, err := s.RetentionLock(ctx)
	if err != nil || !ok {
		t.Fatalf("RetentionLock after release: %v, %v", ok, err)
	}
	release2()
}

// testRunsDeleteBatchKeepsNeighbours deletes a batch of closed runs whose
// rows sit among those of runs that stay (closed but not in the batch, and
// running): the batch goes whole, in one call, and the others keep every
// row, and their search attributes of every type stay found by value and by
// presence. With a store that times its deletions (engine.RunsDeleteTimer)
// the batch is deleted through it.
func testRunsDeleteBatchKeepsNeighbours(t *testing.T, s engine.Store) {
	ctx := ctxT(t)
	const n = 24
	id := func(i int) string { return fmt.Sprintf("b%02d", i) }
	var doomed, kept []string
	for i := range n {
		r := id(i)
		update(t, s, func(ctx context.Context, tx engine.Tx) error {
			if err := writeEverything(ctx, tx, r); err != nil {
				return err
			}
			return tx.SearchAttributeUpsert(ctx, r, []*engine.SearchAttribute{
				kwAttr("kw", "v"), intAttr("int", int64(i)), doubleAttr("dbl", float64(i)/2), boolAttr("bool", i%2 == 0),
				timeAttr("time", at(time.Duration(i)*time.Minute)), textAttr("txt", "hello world"), arrayAttr("arr", "x", "y"),
			})
		})
		switch i % 3 {
		case 0, 1: // two of three closed and in the batch
			closeRun(t, s, r, "Type", at(time.Hour))
			doomed = append(doomed, r)
		default: // the rest: closed but kept, or running
			if i%2 == 0 {
				closeRun(t, s, r, "Type", at(time.Hour))
			}
			kept = append(kept, r)
		}
	}
	var deleted int
	var err error
	if timer, ok := s.(engine.RunsDeleteTimer); ok {
		var held time.Duration
		deleted, held, err = timer.RunsDeleteTimed(ctx, doomed)
		if err == nil && held <= 0 {
			t.Errorf("RunsDeleteTimed held the writer for %s; want the time its deletion ran", held)
		}
	} else {
		deleted, err = s.RunsDelete(ctx, doomed)
	}
	if err != nil || deleted != len(doomed) {
		t.Fatalf("RunsDelete of %d runs = %d, %v", len(doomed), deleted, err)
	}
	view(t, s, func(ctx context.Context, tx engine.ReadTx) error {
		for _, r := range doomed {
			if _, err := tx.RunGet(ctx, r); !errors.Is(err, engine.ErrNotFound) {
				t.Errorf("run %s after its deletion: %v", r, err)
			}
			if a, err := tx.SearchAttributeGet(ctx, r, nil); err != nil || len(a) != 0 {
				t.Errorf("search attributes of %s after its deletion: %d, %v", r, len(a), err)
			}
		}
		for _, r := range kept {
			if _, err := tx.RunGet(ctx, r); err != nil {
				t.Errorf("kept run %s: %v", r, err)
			}
			if id, err := tx.WorkflowGetCurrentRun(ctx, "wf-"+r); err != nil || id != r {
				t.Errorf("workflow of kept run %s: %q, %v", r, id, err)
			}
			if xs, err := tx.ExecutionList(ctx, r); err != nil || len(xs) != 1 {
				t.Errorf("executions of kept run %s: %d, %v", r, len(xs), err)
			}
			if h, err := tx.HistoryList(ctx, r, 0, 0); err != nil || len(h) != 1 {
				t.Errorf("history of kept run %s: %d, %v", r, len(h), err)
			}
			if a, err := tx.SearchAttributeGet(ctx, r, nil); err != nil || len(a) != 8 {
				t.Errorf("search attributes of kept run %s: %d, %v", r, len(a), err)
			}
		}
		return nil
	})
	want := sortedIDs(kept)
	for _, c := range []struct {
		name string
		expr search.Expr
	}{
		{"KEYWORD =", cond(field("kw", search.Keyword), search.Eq, "v")},
		{"INT >=", cond(field("int", search.Int), search.Ge, int64(0))},
		{"DOUBLE <", cond(field("dbl", search.Double), search.Lt, float64(n))},
		{"BOOL IS NOT NULL", cond(field("bool", search.Bool), search.Present)},
		{"DATETIME BETWEEN", cond(field("time", search.Datetime), search.Between, at(-time.Hour), at(time.Duration(n)*time.Minute))},
		{"TEXT MATCH", cond(field("txt", search.Text), search.Match, "hello")},
		{"KEYWORD_ARRAY =", cond(field("arr", search.KeywordArray), search.Eq, "y")},
	} {
		equal(t, c.name+" after a batch deletion", sortedIDs(searchAll(t, s, c.expr, search.Order{}, 100)), want)
	}
}
