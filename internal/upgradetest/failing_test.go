package upgradetest

import (
	"github.com/iwf-server/iwf-server/api/iwfapi"
)

// failingFlows are the workflows whose state API failed failedAttempts
// times while the data was written; the next attempt, after the upgrade,
// succeeds.
func failingFlows() []flow {
	return []flow{
		{
			// waitUntil fails; the state holds a lock on a data attribute
			// across its attempts.
			id: "upg-stubborn",
			start: iwfapi.WorkflowStartRequest{
				StartStateId: ptr("stubborn"),
				StateOptions: &iwfapi.WorkflowStateOptions{
					WaitUntilApiRetryPolicy:                 retrySlowly,
					WaitUntilApiDataAttributesLoadingPolicy: lockPolicy(),
				},
				WorkflowStartOptions: &iwfapi.WorkflowStartOptions{DataAttributes: kvs("locked-key", "v0")},
			},
			drive: func(s *stack) { waitFailures(s, "upg-stubborn", "WAIT_UNTILAttemptFailed", "stubborn-1") },
			check: func(s *stack) {
				checkFailures(s, "upg-stubborn", "WAIT_UNTILAttemptFailed")
				// The state holds its lock between attempts.
				status, _ := rpc(s, "upg-stubborn", "lock", lockPolicy())
				equal(s.t, "upg-stubborn locking rpc status", status, 450)
			},
			finish: func(s *stack) []string {
				run := s.api.get("upg-stubborn", "").WorkflowRunId // may have completed already
				c := waitAttempt(s, "upg-stubborn", "waitUntil", "stubborn-1")
				equal(s.t, "upg-stubborn data attributes of waitUntil", c.DataObjects, map[string]string{"locked-key": "v0"})
				closedAs(s.t, "upg-stubborn", s.api.await("upg-stubborn", run), iwfapi.WorkflowStatusCompleted, "", "", false,
					output{"stubborn", "stubborn-1", "stubborn-done"})
				calls(s, "upg-stubborn", run, "waitUntil stubborn-1", "execute stubborn-1")
				return []string{run}
			},
		},
		{
			// execute (without waitUntil) fails.
			id: "upg-obstinate",
			start: iwfapi.WorkflowStartRequest{
				StartStateId: ptr("obstinate"),
				StateOptions: &iwfapi.WorkflowStateOptions{SkipWaitUntil: ptr(true), ExecuteApiRetryPolicy: retrySlowly},
			},
			drive: func(s *stack) { waitFailures(s, "upg-obstinate", "EXECUTEAttemptFailed", "obstinate-1") },
			check: func(s *stack) { checkFailures(s, "upg-obstinate", "EXECUTEAttemptFailed") },
			finish: func(s *stack) []string {
				run := s.api.get("upg-obstinate", "").WorkflowRunId
				waitAttempt(s, "upg-obstinate", "execute", "obstinate-1")
				closedAs(s.t, "upg-obstinate", s.api.await("upg-obstinate", run), iwfapi.WorkflowStatusCompleted, "", "", false,
					output{"obstinate", "obstinate-1", "obstinate-done"})
				calls(s, "upg-obstinate", run, "execute obstinate-1")
				return []string{run}
			},
		},
	}
}

func waitFailures(s *stack, workflowID, typ, executionID string) {
	s.api.waitHistory(workflowID, "", "failed attempts of "+executionID, hasEvent(typ, executionID, failedAttempts))
}

// checkFailures checks that the run is running after failedAttempts failed
// attempts.
func checkFailures(s *stack, workflowID, typ string) {
	s.t.Helper()
	running(s, workflowID)
	events := s.api.history(workflowID, "")
	equal(s.t, workflowID+" failed attempts", attempts(events, typ), []int{1, 2, 3})
}

// waitAttempt waits for the first call after the upgrade of a state API
// that failed failedAttempts times before, and checks its attempt number
// and first attempt time. The data holds the task of the next attempt
// leased by the generator's engine (due within its lease horizon, see
// generatorLease), and a lease released at start-up advances the attempt,
// as one that expired does: its owner may have called the worker already.
// So the call is attempt failedAttempts+2.
func waitAttempt(s *stack, workflowID, api, executionID string) call {
	s.t.Helper()
	c := s.worker.waitCall(s.t, api+" of "+executionID, func(c call) bool {
		return c.WorkflowID == workflowID && c.API == api && c.ExecutionID == executionID
	})
	equal(s.t, workflowID+" attempt", c.Attempt, int32(failedAttempts+2))
	started := s.api.history(workflowID, "")[0].TimestampMs / 1000
	if c.FirstAttempt < started-1 || c.FirstAttempt > started+1 {
		s.t.Fatalf("%s: first attempt at %d, want the start of the run (%d)", workflowID, c.FirstAttempt, started)
	}
	return c
}
