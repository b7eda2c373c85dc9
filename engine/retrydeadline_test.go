package engine_test

import (
	"context"
	"strings"
	"testing"

	"github.com/iwf-server/iwf-server/api/iwfapi"
)

// A state API's retries stop when the next attempt would start at or after
// the workflow's deadline: the attempts are exhausted then, so the state's
// failure policy applies with the worker's last error, instead of the
// workflow timing out while it waits for an attempt that cannot finish in
// time (iWF: an activity's retries end at its schedule-to-close timeout,
// the workflow's run timeout).
func TestRetriesStopAtWorkflowDeadline(t *testing.T) {
	forEachStore(t, func(t *testing.T, h *harness) {
		failing := stateHandlers{Execute: func(iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
			return iwfapi.WorkflowStateDecideResponse{}, 500
		}}
		h.worker.state("S1", failing)
		// The next attempt would come an hour later: past the 60 s deadline.
		hourly := &iwfapi.RetryPolicy{InitialIntervalSeconds: ptr(int32(3600)), MaximumIntervalSeconds: ptr(int32(3600))}
		h.start("wf-deadline", "S1", nil, func(r *iwfapi.WorkflowStartRequest) {
			r.StateOptions = &iwfapi.WorkflowStateOptions{SkipWaitUntil: ptr(true), ExecuteApiRetryPolicy: hourly}
		})
		got := h.result("wf-deadline")
		if got.WorkflowStatus != iwfapi.WorkflowStatusFailed || string(deref(got.ErrorType)) != "STATE_API_FAIL_ERROR_TYPE" ||
			!strings.HasPrefix(deref(got.ErrorMessage), "statusCode: 500") {
			t.Fatalf("result %s, want FAILED with the worker's error", mustJSON(got))
		}
		if n := h.worker.count("S1.execute"); n != 1 {
			t.Fatalf("execute called %d times, want 1", n)
		}
		hist, err := h.eng.WorkflowHistory(context.Background(), iwfapi.WorkflowHistoryRequest{WorkflowId: "wf-deadline"})
		if err != nil {
			t.Fatal(err)
		}
		marked := false
		for _, ev := range hist.Events {
			marked = marked || ev.EventType == "EXECUTEAttemptFailed" && ev.Data != nil && (*ev.Data)["retriesEndAt"] == "workflowTimeout"
		}
		if !marked {
			t.Fatalf("the last attempt's failure does not say the workflow's deadline ended the retries: %s", mustJSON(hist.Events))
		}

		// The failure policy applies: execute's proceed state runs.
		h.worker.state("Recover", stateHandlers{Execute: func(iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
			return decide(next("_SYS_GRACEFUL_COMPLETING_WORKFLOW", obj(`"recovered"`))), 200
		}})
		h.start("wf-deadline-proceed", "S1", nil, func(r *iwfapi.WorkflowStartRequest) {
			r.StateOptions = &iwfapi.WorkflowStateOptions{SkipWaitUntil: ptr(true), ExecuteApiRetryPolicy: hourly,
				ExecuteApiFailurePolicy:              ptr(iwfapi.ExecuteApiFailurePolicyProceedToConfiguredState),
				ExecuteApiFailureProceedStateId:      ptr("Recover"),
				ExecuteApiFailureProceedStateOptions: &iwfapi.WorkflowStateOptions{SkipWaitUntil: ptr(true)}}
		})
		if got := h.result("wf-deadline-proceed"); got.WorkflowStatus != iwfapi.WorkflowStatusCompleted {
			t.Fatalf("with a proceed state: %s, want COMPLETED", mustJSON(got))
		}

		// Without a workflow timeout, the retries follow the policy alone.
		h.start("wf-no-deadline", "S1", nil, func(r *iwfapi.WorkflowStartRequest) {
			r.WorkflowTimeoutSeconds = 0
			r.StateOptions = &iwfapi.WorkflowStateOptions{SkipWaitUntil: ptr(true), ExecuteApiRetryPolicy: hourly}
		})
		h.idle()
		if st := h.status("wf-no-deadline"); st != iwfapi.WorkflowStatusRunning {
			t.Fatalf("without a timeout the workflow is %s, want RUNNING (next attempt in an hour)", st)
		}
	})
}
