package upgradetest

import (
	"github.com/iwf-server/iwf-server/api/iwfapi"
)

// waitingFlows are the workflows that the data leaves waiting for an
// input: the upgrade tests give it and check how each run ends.
func waitingFlows() []flow {
	return []flow{
		{
			// A workflow retry policy: the first run fails, the second one
			// (started by the engine) waits for its signal.
			id: "upg-retry-chain",
			start: iwfapi.WorkflowStartRequest{
				StartStateId: ptr("intro"), StateOptions: skipWaitUntil(), StateInput: obj("chain"),
				WorkflowStartOptions: &iwfapi.WorkflowStartOptions{RetryPolicy: &iwfapi.WorkflowRetryPolicy{
					InitialIntervalSeconds: ptr(int32(1)), MaximumAttempts: ptr(int32(2)),
				}},
			},
			drive: func(s *stack) {
				first := waitGo(s, "upg-retry-chain", "")
				s.api.signal("upg-retry-chain", "go", "fail")
				s.api.await("upg-retry-chain", first)
				retry, _ := eventData(s.api.history("upg-retry-chain", first), "RetriedAsNewRun", "runId").(string)
				waitGo(s, "upg-retry-chain", retry)
			},
			check: func(s *stack) {
				runs := twoRuns(s, "upg-retry-chain")
				closedAs(s.t, "upg-retry-chain first run", s.api.get("upg-retry-chain", runs[0]), iwfapi.WorkflowStatusFailed,
					"STATE_DECISION_FAILING_WORKFLOW_ERROR_TYPE", "", false, output{"await-go", "await-go-1", "failed:chain"})
				retry := eventData(s.api.history("upg-retry-chain", runs[0]), "RetriedAsNewRun", "runId")
				equal(s.t, "upg-retry-chain retried by", retry, any(runs[1]))
				equal(s.t, "upg-retry-chain current run", running(s, "upg-retry-chain"), runs[1])
				second := eventData(s.api.history("upg-retry-chain", runs[1]), "WorkflowStarted", "retryAttempt")
				equal(s.t, "upg-retry-chain attempt of the second run", second, any(float64(2)))
			},
			finish: func(s *stack) []string {
				// The second run fails too, and the policy allows no third.
				runs := s.api.runsOf("upg-retry-chain")
				s.api.signal("upg-retry-chain", "go", "fail")
				got := s.api.await("upg-retry-chain", "")
				closedAs(s.t, "upg-retry-chain", got, iwfapi.WorkflowStatusFailed, "STATE_DECISION_FAILING_WORKFLOW_ERROR_TYPE", "", false,
					output{"await-go", "await-go-1", "failed:chain"})
				equal(s.t, "upg-retry-chain failed run", got.WorkflowRunId, runs[1])
				equal(s.t, "upg-retry-chain runs", s.api.runsOf("upg-retry-chain"), runs)
				calls(s, "upg-retry-chain", runs[1], "execute await-go-1")
				return runs[1:]
			},
		},
		{
			// Completed, then reset to a state: the new run waits.
			id:    "upg-reset",
			start: iwfapi.WorkflowStartRequest{StartStateId: ptr("intro"), StateOptions: skipWaitUntil(), StateInput: obj("reset")},
			drive: func(s *stack) {
				waitGo(s, "upg-reset", "")
				s.api.signal("upg-reset", "go", "first")
				s.api.await("upg-reset", "")
				var reset iwfapi.WorkflowResetResponse
				s.api.must("/api/v1/workflow/reset", iwfapi.WorkflowResetRequest{WorkflowId: "upg-reset", ResetType: iwfapi.WorkflowResetTypeStateId, StateId: ptr("await-go")}, &reset)
				waitGo(s, "upg-reset", reset.WorkflowRunId)
			},
			check: func(s *stack) {
				runs := twoRuns(s, "upg-reset")
				closedAs(s.t, "upg-reset first run", s.api.get("upg-reset", runs[0]), iwfapi.WorkflowStatusCompleted, "", "", false,
					output{"await-go", "await-go-1", "first"})
				equal(s.t, "upg-reset new run", eventData(s.api.history("upg-reset", runs[0]), "Reset", "newRunId"), any(runs[1]))
				equal(s.t, "upg-reset current run", running(s, "upg-reset"), runs[1])
			},
			finish: func(s *stack) []string {
				run := running(s, "upg-reset")
				s.api.signal("upg-reset", "go", "second")
				closedAs(s.t, "upg-reset", s.api.await("upg-reset", run), iwfapi.WorkflowStatusCompleted, "", "", false,
					output{"await-go", "await-go-1", "second"})
				calls(s, "upg-reset", run, "execute await-go-1")
				return []string{run}
			},
		},
		{
			// Two timers: one fired at once, one due in 2100.
			id:    "upg-timer",
			start: iwfapi.WorkflowStartRequest{StartStateId: ptr("sleep")},
			drive: func(s *stack) { waitWaiting(s, "upg-timer", "sleep-1") },
			check: func(s *stack) { running(s, "upg-timer") },
			finish: func(s *stack) []string {
				run := running(s, "upg-timer")
				s.api.must("/api/v1/workflow/timer/skip", iwfapi.WorkflowSkipTimerRequest{WorkflowId: "upg-timer", WorkflowStateExecutionId: "sleep-1", TimerCommandId: ptr("far")}, nil)
				closedAs(s.t, "upg-timer", s.api.await("upg-timer", run), iwfapi.WorkflowStatusCompleted, "", "", false,
					output{"sleep", "sleep-1", "far=FIRED,past=FIRED"})
				calls(s, "upg-timer", run, "execute sleep-1")
				return []string{run}
			},
		},
		{
			// Pending timer, due 60 s after the data was written.
			id:    "upg-nap",
			start: iwfapi.WorkflowStartRequest{StartStateId: ptr("nap")},
			drive: func(s *stack) { waitWaiting(s, "upg-nap", "nap-1") },
			check: func(s *stack) { running(s, "upg-nap") },
			finish: func(s *stack) []string {
				run := s.api.get("upg-nap", "").WorkflowRunId
				closedAs(s.t, "upg-nap", s.api.await("upg-nap", run), iwfapi.WorkflowStatusCompleted, "", "", false,
					output{"nap", "nap-1", "nap=FIRED"})
				calls(s, "upg-nap", run, "execute nap-1")
				return []string{run}
			},
		},
		{
			// Waits for a signal, with a message of another channel buffered.
			// The state loops once (a second execution of a state that ran
			// before the upgrade), then the next state consumes the message.
			id:    "upg-signal",
			start: iwfapi.WorkflowStartRequest{StartStateId: ptr("wait")},
			drive: func(s *stack) {
				waitWaiting(s, "upg-signal", "wait-1")
				s.api.signal("upg-signal", "note", "buffered-note")
			},
			check: func(s *stack) { running(s, "upg-signal") },
			finish: func(s *stack) []string {
				run := running(s, "upg-signal")
				s.api.signal("upg-signal", "approve", "again")
				s.api.signal("upg-signal", "approve", "yes")
				closedAs(s.t, "upg-signal", s.api.await("upg-signal", run), iwfapi.WorkflowStatusCompleted, "", "", false,
					output{"drain", "drain-1", "yes+buffered-note"})
				calls(s, "upg-signal", run, "execute wait-1", "waitUntil wait-2", "execute wait-2", "waitUntil drain-1", "execute drain-1")
				return []string{run}
			},
		},
		{
			// Waits for an internal channel, with a message of another one
			// buffered; an RPC publishes the awaited message.
			id:    "upg-internal",
			start: iwfapi.WorkflowStartRequest{StartStateId: ptr("recv")},
			drive: func(s *stack) {
				waitWaiting(s, "upg-internal", "recv-1")
				s.api.must("/api/v1/workflow/publishToInternalChannel", iwfapi.PublishToInternalChannelRequest{
					WorkflowId: "upg-internal", Messages: &[]iwfapi.InterStateChannelPublishing{{ChannelName: "spare", Value: obj("spare-1")}},
				}, nil)
			},
			check: func(s *stack) { running(s, "upg-internal") },
			finish: func(s *stack) []string {
				run := running(s, "upg-internal")
				mustRPC(s, "upg-internal", "publish", "published")
				rpcs := s.worker.callsOf(run)
				equal(s.t, "upg-internal channels seen by the rpc", channelSizes(rpcs[0].RPC), "internal:spare=1")
				closedAs(s.t, "upg-internal", s.api.await("upg-internal", run), iwfapi.WorkflowStatusCompleted, "", "", false,
					output{"recv", "recv-1", "from-rpc"})
				equal(s.t, "upg-internal data attributes", s.api.dataAttributes("upg-internal", run), map[string]string{"rpc-da": "published"})
				calls(s, "upg-internal", run, "rpc publish", "execute recv-1")
				return []string{run}
			},
		},
		{
			// ANY_COMBINATION_COMPLETED with one of two signals received.
			id:    "upg-combo",
			start: iwfapi.WorkflowStartRequest{StartStateId: ptr("combo")},
			drive: func(s *stack) {
				waitWaiting(s, "upg-combo", "combo-1")
				s.api.signal("upg-combo", "x", "x-val")
			},
			check: func(s *stack) { running(s, "upg-combo") },
			finish: func(s *stack) []string {
				run := running(s, "upg-combo")
				s.api.signal("upg-combo", "y", "y-val")
				closedAs(s.t, "upg-combo", s.api.await("upg-combo", run), iwfapi.WorkflowStatusCompleted, "", "", false,
					output{"combo", "combo-1", "c1=x-val,c2=y-val,t1=SCHEDULED"})
				calls(s, "upg-combo", run, "execute combo-1")
				return []string{run}
			},
		},
		attributesFlow(),
		{
			// Started without a start state; an RPC moves it to one.
			id:    "upg-idle",
			start: iwfapi.WorkflowStartRequest{},
			check: func(s *stack) { running(s, "upg-idle") },
			finish: func(s *stack) []string {
				run := running(s, "upg-idle")
				mustRPC(s, "upg-idle", "advance", "advanced")
				closedAs(s.t, "upg-idle", s.api.await("upg-idle", run), iwfapi.WorkflowStatusCompleted, "", "", false,
					output{"late", "late-1", "late-done"})
				calls(s, "upg-idle", run, "rpc advance", "execute late-1")
				return []string{run}
			},
		},
		{
			// Graceful completion requested by one state while another still
			// waits: the run completes when that one reaches a dead end.
			id:    "upg-graceful",
			start: iwfapi.WorkflowStartRequest{StartStateId: ptr("split"), StateOptions: skipWaitUntil()},
			drive: func(s *stack) {
				waitWaiting(s, "upg-graceful", "linger-1")
				s.api.waitHistory("upg-graceful", "", "execute of done-first-1", hasEvent("ExecuteCompleted", "done-first-1", 1))
			},
			check: func(s *stack) { running(s, "upg-graceful") },
			finish: func(s *stack) []string {
				run := running(s, "upg-graceful")
				s.api.signal("upg-graceful", "finish", "bye")
				closedAs(s.t, "upg-graceful", s.api.await("upg-graceful", run), iwfapi.WorkflowStatusCompleted, "", "", false,
					output{"done-first", "done-first-1", "first-out"})
				calls(s, "upg-graceful", run, "execute linger-1")
				return []string{run}
			},
		},
	}
}

// waitWaiting waits until an execution waits for its commands.
func waitWaiting(s *stack, workflowID, executionID string) {
	s.api.waitHistory(workflowID, "", "waitUntil of "+executionID, hasEvent("WaitUntilCompleted", executionID, 1))
}

// waitGo waits until await-go-1 of a run ("" for the current one) waits
// for its signal, and returns the run id.
func waitGo(s *stack, workflowID, runID string) string {
	s.api.waitHistory(workflowID, runID, "waitUntil of await-go-1", hasEvent("WaitUntilCompleted", "await-go-1", 1))
	if runID == "" {
		runID = s.api.get(workflowID, "").WorkflowRunId
	}
	return runID
}

// twoRuns returns the two runs of a workflow, oldest first.
func twoRuns(s *stack, workflowID string) []string {
	s.t.Helper()
	runs := s.api.runsOf(workflowID)
	if len(runs) != 2 {
		s.t.Fatalf("%s has runs %v, want two", workflowID, runs)
	}
	return runs
}
