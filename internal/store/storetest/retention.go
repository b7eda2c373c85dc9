package storetest

import (
	"context"
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
	{"RetentionLockIsExclusive", testRetentionLock},
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
