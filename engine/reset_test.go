package engine_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine"
)

func TestResetByStateIDAndExecutionID(t *testing.T) {
	forEachStore(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		h.worker.state("S1", stateHandlers{Execute: func(req iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
			return decide(next("S2", obj("1"), skipWaitUntil)), 200
		}})
		h.worker.state("S2", stateHandlers{Execute: func(req iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
			n, _ := strconv.Atoi(deref(req.StateInput.Data))
			if n < 5 {
				return decide(next("S2", obj(strconv.Itoa(n+1)), skipWaitUntil)), 200
			}
			return decide(next(engine.GracefulCompletingState, req.StateInput)), 200
		}})
		wantResults := `[{"completedStateExecutionId":"S2-5","completedStateId":"S2","completedStateOutput":{"data":"5","encoding":"json"}}]`
		first := h.start("wf-reset", "S1", nil, func(r *iwfapi.WorkflowStartRequest) {
			r.StateOptions = &iwfapi.WorkflowStateOptions{SkipWaitUntil: ptr(true)}
		})
		if got := h.result("wf-reset"); mustJSON(got.Results) != wantResults {
			t.Fatalf("first run results %s", mustJSON(got.Results))
		}
		for _, step := range []struct {
			req       iwfapi.WorkflowResetRequest
			decisions int
		}{
			{iwfapi.WorkflowResetRequest{ResetType: iwfapi.WorkflowResetTypeStateId, StateId: ptr("S2")}, 10},
			{iwfapi.WorkflowResetRequest{ResetType: iwfapi.WorkflowResetTypeStateExecutionId, StateExecutionId: ptr("S2-4")}, 12},
		} {
			step.req.WorkflowId = "wf-reset"
			resp, err := h.eng.ResetWorkflow(ctx, step.req)
			if err != nil || resp.WorkflowRunId == first {
				t.Fatalf("reset %s: %v", step.req.ResetType, err)
			}
			got := h.result("wf-reset")
			if got.WorkflowRunId != resp.WorkflowRunId || mustJSON(got.Results) != wantResults {
				t.Fatalf("after reset %s: %s", step.req.ResetType, mustJSON(got))
			}
			if n := h.worker.count("S2.execute"); n != step.decisions {
				t.Fatalf("after reset %s S2 executed %d times, want %d", step.req.ResetType, n, step.decisions)
			}
		}
		if h.worker.count("S1.execute") != 1 {
			t.Fatalf("S1 executed again")
		}
		if _, err := h.eng.ResetWorkflow(ctx, iwfapi.WorkflowResetRequest{WorkflowId: "wf-reset", ResetType: iwfapi.WorkflowResetTypeStateId, StateId: ptr("Nope")}); engine.CodeOf(err) != engine.CodeInvalidArgument {
			t.Fatalf("reset to an unknown state: %v", err)
		}
	})
}

func TestResetToBeginningReappliesSignals(t *testing.T) {
	forEachStore(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		h.worker.state("S1", stateHandlers{
			WaitUntil: func(req iwfapi.WorkflowStateStartRequest) (iwfapi.WorkflowStateStartResponse, int) {
				return iwfapi.WorkflowStateStartResponse{CommandRequest: &iwfapi.CommandRequest{
					CommandWaitingType: ptr(iwfapi.CommandWaitingTypeAllCompleted),
					SignalCommands:     &[]iwfapi.SignalCommand{{CommandId: ptr("s"), SignalChannelName: "go"}},
				}}, 200
			},
			Execute: func(req iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
				return decide(next(engine.GracefulCompletingState, deref(req.CommandResults.SignalResults)[0].SignalValue)), 200
			},
		})
		h.start("wf-reset-sig", "S1", nil)
		if err := h.eng.SignalWorkflow(ctx, iwfapi.WorkflowSignalRequest{WorkflowId: "wf-reset-sig", SignalChannelName: "go", SignalValue: obj("v")}); err != nil {
			t.Fatal(err)
		}
		h.result("wf-reset-sig")
		if _, err := h.eng.ResetWorkflow(ctx, iwfapi.WorkflowResetRequest{WorkflowId: "wf-reset-sig", ResetType: iwfapi.WorkflowResetTypeBeginning}); err != nil {
			t.Fatal(err)
		}
		if got := h.result("wf-reset-sig"); got.WorkflowStatus != iwfapi.WorkflowStatusCompleted || *deref(got.Results)[0].CompletedStateOutput.Data != "v" {
			t.Fatalf("after reset: %s", mustJSON(got))
		}
		if _, err := h.eng.ResetWorkflow(ctx, iwfapi.WorkflowResetRequest{WorkflowId: "wf-reset-sig", ResetType: iwfapi.WorkflowResetTypeBeginning, SkipSignalReapply: ptr(true)}); err != nil {
			t.Fatal(err)
		}
		h.eventually("S1 waiting again", func() bool { return h.worker.count("S1.waitUntil") == 3 })
		if s := h.status("wf-reset-sig"); s != iwfapi.WorkflowStatusRunning {
			t.Fatalf("without signal re-application the run must wait, status %s", s)
		}
	})
}
