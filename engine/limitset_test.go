package engine_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/store/postgres/pgtest"
)

// completes is a state whose execute completes the workflow, telling
// arrived of each call.
func completes(arrived chan<- string) stateHandlers {
	return stateHandlers{Execute: func(req iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
		arrived <- req.Context.WorkflowId
		return decide(next("_SYS_GRACEFUL_COMPLETING_WORKFLOW", nil)), 200
	}}
}

func (h *harness) setLimit(kind engine.LimitKind, target string, v float64) engine.Limit {
	h.t.Helper()
	l, err := h.eng.SetLimit(engine.WithActor(context.Background(), "ops"), engine.LimitChange{Kind: kind, Target: target, Value: v})
	if err != nil {
		h.t.Fatalf("SetLimit %s %s=%g: %v", kind, target, v, err)
	}
	return l
}

func (h *harness) listLimits() []engine.Limit {
	h.t.Helper()
	ls, err := h.eng.ListLimits(context.Background())
	if err != nil {
		h.t.Fatal(err)
	}
	return ls
}

// TestLimitPauseAndResume: a limit set at run time to 0 holds every call
// it applies to (they wait in its queue, describe says for what), raising
// it lets them go in their order, and removing it lets all go; the limit
// is listed as set, by whom, and removed.
func TestLimitPauseAndResume(t *testing.T) {
	forEachStoreOpen(t, func(t *testing.T, st engine.Store) {
		w := newTestWorker(t)
		h := newHarnessOn(t, st, w)
		hp := hostPort(t, w)
		key := "worker:" + hp
		arrived := make(chan string, 16)
		w.state("S", completes(arrived))
		if ls := h.listLimits(); len(ls) != 0 {
			t.Fatalf("limits of a new store: %+v", ls)
		}

		l := h.setLimit(engine.LimitWorkerConcurrency, strings.ToUpper(hp), 0)
		if l.Key() != key || l.Value != 0 || l.Source != engine.LimitSourceAPI || l.UpdatedBy != "ops" {
			t.Fatalf("SetLimit answered %+v", l)
		}
		for i := range 3 {
			h.start(fmt.Sprint("paused-", i), "S", nil, skipStart)
			h.eventually(fmt.Sprintf("%d calls waiting", i+1), func() bool { return h.limitWaiting(key) == i+1 })
		}
		// Waiting for the limit means no call was made: the worker has
		// seen none.
		if n := w.count("S.execute"); n != 0 {
			t.Fatalf("%d calls while paused", n)
		}
		d := h.describe("paused-1")
		if len(d.PendingStates) != 1 || deref(d.PendingStates[0].WaitingForLimit) != key {
			t.Fatalf("describe of a paused call: %s", mustJSON(d.PendingStates))
		}
		if m := h.metrics(); !strings.Contains(m, `iwf_limit_value{limit="`+key+`"} 0`) {
			t.Fatalf("iwf_limit_value of a paused limit:\n%s", m)
		}

		// Raised to 1: the calls go, one at a time, in their order.
		h.setLimit(engine.LimitWorkerConcurrency, hp, 1)
		for i := range 3 {
			if got, want := <-arrived, fmt.Sprint("paused-", i); got != want {
				t.Fatalf("call %d from %s, want %s", i, got, want)
			}
			if s := h.result(fmt.Sprint("paused-", i)).WorkflowStatus; s != iwfapi.WorkflowStatusCompleted {
				t.Fatalf("paused-%d: %s", i, s)
			}
		}
		ls := h.listLimits()
		if len(ls) != 1 || ls[0].Kind != engine.LimitWorkerConcurrency || ls[0].Target != hp || ls[0].Value != 1 || ls[0].UpdatedBy != "ops" {
			t.Fatalf("limits listed: %+v", ls)
		}

		// Paused again, then removed: every waiting call goes at once.
		h.setLimit(engine.LimitWorkerConcurrency, hp, 0)
		for i := range 3 {
			h.start(fmt.Sprint("removed-", i), "S", nil, skipStart)
		}
		h.eventually("3 calls waiting", func() bool { return h.limitWaiting(key) == 3 })
		was, err := h.eng.DeleteLimit(context.Background(), engine.LimitWorkerConcurrency, hp)
		if err != nil || was.Value != 0 || was.Key() != key {
			t.Fatalf("DeleteLimit: %+v, %v", was, err)
		}
		for i := range 3 {
			if s := h.result(fmt.Sprint("removed-", i)).WorkflowStatus; s != iwfapi.WorkflowStatusCompleted {
				t.Fatalf("removed-%d: %s", i, s)
			}
		}
		if ls := h.listLimits(); len(ls) != 0 {
			t.Fatalf("limits after the removal: %+v", ls)
		}
		if m := h.metrics(); strings.Contains(m, "iwf_limit_value") {
			t.Fatalf("metrics of a removed limit:\n%s", m)
		}
		if _, err := h.eng.DeleteLimit(context.Background(), engine.LimitWorkerConcurrency, hp); engine.CodeOf(err) != engine.CodeInvalidArgument {
			t.Fatalf("removing a limit not set: %v", err)
		}
	})
}

// TestLimitTypePauseAndRate: a workflow type's concurrency limit and a
// worker host's rate limit pause at 0 too, and resume when raised.
func TestLimitTypePauseAndRate(t *testing.T) {
	forEachStoreOpen(t, func(t *testing.T, st engine.Store) {
		w := newTestWorker(t)
		h := newHarnessOn(t, st, w)
		arrived := make(chan string, 16)
		w.state("S", completes(arrived))
		for _, c := range []struct {
			kind   engine.LimitKind
			target string
			raise  float64
		}{
			{engine.LimitTypeConcurrency, "TestWorkflow", 2},
			{engine.LimitWorkerRate, hostPort(t, w), 100},
		} {
			l := h.setLimit(c.kind, c.target, 0)
			id := "paused-" + string(c.kind)
			h.start(id, "S", nil, skipStart)
			h.eventually(id+" waiting", func() bool { return h.limitWaiting(l.Key()) == 1 })
			h.setLimit(c.kind, c.target, c.raise)
			if got := <-arrived; got != id {
				t.Fatalf("call from %s, want %s", got, id)
			}
			if s := h.result(id).WorkflowStatus; s != iwfapi.WorkflowStatusCompleted {
				t.Fatalf("%s: %s", id, s)
			}
			if _, err := h.eng.DeleteLimit(context.Background(), c.kind, c.target); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// TestLimitValidation: the engine refuses a limit it cannot apply, whatever
// the surface that asks.
func TestLimitValidation(t *testing.T) {
	forEachStore(t, func(t *testing.T, h *harness) {
		for _, c := range []engine.LimitChange{
			{Kind: "SOMETHING", Target: "w:80", Value: 1},
			{Kind: engine.LimitWorkerConcurrency, Target: "no-port", Value: 1},
			{Kind: engine.LimitWorkerConcurrency, Target: "w:0", Value: 1},
			{Kind: engine.LimitWorkerRate, Target: "w:80", Value: -1},
			{Kind: engine.LimitWorkerConcurrency, Target: "w:80", Value: 1.5},
			{Kind: engine.LimitTypeConcurrency, Target: "", Value: 1},
			{Kind: engine.LimitTypeConcurrency, Target: "T\x00", Value: 1},
			{Kind: engine.LimitTypeConcurrency, Target: strings.Repeat("t", engine.MaxNameBytes+1), Value: 1},
			{Kind: engine.LimitWorkerRate, Target: "w:80", Value: engine.MaxLimitValue + 1},
		} {
			if _, err := h.eng.SetLimit(context.Background(), c); engine.CodeOf(err) != engine.CodeInvalidArgument {
				t.Errorf("SetLimit %+v: %v, want an invalid argument", c, err)
			}
		}
		if l := h.setLimit(engine.LimitWorkerRate, "W.Example:8080", 0.5); l.Target != "w.example:8080" || l.Value != 0.5 {
			t.Errorf("a rate limit as stored: %+v", l)
		}
		if ls := h.listLimits(); len(ls) != 1 {
			t.Errorf("limits listed: %+v", ls)
		}
	})
}

// TestLimitFlagsFillOnlyKeysNeverStored: the server's flags are a starting
// set. A start stores the flags' limits whose keys have no row; from then
// on the stored limits decide: a limit changed or removed at run time
// stays so across restarts with the same flags, and LimitsAtStart says
// which flags it overrides.
func TestLimitFlagsFillOnlyKeysNeverStored(t *testing.T) {
	forEachStoreOpen(t, func(t *testing.T, st engine.Store) {
		w := newTestWorker(t)
		hp := hostPort(t, w)
		flags := engine.Limits{WorkerConcurrency: map[string]int{hp: 2}, TypeConcurrency: map[string]int{"T": 3}}
		start := func(l engine.Limits) *harness {
			h := newHarnessOn(t, st, w, func(c *engine.Config) { c.Limits = l })
			return h
		}
		stop := func(h *harness) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := h.eng.Close(ctx); err != nil {
				t.Fatal(err)
			}
		}

		h := start(flags)
		at := h.eng.LimitsAtStart()
		if len(at.Stored) != 2 || len(at.Overridden) != 0 {
			t.Fatalf("first start: %+v", at)
		}
		ls := h.listLimits()
		if len(ls) != 2 || ls[0].Source != engine.LimitSourceFlag || ls[0].Key() != "type:T" || ls[1].Key() != "worker:"+hp || ls[1].Value != 2 {
			t.Fatalf("limits stored from the flags: %+v", ls)
		}
		h.setLimit(engine.LimitWorkerConcurrency, hp, 7)
		if _, err := h.eng.DeleteLimit(context.Background(), engine.LimitTypeConcurrency, "T"); err != nil {
			t.Fatal(err)
		}
		stop(h)

		// The same flags again: the stored limits hold.
		h = start(flags)
		at = h.eng.LimitsAtStart()
		if len(at.Stored) != 0 || len(at.Overridden) != 2 {
			t.Fatalf("second start: %+v", at)
		}
		text := at.String()
		if !strings.Contains(text, "--worker-concurrency "+hp+"=2: not applied: the stored limit 7 holds (ops") ||
			!strings.Contains(text, "--type-concurrency T=3: not applied: the limit was removed through the API and stays removed") {
			t.Fatalf("what the start says:\n%s", text)
		}
		if in := h.eng.LimitsInForce(); in.WorkerConcurrency[hp] != 7 || len(in.TypeConcurrency) != 0 {
			t.Fatalf("limits in force: %+v", in)
		}
		stop(h)

		// A flag of a new key is stored.
		h = start(engine.Limits{WorkerRate: map[string]float64{hp: 4}})
		at = h.eng.LimitsAtStart()
		if len(at.Stored) != 1 || at.Stored[0].Kind != engine.LimitWorkerRate || at.Stored[0].Value != 4 {
			t.Fatalf("third start: %+v", at)
		}
		if in := h.eng.LimitsInForce(); in.WorkerConcurrency[hp] != 7 || in.WorkerRate[hp] != 4 {
			t.Fatalf("limits in force: %+v", in)
		}
	})
}

// TestLimitsAppliedOnEveryNode: a limit set through one node holds on
// another node of the same PostgreSQL database at once, told by the
// change feed (the other node's periodic reading is an hour away): a
// pause set on node A holds a call on node B, and raising it on A lets
// the call go on B.
func TestLimitsAppliedOnEveryNode(t *testing.T) {
	stores := pgtest.NewStores(t, 2)
	w := newTestWorker(t)
	applied := make(chan engine.Limits, 16)
	a := newHarnessOn(t, stores[0], w, noFallback)
	b := newHarnessOn(t, stores[1], w, noFallback, func(c *engine.Config) {
		c.LimitRefresh = time.Hour
		c.OnLimits = func(l engine.Limits) { applied <- l }
	})
	listening(t, a, stores[1])
	listening(t, b, stores[0])
	hp := hostPort(t, w)
	key := "worker:" + hp
	arrived := make(chan string, 4)
	w.state("S", completes(arrived))
	// waitApplied waits until node B applies a concurrency limit of n.
	waitApplied := func(n int) {
		t.Helper()
		timeout := time.After(time.Minute)
		for {
			select {
			case l := <-applied:
				if v, ok := l.WorkerConcurrency[hp]; ok && v == n {
					return
				}
			case <-timeout:
				t.Fatalf("node B did not apply %s=%d", key, n)
			}
		}
	}

	a.setLimit(engine.LimitWorkerConcurrency, hp, 0)
	waitApplied(0)
	b.start("on-b", "S", nil, skipStart)
	b.eventually("the call waiting on node B", func() bool { return b.limitWaiting(key) == 1 })
	if n := w.count("S.execute"); n != 0 {
		t.Fatalf("%d calls while paused", n)
	}
	a.setLimit(engine.LimitWorkerConcurrency, hp, 1)
	waitApplied(1)
	if got := <-arrived; got != "on-b" {
		t.Fatalf("call from %s", got)
	}
	if s := b.result("on-b").WorkflowStatus; s != iwfapi.WorkflowStatusCompleted {
		t.Fatalf("on-b: %s", s)
	}
}
