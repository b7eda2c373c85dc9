package engine_test

import (
	"context"
	"strings"
	"testing"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine"
)

// The transaction that applies a worker's answer first takes the task as
// it was read before the call (engine.TaskTakeExpecter): on PostgreSQL one
// round trip less, checked at commit; on SQLite checked at once, without
// reading the run and the execution back. These tests change the workflow
// while a call is out and check that every answer is applied exactly as
// TaskTake would have it, the check's fallback included.

// retaken returns the engine's iwf_answers_retaken_total once its tasks
// are done ("" when it has no sample).
func retaken(t *testing.T, h *harness) string {
	t.Helper()
	for _, line := range strings.Split(h.idleMetrics(), "\n") {
		if v, ok := strings.CutPrefix(line, "iwf_answers_retaken_total "); ok {
			return v
		}
	}
	return ""
}

// historyCount counts a run's history events of type typ whose execution
// ID begins with prefix.
func historyCount(t *testing.T, h *harness, runID, typ, prefix string) int {
	t.Helper()
	n := 0
	err := h.store.View(context.Background(), func(ctx context.Context, tx engine.ReadTx) error {
		events, err := tx.HistoryList(ctx, runID, 0, 1000)
		for _, ev := range events {
			if ev.Type == typ && strings.HasPrefix(ev.ExecutionID, prefix) {
				n++
			}
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestAnswerAfterSignalDuringCall: a signal that arrives while S1's
// execute call is out changes neither the run's row nor the execution, so
// the answer's check holds; the signal waits in its channel for S2.
func TestAnswerAfterSignalDuringCall(t *testing.T) {
	forEachStore(t, func(t *testing.T, h *harness) {
		const id = "wf-signal-during-call"
		h.worker.state("S1", stateHandlers{
			Execute: func(iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
				// The signal commits before the answer goes back.
				if err := h.eng.SignalWorkflow(context.Background(), iwfapi.WorkflowSignalRequest{WorkflowId: id, SignalChannelName: "go", SignalValue: obj(`"sent during S1"`)}); err != nil {
					t.Errorf("signal: %v", err)
				}
				return decide(next("S2", nil)), 200
			},
		})
		h.worker.state("S2", stateHandlers{
			WaitUntil: func(iwfapi.WorkflowStateStartRequest) (iwfapi.WorkflowStateStartResponse, int) {
				return iwfapi.WorkflowStateStartResponse{CommandRequest: &iwfapi.CommandRequest{
					CommandWaitingType: ptr(iwfapi.CommandWaitingTypeAllCompleted),
					SignalCommands:     &[]iwfapi.SignalCommand{{CommandId: ptr("s"), SignalChannelName: "go"}},
				}}, 200
			},
			Execute: func(req iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
				return decide(next(engine.GracefulCompletingState, obj(mustJSON(req.CommandResults.SignalResults)))), 200
			},
		})
		runID := h.start(id, "S1", nil, func(r *iwfapi.WorkflowStartRequest) {
			r.StateOptions = &iwfapi.WorkflowStateOptions{SkipWaitUntil: ptr(true)}
		})
		got := h.result(id)
		if got.WorkflowStatus != iwfapi.WorkflowStatusCompleted {
			t.Fatalf("status %s, want COMPLETED", got.WorkflowStatus)
		}
		want := mustJSON([]iwfapi.SignalResult{{CommandId: "s", SignalChannelName: "go", SignalRequestStatus: iwfapi.ChannelRequestStatusReceived, SignalValue: obj(`"sent during S1"`)}})
		if out := *deref(got.Results)[0].CompletedStateOutput.Data; out != want {
			t.Fatalf("S2 saw %s, want %s", out, want)
		}
		if n1, n2 := h.worker.count("S1.execute"), h.worker.count("S2.execute"); n1 != 1 || n2 != 1 {
			t.Fatalf("S1 execute called %d times, S2 %d; want 1 and 1", n1, n2)
		}
		if c, s := historyCount(t, h, runID, "ExecuteCompleted", "S1-"), historyCount(t, h, runID, "StateExecutionStarted", "S2-"); c != 1 || s != 1 {
			t.Errorf("history: S1's answer applied %d times, S2 started %d times; want 1 and 1", c, s)
		}
		if n := retaken(t, h); n != "0" {
			t.Errorf("iwf_answers_retaken_total %q, want 0: the check holds", n)
		}
	})
}

// TestAnswerAfterStopDuringCall: the workflow is stopped while S1's
// execute call is out. The answer's check fails (the run closed, the task
// is gone: at commit on PostgreSQL, at once on SQLite) and the transaction
// runs again with TaskTake, which finds the task stale: the answer is
// dropped.
func TestAnswerAfterStopDuringCall(t *testing.T) {
	forEachStore(t, func(t *testing.T, h *harness) {
		const id = "wf-stop-during-call"
		h.worker.state("S1", stateHandlers{
			Execute: func(iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
				if err := h.eng.StopWorkflow(context.Background(), iwfapi.WorkflowStopRequest{WorkflowId: id}); err != nil {
					t.Errorf("stop: %v", err)
				}
				return decide(next("S2", nil)), 200
			},
		})
		runID := h.start(id, "S1", nil, func(r *iwfapi.WorkflowStartRequest) {
			r.StateOptions = &iwfapi.WorkflowStateOptions{SkipWaitUntil: ptr(true)}
		})
		if got := h.result(id); got.WorkflowStatus != iwfapi.WorkflowStatusCanceled {
			t.Fatalf("status %s, want CANCELED", got.WorkflowStatus)
		}
		if n := retaken(t, h); n != "1" {
			t.Errorf("iwf_answers_retaken_total %q, want 1", n)
		}
		if c := historyCount(t, h, runID, "ExecuteCompleted", "S1-"); c != 0 || h.worker.count("S2.waitUntil") != 0 {
			t.Errorf("S1's answer applied %d times after the stop, S2 called %d times; want 0 and 0", c, h.worker.count("S2.waitUntil"))
		}
	})
}
