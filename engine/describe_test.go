package engine_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
)

func (h *harness) describe(id string) iwfapi.WorkflowDescribeResponse {
	h.t.Helper()
	resp, err := h.eng.DescribeWorkflow(context.Background(), iwfapi.WorkflowDescribeRequest{WorkflowId: id})
	if err != nil {
		h.t.Fatalf("describe %s: %v", id, err)
	}
	return resp
}

// A failing worker is visible in describe: the attempt number of the next
// call, when it is due, and the last failure with its HTTP status.
func TestDescribeShowsFailingAttempt(t *testing.T) {
	forEachStore(t, func(t *testing.T, h *harness) {
		h.worker.state("S1", stateHandlers{WaitUntil: func(iwfapi.WorkflowStateStartRequest) (iwfapi.WorkflowStateStartResponse, int) {
			return iwfapi.WorkflowStateStartResponse{}, 500
		}})
		runID := h.start("wf-describe-fail", "S1", nil, func(r *iwfapi.WorkflowStartRequest) {
			r.IwfWorkflowType = "Failing"
			r.WorkflowTimeoutSeconds = 0 // a deadline would end the retries before the hour
			r.StateOptions = &iwfapi.WorkflowStateOptions{WaitUntilApiRetryPolicy: &iwfapi.RetryPolicy{InitialIntervalSeconds: ptr(int32(3600)), MaximumIntervalSeconds: ptr(int32(3600))}}
		})
		h.idle() // the first attempt failed; the second is an hour away
		d := h.describe("wf-describe-fail")
		if d.WorkflowRunId != runID || d.Status != iwfapi.WorkflowStatusRunning || d.WorkflowType != "Failing" || d.WorkerUrl != h.worker.srv.URL {
			t.Fatalf("summary: %s", mustJSON(d))
		}
		if len(d.PendingStates) != 1 {
			t.Fatalf("pending: %s", mustJSON(d.PendingStates))
		}
		p := d.PendingStates[0]
		if p.StateExecutionId != "S1-1" || p.StateId != "S1" || p.Phase != iwfapi.PendingStateExecutionPhaseWAITUNTIL || deref(p.Attempt) != 2 {
			t.Fatalf("pending state: %s", mustJSON(p))
		}
		f := p.LastFailure
		if f == nil || f.Api != iwfapi.AttemptFailureApiWAITUNTIL || f.Attempt != 1 || deref(f.HttpStatus) != 500 || !strings.HasPrefix(f.Error, "statusCode: 500") {
			t.Fatalf("last failure: %s", mustJSON(f))
		}
		if wait := time.Duration(deref(p.NextAttemptTimestampMs)-f.TimestampMs) * time.Millisecond; wait < time.Hour {
			t.Fatalf("next attempt %s after the failure, want the policy's hour", wait)
		}
		if p.FirstAttemptTimestampMs == nil || *p.FirstAttemptTimestampMs > f.TimestampMs {
			t.Fatalf("first attempt at %v, failure at %d", p.FirstAttemptTimestampMs, f.TimestampMs)
		}
	})
}

// describe lists the commands a waiting execution awaits, with those done.
func TestDescribeShowsAwaitedCommands(t *testing.T) {
	forEachStore(t, func(t *testing.T, h *harness) {
		h.worker.state("S1", stateHandlers{
			WaitUntil: func(iwfapi.WorkflowStateStartRequest) (iwfapi.WorkflowStateStartResponse, int) {
				return iwfapi.WorkflowStateStartResponse{CommandRequest: &iwfapi.CommandRequest{
					CommandWaitingType:        ptr(iwfapi.CommandWaitingTypeAllCompleted),
					TimerCommands:             &[]iwfapi.TimerCommand{{CommandId: ptr("t"), DurationSeconds: ptr(int64(3600))}},
					SignalCommands:            &[]iwfapi.SignalCommand{{CommandId: ptr("s"), SignalChannelName: "go"}},
					InterStateChannelCommands: &[]iwfapi.InterStateChannelCommand{{CommandId: ptr("c"), ChannelName: "internal"}},
				}}, 200
			},
		})
		h.start("wf-describe-wait", "S1", nil)
		h.idle()
		if err := h.eng.SignalWorkflow(context.Background(), iwfapi.WorkflowSignalRequest{WorkflowId: "wf-describe-wait", SignalChannelName: "go", SignalValue: obj(`1`)}); err != nil {
			t.Fatal(err)
		}
		h.idle()
		d := h.describe("wf-describe-wait")
		if len(d.PendingStates) != 1 {
			t.Fatalf("pending: %s", mustJSON(d.PendingStates))
		}
		p := d.PendingStates[0]
		if p.Phase != iwfapi.PendingStateExecutionPhaseWAITINGCOMMANDS || p.Attempt != nil || deref(p.CommandWaitingType) != iwfapi.CommandWaitingTypeAllCompleted || p.Commands == nil {
			t.Fatalf("pending state: %s", mustJSON(p))
		}
		cs := *p.Commands
		if len(cs) != 3 {
			t.Fatalf("commands: %s", mustJSON(cs))
		}
		want := []struct {
			kind iwfapi.PendingCommandKind
			id   string
			done bool
		}{{iwfapi.PendingCommandKindTIMER, "t", false}, {iwfapi.PendingCommandKindSIGNAL, "s", true}, {iwfapi.PendingCommandKindINTERNALCHANNEL, "c", false}}
		for i, w := range want {
			if cs[i].Kind != w.kind || deref(cs[i].CommandId) != w.id || cs[i].Done != w.done {
				t.Fatalf("command %d: %s, want %+v", i, mustJSON(cs[i]), w)
			}
		}
		if fire := deref(cs[0].FiringTimestampMs); fire-d.StartedTimestampMs < 3600_000 {
			t.Fatalf("timer fires at %d, run started at %d", fire, d.StartedTimestampMs)
		}
		if deref(cs[1].ChannelName) != "go" || deref(cs[2].ChannelName) != "internal" {
			t.Fatalf("channels: %s", mustJSON(cs))
		}
	})
}

// A closed run has no pending states; an unknown workflow is not found.
func TestDescribeClosedAndMissing(t *testing.T) {
	forEachStore(t, func(t *testing.T, h *harness) {
		h.worker.state("S1", stateHandlers{Execute: func(iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
			return decide(next("_SYS_FORCE_FAILING_WORKFLOW", obj(`"bad"`))), 200
		}})
		h.start("wf-describe-closed", "S1", nil)
		h.result("wf-describe-closed")
		d := h.describe("wf-describe-closed")
		if d.Status != iwfapi.WorkflowStatusFailed || len(d.PendingStates) != 0 || d.ClosedTimestampMs == nil || deref(d.ErrorType) == "" {
			t.Fatalf("closed run: %s", mustJSON(d))
		}
		_, err := h.eng.DescribeWorkflow(context.Background(), iwfapi.WorkflowDescribeRequest{WorkflowId: "nope"})
		if err == nil || !strings.Contains(err.Error(), "does not exist") {
			t.Fatalf("describe of a missing workflow: %v", err)
		}
	})
}

// A failed answer with Iwf-Non-Retryable: true ends the retries at once:
// the failure policy applies after one call, whatever the retry policy.
func TestWorkerNonRetryableEndsRetries(t *testing.T) {
	forEachStore(t, func(t *testing.T, h *harness) {
		h.worker.state("S1", stateHandlers{WaitUntil: func(iwfapi.WorkflowStateStartRequest) (iwfapi.WorkflowStateStartResponse, int) {
			return iwfapi.WorkflowStateStartResponse{}, 422
		}})
		h.worker.setHeaders("S1.waitUntil", http.Header{"Iwf-Non-Retryable": {"true"}})
		h.start("wf-nonretryable", "S1", nil, func(r *iwfapi.WorkflowStartRequest) {
			r.StateOptions = &iwfapi.WorkflowStateOptions{WaitUntilApiRetryPolicy: &iwfapi.RetryPolicy{InitialIntervalSeconds: ptr(int32(1)), MaximumAttempts: ptr(int32(10))}}
		})
		got := h.result("wf-nonretryable")
		if got.WorkflowStatus != iwfapi.WorkflowStatusFailed || string(deref(got.ErrorType)) != "STATE_API_FAIL_ERROR_TYPE" || !strings.HasPrefix(deref(got.ErrorMessage), "statusCode: 422") {
			t.Fatalf("result %s", mustJSON(got))
		}
		if n := h.worker.count("S1.waitUntil"); n != 1 {
			t.Fatalf("waitUntil called %d times, want 1", n)
		}
		hist, err := h.eng.WorkflowHistory(context.Background(), iwfapi.WorkflowHistoryRequest{WorkflowId: "wf-nonretryable"})
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, ev := range hist.Events {
			if ev.EventType == "WAIT_UNTILAttemptFailed" && ev.Data != nil && (*ev.Data)["nonRetryable"] == true {
				found = true
			}
		}
		if !found {
			t.Fatalf("no attempt failure marked nonRetryable in %s", mustJSON(hist.Events))
		}
	})
}

// A failed answer with Retry-After delays the next attempt at least that
// long, beyond the retry policy's own backoff.
func TestWorkerRetryAfterDelaysNextAttempt(t *testing.T) {
	forEachStore(t, func(t *testing.T, h *harness) {
		h.worker.state("S1", stateHandlers{
			Execute: func(iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
				return iwfapi.WorkflowStateDecideResponse{}, 429
			},
		})
		h.worker.setHeaders("S1.execute", http.Header{"Retry-After": {"7200"}})
		h.start("wf-retryafter", "S1", nil, func(r *iwfapi.WorkflowStartRequest) {
			r.WorkflowTimeoutSeconds = 0 // a deadline would end the retries before the Retry-After
			r.StateOptions = &iwfapi.WorkflowStateOptions{SkipWaitUntil: ptr(true),
				ExecuteApiRetryPolicy: &iwfapi.RetryPolicy{InitialIntervalSeconds: ptr(int32(1))}}
		})
		h.idle()
		d := h.describe("wf-retryafter")
		p := d.PendingStates[0]
		f := p.LastFailure
		if p.Phase != iwfapi.PendingStateExecutionPhaseEXECUTE || f == nil || f.Api != iwfapi.AttemptFailureApiEXECUTE || deref(f.HttpStatus) != 429 {
			t.Fatalf("pending state: %s", mustJSON(p))
		}
		if wait := time.Duration(deref(p.NextAttemptTimestampMs)-f.TimestampMs) * time.Millisecond; wait < 2*time.Hour {
			t.Fatalf("next attempt %s after the failure, want at least the worker's Retry-After of 2h", wait)
		}
		if n := h.worker.count("S1.execute"); n != 1 {
			t.Fatalf("execute called %d times, want 1", n)
		}
	})
}

// An unknown legacy deciderTriggerType is a failed attempt whose error
// names that field (not commandWaitingType, which the worker did not send).
func TestUnknownDeciderTriggerTypeNamesTheField(t *testing.T) {
	forEachStore(t, func(t *testing.T, h *harness) {
		h.worker.state("S1", stateHandlers{WaitUntil: func(iwfapi.WorkflowStateStartRequest) (iwfapi.WorkflowStateStartResponse, int) {
			return iwfapi.WorkflowStateStartResponse{CommandRequest: &iwfapi.CommandRequest{
				DeciderTriggerType: ptr(iwfapi.DeciderTriggerType("SOMETIMES")),
				SignalCommands:     &[]iwfapi.SignalCommand{{CommandId: ptr("s"), SignalChannelName: "go"}},
			}}, 200
		}})
		h.start("wf-trigger", "S1", nil, func(r *iwfapi.WorkflowStartRequest) {
			r.WorkflowTimeoutSeconds = 0 // a deadline would end the retries before the hour
			r.StateOptions = &iwfapi.WorkflowStateOptions{WaitUntilApiRetryPolicy: &iwfapi.RetryPolicy{InitialIntervalSeconds: ptr(int32(3600)), MaximumIntervalSeconds: ptr(int32(3600))}}
		})
		h.idle()
		p := h.describe("wf-trigger").PendingStates[0]
		if p.LastFailure == nil || !strings.Contains(p.LastFailure.Error, `unsupported deciderTriggerType "SOMETIMES"`) {
			t.Fatalf("last failure: %s", mustJSON(p.LastFailure))
		}
	})
}
