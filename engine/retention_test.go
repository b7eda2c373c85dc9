package engine_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine"
)

// shiftClock is the system clock moved forward by an offset the test sets.
type shiftClock struct{ offset atomic.Int64 }

func (c *shiftClock) Now() time.Time { return time.Now().Add(time.Duration(c.offset.Load())) }

func (c *shiftClock) NewTimer(d time.Duration) engine.Timer { return engine.SystemClock{}.NewTimer(d) }

// TestRetention: a closed run is deleted once it is older than its type's
// retention, counted from its close time; a running run never is, nor a run
// of a type kept forever. A deleted workflow does not exist for the API and
// its id is free again.
func TestRetention(t *testing.T) {
	forEachStoreWith(t, func(c *engine.Config) {
		c.Clock = &shiftClock{}
		c.Retention = 3 * time.Hour
		c.RetentionByType = map[string]time.Duration{"Short": time.Hour, "Forever": 0}
		c.SweepInterval = 24 * time.Hour // the test sweeps itself
		c.SweepBatch = 2                 // several batches
		// On a store that times its deletions (SQLite), a transaction per
		// run: a batch in several.
		c.SweepHold = time.Nanosecond
	}, func(t *testing.T, h *harness) {
		ctx := context.Background()
		clock := h.clock.(*shiftClock)
		h.worker.state("Done", stateHandlers{Execute: func(iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
			return decide(next(engine.GracefulCompletingState, nil)), 200
		}})
		h.worker.state("Park", parkState())
		skip := func(r *iwfapi.WorkflowStartRequest) {
			r.StateOptions = &iwfapi.WorkflowStateOptions{SkipWaitUntil: ptr(true)}
		}
		typed := func(typ string) func(*iwfapi.WorkflowStartRequest) {
			return func(r *iwfapi.WorkflowStartRequest) { r.IwfWorkflowType = typ }
		}
		closed := map[string]string{ // workflow id -> type
			"short-1": "Short", "short-2": "Short", "short-3": "Short", "keep-1": "Keep", "forever-1": "Forever",
		}
		for id, typ := range closed {
			h.start(id, "Done", nil, typed(typ), skip)
		}
		for id := range closed {
			if got := h.result(id); got.WorkflowStatus != iwfapi.WorkflowStatusCompleted {
				t.Fatalf("%s: %s", id, mustJSON(got))
			}
		}
		// No timeout: the test moves the clock by hours.
		h.start("short-running", "Park", nil, typed("Short"), func(r *iwfapi.WorkflowStartRequest) { r.WorkflowTimeoutSeconds = 0 })
		h.idle()
		exists := func(id string) bool {
			_, err := h.eng.GetWorkflow(ctx, iwfapi.WorkflowGetRequest{WorkflowId: id})
			if err != nil && engine.CodeOf(err) != engine.CodeWorkflowNotExists {
				t.Fatalf("get %s: %v", id, err)
			}
			return err == nil
		}
		sweep := func(by time.Duration, wantDeleted int) {
			t.Helper()
			clock.offset.Store(int64(by))
			st, err := h.eng.Sweep(ctx)
			if err != nil || st.Skipped || st.Deleted != wantDeleted || st.Backlog != 0 {
				t.Fatalf("sweep %s later: %+v, %v; want %d deleted, no backlog", by, st, err, wantDeleted)
			}
		}

		sweep(30*time.Minute, 0) // nothing is old enough
		sweep(2*time.Hour, 3)    // Short's hour has passed: three batches of at most 2
		for id, typ := range closed {
			if want := typ != "Short"; exists(id) != want {
				t.Fatalf("after 2h, %s (%s) exists: %v, want %v", id, typ, !want, want)
			}
		}
		if !exists("short-running") {
			t.Fatal("a running run was deleted")
		}
		sweep(4*time.Hour, 1) // the default 3 h: Keep's run; Forever stays
		if exists("keep-1") || !exists("forever-1") || !exists("short-running") {
			t.Fatalf("after 4h: keep-1 %v, forever-1 %v, short-running %v", exists("keep-1"), exists("forever-1"), exists("short-running"))
		}
		sweep(1000*time.Hour, 0)
		if got := gauge(t, h, "iwf_retention_runs_deleted_total"); got != "4" {
			t.Fatalf("iwf_retention_runs_deleted_total %q, want 4", got)
		}

		// The id of a deleted workflow is unused: even a policy that rejects
		// any earlier run starts it again.
		h.start("short-1", "Done", nil, typed("Short"), skip, func(r *iwfapi.WorkflowStartRequest) {
			r.WorkflowStartOptions = &iwfapi.WorkflowStartOptions{IdReusePolicy: ptr(iwfapi.IDReusePolicyDisallowReuse)}
		})
		if got := h.result("short-1"); got.WorkflowStatus != iwfapi.WorkflowStatusCompleted {
			t.Fatalf("short-1 started again: %s", mustJSON(got))
		}
	})
}

// TestRetentionSince: with RetentionSince set (the time a database
// upgraded from a release without retention first ran with it), a run
// closed before it is kept until a whole retention after it, and
// RetentionOutlook says when the first deletions come and how many runs
// they take.
func TestRetentionSince(t *testing.T) {
	since := time.Now().Add(time.Hour) // the runs below closed an hour before retention began
	forEachStoreWith(t, func(c *engine.Config) {
		c.Clock = &shiftClock{}
		c.Retention = time.Hour
		c.RetentionSince = since
		c.SweepInterval = 24 * time.Hour // the test sweeps itself
	}, func(t *testing.T, h *harness) {
		ctx := context.Background()
		clock := h.clock.(*shiftClock)
		h.worker.state("Done", stateHandlers{Execute: func(iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
			return decide(next(engine.GracefulCompletingState, nil)), 200
		}})
		for _, id := range []string{"old-1", "old-2"} {
			h.start(id, "Done", nil, func(r *iwfapi.WorkflowStartRequest) {
				r.StateOptions = &iwfapi.WorkflowStateOptions{SkipWaitUntil: ptr(true)}
			})
			if got := h.result(id); got.WorkflowStatus != iwfapi.WorkflowStatusCompleted {
				t.Fatalf("%s: %s", id, mustJSON(got))
			}
		}
		h.idle()

		// 90 minutes on, the runs are past their hour counted from their
		// close, but not from the start of retention.
		clock.offset.Store(int64(90 * time.Minute))
		outlook, err := h.eng.RetentionOutlook(ctx)
		if err != nil || len(outlook) != 1 {
			t.Fatalf("outlook: %+v, %v", outlook, err)
		}
		if o := outlook[0]; !o.At.Equal(since.Add(time.Hour)) || !o.ClosedBefore.Equal(since) || o.Runs != 2 || o.Retention != time.Hour {
			t.Fatalf("outlook %+v; want 2 runs closed before %s, due at %s", o, since, since.Add(time.Hour))
		}
		if st, err := h.eng.Sweep(ctx); err != nil || st.Deleted != 0 {
			t.Fatalf("sweep 90m on: %+v, %v; want nothing deleted", st, err)
		}
		// A retention after its start, they go.
		clock.offset.Store(int64(2*time.Hour + time.Minute))
		if st, err := h.eng.Sweep(ctx); err != nil || st.Deleted != 2 {
			t.Fatalf("sweep a retention after its start: %+v, %v; want 2 deleted", st, err)
		}
		outlook, err = h.eng.RetentionOutlook(ctx)
		if err != nil || len(outlook) != 1 || outlook[0].Runs != 0 {
			t.Fatalf("outlook after the sweep: %+v, %v; want nothing left", outlook, err)
		}
	})
}
