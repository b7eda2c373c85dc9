package upgradetest

import (
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/iwf-server/iwf-server/api/iwfapi"
)

// equal fails the test unless got and want are deeply equal.
func equal[T any](t testing.TB, what string, got, want T) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s:\n got  %s\n want %s", what, mustJSON(got), mustJSON(want))
	}
}

// closedAs checks how a run closed: status, error type, error message
// (a substring; "" for none) and outputs (sorted by execution id when
// sorted is set).
func closedAs(t testing.TB, workflowID string, got iwfapi.WorkflowGetResponse, status iwfapi.WorkflowStatus, errType, errMsg string, sorted bool, want ...output) {
	t.Helper()
	equal(t, workflowID+" status", got.WorkflowStatus, status)
	equal(t, workflowID+" error type", string(deref(got.ErrorType)), errType)
	if msg := deref(got.ErrorMessage); (errMsg == "") != (msg == "") || !strings.Contains(msg, errMsg) {
		t.Fatalf("%s error message %q, want one containing %q", workflowID, msg, errMsg)
	}
	equal(t, workflowID+" results", outputs(got.Results, sorted), want)
}

// running checks that the current run of a workflow is running and returns
// its id.
func running(s *stack, workflowID string) string {
	s.t.Helper()
	got := s.api.get(workflowID, "")
	equal(s.t, workflowID+" status", got.WorkflowStatus, iwfapi.WorkflowStatusRunning)
	return got.WorkflowRunId
}

// calls checks the worker calls of a run, in any order: "execute S-1",
// "waitUntil S-1", "rpc name".
func calls(s *stack, workflowID, runID string, want ...string) {
	s.t.Helper()
	var got []string
	for _, c := range s.worker.callsOf(runID) {
		got = append(got, c.String())
	}
	slices.Sort(got)
	want = slices.Clone(want)
	slices.Sort(want)
	equal(s.t, workflowID+" worker calls of run "+runID, got, want)
}

// attempts lists the attempt numbers that the events of one type record.
func attempts(events []iwfapi.WorkflowHistoryEvent, typ string) []int {
	var out []int
	for _, ev := range events {
		if ev.EventType == typ && ev.Data != nil {
			if a, ok := (*ev.Data)["attempt"].(float64); ok {
				out = append(out, int(a))
			}
		}
	}
	return out
}

// eventData returns a field of the first event of a type, or nil.
func eventData(events []iwfapi.WorkflowHistoryEvent, typ, field string) any {
	for _, ev := range events {
		if ev.EventType == typ && ev.Data != nil {
			return (*ev.Data)[field]
		}
	}
	return nil
}

// stateCompletion asks waitForStateCompletion for an execution (by its
// id, or by state id and waitForKey when key is set) and checks the
// completion record.
func stateCompletion(s *stack, workflowID, executionID, stateID, key string) {
	s.t.Helper()
	req := iwfapi.WorkflowWaitForStateCompletionRequest{WorkflowId: workflowID, WaitTimeSeconds: ptr(int32(10))}
	if key != "" {
		req.StateId, req.WaitForKey = ptr(stateID), ptr(key)
	} else {
		req.StateExecutionId = ptr(executionID)
	}
	var resp iwfapi.WorkflowWaitForStateCompletionResponse
	s.api.must("/api/v1/workflow/waitForStateCompletion", req, &resp)
	got := deref(resp.StateCompletionOutput)
	equal(s.t, workflowID+" completion of "+executionID, [2]string{got.CompletedStateId, got.CompletedStateExecutionId}, [2]string{stateID, executionID})
}

// rpc invokes an RPC and returns the status and the decoded output.
func rpc(s *stack, workflowID, name string, policy *iwfapi.PersistenceLoadingPolicy) (int, string) {
	s.t.Helper()
	var resp iwfapi.WorkflowRpcResponse
	status, raw := s.api.call("/api/v1/workflow/rpc", iwfapi.WorkflowRpcRequest{
		WorkflowId: workflowID, RpcName: name, TimeoutSeconds: ptr(int32(20)), DataAttributesLoadingPolicy: policy,
	}, &resp)
	if status != http.StatusOK {
		return status, string(raw)
	}
	return status, str(resp.Output)
}

// mustRPC is rpc that fails the test unless the answer is 200 with output.
func mustRPC(s *stack, workflowID, name, output string) {
	s.t.Helper()
	status, got := rpc(s, workflowID, name, nil)
	equal(s.t, workflowID+" rpc "+name, [2]any{status, got}, [2]any{http.StatusOK, output})
}
