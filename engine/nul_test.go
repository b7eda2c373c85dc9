package engine_test

import (
	"context"
	"strings"
	"testing"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine"
)

// U+0000 is refused in every text the stores keep as text, on both stores
// alike: PostgreSQL cannot keep it, and SQLite once stored what PostgreSQL
// rejected. A request carrying it is invalid; a worker answer carrying it
// fails the workflow as invalid user code. Payloads (encoded objects) are
// bytes and keep it.
func TestNULInStoredText(t *testing.T) {
	forEachStore(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		keyword := func(v string) func(*iwfapi.WorkflowStartRequest) {
			return func(r *iwfapi.WorkflowStartRequest) {
				r.WorkflowStartOptions = &iwfapi.WorkflowStartOptions{SearchAttributes: &[]iwfapi.SearchAttribute{
					{Key: ptr("CustomKeywordField"), ValueType: ptr(iwfapi.SearchAttributeValueType("KEYWORD")), StringValue: ptr(v)}}}
			}
		}
		req := iwfapi.WorkflowStartRequest{WorkflowId: "wf-nul-start", IwfWorkflowType: "TestWorkflow",
			IwfWorkerUrl: h.worker.srv.URL, WorkflowTimeoutSeconds: 60, StartStateId: ptr("S")}
		keyword("a\x00b")(&req)
		_, err := h.eng.StartWorkflow(ctx, req)
		var ee *engine.Error
		if !errorsAs(err, &ee) || ee.Code != engine.CodeInvalidArgument || !strings.Contains(ee.Message, "U+0000") {
			t.Fatalf("start with NUL in a KEYWORD value: %v, want an invalid-argument error naming U+0000", err)
		}
		if _, err := h.eng.GetWorkflow(ctx, iwfapi.WorkflowGetRequest{WorkflowId: "wf-nul-start"}); err == nil {
			t.Fatal("the refused start stored a run")
		}

		answers := map[string]iwfapi.WorkflowStateDecideResponse{
			"search value":  {UpsertSearchAttributes: &[]iwfapi.SearchAttribute{{Key: ptr("CustomKeywordField"), ValueType: ptr(iwfapi.SearchAttributeValueType("KEYWORD")), StringValue: ptr("x\x00")}}},
			"keyword array": {UpsertSearchAttributes: &[]iwfapi.SearchAttribute{{Key: ptr("CustomKeywordArrayField"), ValueType: ptr(iwfapi.SearchAttributeValueType("KEYWORD_ARRAY")), StringArrayValue: &[]string{"ok", "x\x00"}}}},
			"data key":      {UpsertDataObjects: &[]iwfapi.KeyValue{{Key: ptr("k\x00"), Value: obj("v")}}},
			"channel":       {PublishToInterStateChannel: &[]iwfapi.InterStateChannelPublishing{{ChannelName: "c\x00", Value: obj("v")}}},
		}
		for name, answer := range answers {
			id := "wf-nul-" + strings.ReplaceAll(name, " ", "-")
			answer.StateDecision = &iwfapi.StateDecision{NextStates: &[]iwfapi.StateMovement{next(engine.GracefulCompletingState, nil)}}
			h.worker.state(id, stateHandlers{Execute: func(iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
				return answer, 200
			}})
			h.start(id, id, nil, func(r *iwfapi.WorkflowStartRequest) {
				r.StateOptions = &iwfapi.WorkflowStateOptions{SkipWaitUntil: ptr(true)}
			})
			got := h.result(id)
			if got.WorkflowStatus != iwfapi.WorkflowStatusFailed || string(deref(got.ErrorType)) != "INVALID_USER_WORKFLOW_CODE_ERROR_TYPE" ||
				!strings.Contains(deref(got.ErrorMessage), "U+0000") {
				t.Errorf("%s: a worker answer with NUL gave %s, want a failure as invalid user code naming U+0000", name, mustJSON(got))
			}
		}

		// A payload keeps the character.
		h.worker.state("Echo", stateHandlers{Execute: func(req iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
			return decide(next(engine.GracefulCompletingState, req.StateInput)), 200
		}})
		h.start("wf-nul-payload", "Echo", obj("a\x00b"), func(r *iwfapi.WorkflowStartRequest) {
			r.StateOptions = &iwfapi.WorkflowStateOptions{SkipWaitUntil: ptr(true)}
		})
		got := h.result("wf-nul-payload")
		if rs := deref(got.Results); got.WorkflowStatus != iwfapi.WorkflowStatusCompleted || len(rs) != 1 || deref(deref(rs[0].CompletedStateOutput).Data) != "a\x00b" {
			t.Fatalf("payload with NUL: %s", mustJSON(got))
		}
	})
}
