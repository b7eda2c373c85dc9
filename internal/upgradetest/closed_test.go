package upgradetest

import (
	"github.com/iwf-server/iwf-server/api/iwfapi"
)

// closedFlows are the workflows whose runs the data holds closed, one per
// way a run closes. Two of them are reset after the upgrade, which reads
// their stored executions and history.
func closedFlows() []flow {
	return []flow{
		{
			// Two parallel states complete gracefully, each with an output.
			id: "upg-completed",
			start: iwfapi.WorkflowStartRequest{
				StartStateId: ptr("fork"), StateOptions: skipWaitUntil(),
				WaitForCompletionStateExecutionIds: &[]string{"par-a-1"},
				WorkflowStartOptions:               &iwfapi.WorkflowStartOptions{DataAttributes: kvs("origin", "completed")},
			},
			drive: func(s *stack) { s.api.await("upg-completed", "") },
			check: func(s *stack) {
				closedAs(s.t, "upg-completed", s.api.get("upg-completed", ""), iwfapi.WorkflowStatusCompleted, "", "", true,
					output{"par-a", "par-a-1", "out-a"}, output{"par-b", "par-b-1", "out-b"})
				stateCompletion(s, "upg-completed", "par-a-1", "par-a", "")
			},
			finish: finishCompleted,
		},
		{
			// A decision fails the workflow, with an output.
			id:    "upg-force-failed",
			start: iwfapi.WorkflowStartRequest{StartStateId: ptr("boom"), StateOptions: skipWaitUntil()},
			drive: func(s *stack) { s.api.await("upg-force-failed", "") },
			check: func(s *stack) {
				closedAs(s.t, "upg-force-failed", s.api.get("upg-force-failed", ""), iwfapi.WorkflowStatusFailed,
					"STATE_DECISION_FAILING_WORKFLOW_ERROR_TYPE", "", false, output{"boom", "boom-1", "boom-reason"})
			},
		},
		{
			// waitUntil fails until its retry policy gives up.
			id: "upg-api-failed",
			start: iwfapi.WorkflowStartRequest{StartStateId: ptr("flaky"), StateOptions: &iwfapi.WorkflowStateOptions{
				WaitUntilApiRetryPolicy: &iwfapi.RetryPolicy{InitialIntervalSeconds: ptr(int32(1)), MaximumAttempts: ptr(int32(2))},
			}},
			drive: func(s *stack) { s.api.await("upg-api-failed", "") },
			check: func(s *stack) {
				closedAs(s.t, "upg-api-failed", s.api.get("upg-api-failed", ""), iwfapi.WorkflowStatusFailed,
					"STATE_API_FAIL_ERROR_TYPE", "500", false)
				events := s.api.history("upg-api-failed", "")
				equal(s.t, "upg-api-failed attempts", attempts(events, "WAIT_UNTILAttemptFailed"), []int{1, 2})
			},
		},
		{
			// Canceled while waiting, after inputs from outside: a data and a
			// search attribute set through the API and a signal nobody waits
			// for. Reset to the beginning after the upgrade, which applies
			// the inputs again.
			id:    "upg-canceled",
			start: iwfapi.WorkflowStartRequest{StartStateId: ptr("park")},
			drive: func(s *stack) {
				waitParked(s, "upg-canceled")
				s.api.must("/api/v1/workflow/dataobjects/set", iwfapi.WorkflowSetDataObjectsRequest{WorkflowId: "upg-canceled", Objects: kvs("ext-da", "set-by-api")}, nil)
				s.api.must("/api/v1/workflow/searchattributes/set", iwfapi.WorkflowSetSearchAttributesRequest{
					WorkflowId: "upg-canceled", SearchAttributes: &[]iwfapi.SearchAttribute{keyword("ExtKeyword", "set-by-api")},
				}, nil)
				s.api.signal("upg-canceled", "note", "noted")
				stop(s, "upg-canceled", iwfapi.WorkflowStopTypeCancel, "")
			},
			check: func(s *stack) {
				closedAs(s.t, "upg-canceled", s.api.get("upg-canceled", ""), iwfapi.WorkflowStatusCanceled, "", "", false)
				checkExternalInputs(s, "upg-canceled", "")
			},
			finish: finishCanceled,
		},
		{
			id:    "upg-terminated",
			start: iwfapi.WorkflowStartRequest{StartStateId: ptr("park")},
			drive: func(s *stack) {
				waitParked(s, "upg-terminated")
				stop(s, "upg-terminated", iwfapi.WorkflowStopTypeTerminate, "")
			},
			check: func(s *stack) {
				closedAs(s.t, "upg-terminated", s.api.get("upg-terminated", ""), iwfapi.WorkflowStatusTerminated, "", "", false)
			},
		},
		{
			id:    "upg-stop-failed",
			start: iwfapi.WorkflowStartRequest{StartStateId: ptr("park")},
			drive: func(s *stack) {
				waitParked(s, "upg-stop-failed")
				stop(s, "upg-stop-failed", iwfapi.WorkflowStopTypeFail, "stopped by the generator")
			},
			check: func(s *stack) {
				closedAs(s.t, "upg-stop-failed", s.api.get("upg-stop-failed", ""), iwfapi.WorkflowStatusFailed,
					"CLIENT_API_FAILING_WORKFLOW_ERROR_TYPE", "stopped by the generator", false)
			},
		},
		{
			// The workflow timeout expires while a state waits.
			id:    "upg-timeout",
			start: iwfapi.WorkflowStartRequest{StartStateId: ptr("park"), WorkflowTimeoutSeconds: 1},
			drive: func(s *stack) { s.api.await("upg-timeout", "") },
			check: func(s *stack) {
				closedAs(s.t, "upg-timeout", s.api.get("upg-timeout", ""), iwfapi.WorkflowStatusTimeout, "", "", false)
				events := s.api.history("upg-timeout", "")
				equal(s.t, "upg-timeout closing status", eventData(events, "WorkflowClosed", "status"), any("TIMEOUT"))
			},
		},
	}
}

// waitParked waits until the park state waits for its signal.
func waitParked(s *stack, workflowID string) {
	s.api.waitHistory(workflowID, "", "waitUntil of park-1", hasEvent("WaitUntilCompleted", "park-1", 1))
}

func stop(s *stack, workflowID string, stopType iwfapi.WorkflowStopType, reason string) {
	s.api.must("/api/v1/workflow/stop", iwfapi.WorkflowStopRequest{WorkflowId: workflowID, StopType: ptr(stopType), Reason: optional(reason)}, nil)
}

// checkExternalInputs checks the data and search attribute that the
// generator set on upg-canceled, on a run of it.
func checkExternalInputs(s *stack, workflowID, runID string) {
	s.t.Helper()
	equal(s.t, workflowID+" data attributes", s.api.dataAttributes(workflowID, runID), map[string]string{"ext-da": "set-by-api"})
	sas := s.api.searchAttributes(workflowID, runID, map[string]iwfapi.SearchAttributeValueType{"ExtKeyword": iwfapi.SearchAttributeValueTypeKeyword})
	equal(s.t, workflowID+" ExtKeyword", deref(sas["ExtKeyword"].StringValue), "set-by-api")
}

// finishCompleted resets upg-completed to the decision that started its
// parallel states: a new run starts both again and completes.
func finishCompleted(s *stack) []string {
	base := s.api.get("upg-completed", "").WorkflowRunId
	var reset iwfapi.WorkflowResetResponse
	s.api.must("/api/v1/workflow/reset", iwfapi.WorkflowResetRequest{WorkflowId: "upg-completed", ResetType: iwfapi.WorkflowResetTypeStateId, StateId: ptr("par-b")}, &reset)
	run := reset.WorkflowRunId
	closedAs(s.t, "upg-completed after reset", s.api.await("upg-completed", run), iwfapi.WorkflowStatusCompleted, "", "", true,
		output{"par-a", "par-a-1", "out-a"}, output{"par-b", "par-b-1", "out-b"})
	closedAs(s.t, "upg-completed base run", s.api.get("upg-completed", base), iwfapi.WorkflowStatusCompleted, "", "", true,
		output{"par-a", "par-a-1", "out-a"}, output{"par-b", "par-b-1", "out-b"})
	equal(s.t, "upg-completed data attributes after reset", s.api.dataAttributes("upg-completed", run),
		map[string]string{"origin": "completed", "result-a": "done-a", "result-b": "done-b"})
	calls(s, "upg-completed", run, "execute par-a-1", "execute par-b-1")
	return []string{run}
}

// finishCanceled resets upg-canceled to the beginning: the new run gets
// the inputs of the canceled one again, then completes on a signal.
func finishCanceled(s *stack) []string {
	var reset iwfapi.WorkflowResetResponse
	s.api.must("/api/v1/workflow/reset", iwfapi.WorkflowResetRequest{WorkflowId: "upg-canceled", ResetType: iwfapi.WorkflowResetTypeBeginning}, &reset)
	run := reset.WorkflowRunId
	checkExternalInputs(s, "upg-canceled", run)
	mustRPC(s, "upg-canceled", "peek", "signal:note=1")
	s.api.signal("upg-canceled", "never", "now")
	closedAs(s.t, "upg-canceled after reset", s.api.await("upg-canceled", run), iwfapi.WorkflowStatusCompleted, "", "", false,
		output{"park", "park-1", "park:now"})
	calls(s, "upg-canceled", run, "waitUntil park-1", "rpc peek", "execute park-1")
	return []string{run}
}
