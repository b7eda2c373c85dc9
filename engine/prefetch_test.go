package engine_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/store/postgres"
	"github.com/iwf-server/iwf-server/internal/store/postgres/pgtest"
)

// callReadCounter is a PostgreSQL store that counts the reads worker calls
// make for themselves (ReadForCall); its transactions are the store's own,
// so they can still carry reads behind their commit (CallPrefetcher).
type callReadCounter struct {
	*postgres.Store
	reads atomic.Int32
}

func (r *callReadCounter) ReadForCall(ctx context.Context, runID, executionID string) (*engine.CallRead, error) {
	r.reads.Add(1)
	return r.Store.ReadForCall(ctx, runID, executionID)
}

// TestCallsMadeDueByACommitReadNothing: on PostgreSQL, every worker call
// that a commit makes due is sent what was read behind that commit, so the
// calls of a workflow that never waits make no read of their own; what
// they are sent includes what the commit wrote. A retried call reads
// afresh.
func TestCallsMadeDueByACommitReadNothing(t *testing.T) {
	st := &callReadCounter{Store: pgtest.NewStore(t)}
	h := newHarness(t, st)
	var failedOnce atomic.Bool
	h.worker.state("S1", stateHandlers{
		WaitUntil: func(req iwfapi.WorkflowStateStartRequest) (iwfapi.WorkflowStateStartResponse, int) {
			return iwfapi.WorkflowStateStartResponse{UpsertDataObjects: &[]iwfapi.KeyValue{{Key: ptr("k"), Value: obj(`"v1"`)}}}, 200
		},
		Execute: func(req iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
			// Written by waitUntil's answer, whose commit made this call due.
			if d := deref(req.DataObjects); len(d) != 1 || *d[0].Value.Data != `"v1"` {
				t.Errorf("S1 execute was sent data %s, want k=v1", mustJSON(d))
				return iwfapi.WorkflowStateDecideResponse{}, 400
			}
			return decide(next("S2", nil, skipWaitUntil)), 200
		},
	})
	h.worker.state("S2", stateHandlers{
		Execute: func(req iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
			if deref(req.Context.Attempt) == 1 && req.Context.WorkflowId == "wf-retry" {
				failedOnce.Store(true)
				return iwfapi.WorkflowStateDecideResponse{}, 500
			}
			return decide(next(engine.GracefulCompletingState, nil)), 200
		},
	})
	h.start("wf-prefetch", "S1", nil)
	if got := h.result("wf-prefetch"); got.WorkflowStatus != iwfapi.WorkflowStatusCompleted {
		t.Fatalf("wf-prefetch: %s", mustJSON(got))
	}
	if n := st.reads.Load(); n != 0 {
		t.Errorf("3 worker calls made due by commits read %d times, want 0", n)
	}

	h.start("wf-retry", "S1", nil, func(r *iwfapi.WorkflowStartRequest) {
		r.StateOptions = &iwfapi.WorkflowStateOptions{ExecuteApiRetryPolicy: &iwfapi.RetryPolicy{InitialIntervalSeconds: ptr(int32(1)), MaximumAttempts: ptr(int32(3))}}
	})
	if got := h.result("wf-retry"); got.WorkflowStatus != iwfapi.WorkflowStatusCompleted || !failedOnce.Load() {
		t.Fatalf("wf-retry: %s (first attempt failed: %v)", mustJSON(got), failedOnce.Load())
	}
	if n := st.reads.Load(); n != 1 {
		t.Errorf("the retried call read %d times, want once", n)
	}
}
