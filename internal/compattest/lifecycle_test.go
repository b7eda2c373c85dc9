package compattest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
)

// waitForever answers waitUntil with a signal command nobody sends.
func waitForever(iwfapi.WorkflowStateStartRequest) reply {
	return commands(iwfapi.CommandRequest{
		DeciderTriggerType: ptr(iwfapi.DeciderTriggerTypeAllCommandCompleted),
		SignalCommands:     list(iwfapi.SignalCommand{CommandId: ptr("never"), SignalChannelName: "never-signalled"}),
	})
}

// TestWfTimeout mirrors integ/wf_timeout_test.go: workflowTimeoutSeconds 1
// ends the run as TIMEOUT, and getWithWait answers exactly runId + status.
func TestWfTimeout(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		e.w.state("S1", waitForever, nil)
		wfID := e.id("wf-timeout")
		req := e.startRequest(wfID, "signal", "S1")
		req.WorkflowTimeoutSeconds = 1
		started := time.Now()
		runID := e.start(req)
		_, body := e.result(wfID)
		jsonEqual(t, "getWithWait", body, fmt.Sprintf(`{"workflowRunId":%q,"workflowStatus":"TIMEOUT"}`, runID))
		// Never early; how late depends on the machine's load.
		if took := time.Since(started); took < 900*time.Millisecond {
			t.Errorf("timed out after %v, before its 1 s timeout", took)
		}
		_, body = e.get(wfID, "", true)
		jsonEqual(t, "get with needsResults", body, fmt.Sprintf(`{"workflowRunId":%q,"workflowStatus":"TIMEOUT"}`, runID))
	})
}

// TestWfForceFail mirrors integ/wf_force_fail_test.go: a force-fail decision
// fails the run with its input as the only result.
func TestWfForceFail(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		e.w.state("S1", noCommands, func(iwfapi.WorkflowStateDecideRequest) reply {
			return decide(move(forceFail, obj(`"a failure"`)))
		})
		wfID := e.id("wf-force-fail")
		runID := e.start(e.startRequest(wfID, "wf_force_fail", "S1"))
		want := fmt.Sprintf(`{"workflowRunId":%q,"workflowStatus":"FAILED","errorType":"STATE_DECISION_FAILING_WORKFLOW_ERROR_TYPE",
			"results":[{"completedStateId":"S1","completedStateExecutionId":"S1-1","completedStateOutput":{"encoding":"json","data":"\"a failure\""}}]}`, runID)
		_, body := e.result(wfID)
		jsonEqual(t, "getWithWait", body, want)
		_, body = e.get(wfID, "", true)
		jsonEqual(t, "get with needsResults", body, want)
		_, body = e.get(wfID, "", false)
		jsonEqual(t, "get without needsResults", body, fmt.Sprintf(`{"workflowRunId":%q,"workflowStatus":"FAILED"}`, runID))
		e.w.expectCounts(t, map[string]int{"S1.waitUntil": 1, "S1.execute": 1})
	})
}

// TestWfStop mirrors integ/wf_stop_test.go: CANCEL, TERMINATE (with the
// TERMINATE_IF_RUNNING and legacy ALLOW_TERMINATE_IF_RUNNING restarts) and
// FAIL with a reason, checking the exact getWithWait answers.
func TestWfStop(t *testing.T) {
	t.Run("cancel", func(t *testing.T) {
		forEachStore(t, func(t *testing.T, e *env) {
			e.w.state("S1", waitForever, nil)
			wfID := e.id("wf-cancel")
			runID := e.start(e.startRequest(wfID, "signal", "S1"))
			e.stop(iwfapi.WorkflowStopRequest{WorkflowId: wfID, StopType: ptr(iwfapi.WorkflowStopTypeCancel)})
			_, body := e.result(wfID)
			jsonEqual(t, "getWithWait", body, fmt.Sprintf(`{"workflowRunId":%q,"workflowStatus":"CANCELED"}`, runID))
			// Stopping a closed run is "not exists".
			resp, err := e.api.StopWorkflowWithResponse(e.ctx(), iwfapi.WorkflowStopRequest{WorkflowId: wfID})
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode() != 400 || resp.JSON400 == nil || deref(resp.JSON400.SubStatus) != iwfapi.ErrorSubStatusWorkflowNotExists {
				t.Errorf("stop of a closed run: %d %s", resp.StatusCode(), resp.Body)
			}
		})
	})
	t.Run("terminate", func(t *testing.T) {
		forEachStore(t, func(t *testing.T, e *env) {
			e.w.state("S1", waitForever, nil)
			wfID := e.id("wf-terminate")
			req := e.startRequest(wfID, "signal", "S1")
			req.WorkflowStartOptions = &iwfapi.WorkflowStartOptions{}
			first := e.start(req)
			if dup := e.startRaw(req); dup.StatusCode() != 400 {
				t.Errorf("second start of a running workflow: %d %s", dup.StatusCode(), dup.Body)
			}
			req.WorkflowStartOptions.WorkflowIDReusePolicy = ptr(iwfapi.WorkflowIDReusePolicyTerminateIfRunning)
			second := e.start(req)
			req.WorkflowStartOptions.WorkflowIDReusePolicy = nil
			req.WorkflowStartOptions.IdReusePolicy = ptr(iwfapi.IDReusePolicyAllowTerminateIfRunning)
			third := e.start(req)
			if first == second || second == third {
				t.Fatalf("restarts reused run ids: %s %s %s", first, second, third)
			}
			for _, run := range []string{first, second} {
				_, body := e.get(wfID, run, true)
				jsonEqual(t, "replaced run", body, fmt.Sprintf(`{"workflowRunId":%q,"workflowStatus":"TERMINATED"}`, run))
			}
			e.stop(iwfapi.WorkflowStopRequest{WorkflowId: wfID, StopType: ptr(iwfapi.WorkflowStopTypeTerminate)})
			_, body := e.result(wfID)
			jsonEqual(t, "getWithWait", body, fmt.Sprintf(`{"workflowRunId":%q,"workflowStatus":"TERMINATED"}`, third))
		})
	})
	t.Run("fail", func(t *testing.T) {
		forEachStore(t, func(t *testing.T, e *env) {
			e.w.state("S1", waitForever, nil)
			wfID := e.id("wf-fail")
			runID := e.start(e.startRequest(wfID, "signal", "S1"))
			e.stop(iwfapi.WorkflowStopRequest{WorkflowId: wfID, StopType: ptr(iwfapi.WorkflowStopTypeFail), Reason: ptr("fail reason")})
			_, body := e.result(wfID)
			jsonEqual(t, "getWithWait", body, fmt.Sprintf(`{"workflowRunId":%q,"workflowStatus":"FAILED",
				"errorType":"CLIENT_API_FAILING_WORKFLOW_ERROR_TYPE","errorMessage":"fail reason"}`, runID))
		})
	})
	t.Run("fail without reason", func(t *testing.T) {
		forEachStore(t, func(t *testing.T, e *env) {
			e.w.state("S1", waitForever, nil)
			wfID := e.id("wf-fail-no-reason")
			runID := e.start(e.startRequest(wfID, "signal", "S1"))
			e.stop(iwfapi.WorkflowStopRequest{WorkflowId: wfID, StopType: ptr(iwfapi.WorkflowStopTypeFail)})
			_, body := e.result(wfID)
			jsonEqual(t, "getWithWait", body, fmt.Sprintf(`{"workflowRunId":%q,"workflowStatus":"FAILED",
				"errorType":"CLIENT_API_FAILING_WORKFLOW_ERROR_TYPE"}`, runID))
		})
	})
}

// TestWfStateAPIFail mirrors integ/wf_state_api_fail_test.go: waitUntil
// always answers 400 {}; maximumAttemptsDurationSeconds 1 (legacy
// startApiRetryPolicy) allows exactly one attempt, and the run fails with
// STATE_API_FAIL_ERROR_TYPE.
func TestWfStateAPIFail(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		e.w.state("S1", func(iwfapi.WorkflowStateStartRequest) reply { return reply{status: 400, body: "{}"} }, nil)
		wfID := e.id("wf-state-api-fail")
		req := e.startRequest(wfID, "wf_state_api_fail", "S1")
		req.StateOptions = &iwfapi.WorkflowStateOptions{
			StartApiRetryPolicy: &iwfapi.RetryPolicy{MaximumAttemptsDurationSeconds: ptr(int32(1))},
		}
		runID := e.start(req)
		_, body := e.result(wfID)
		// iWF's message ends with a Go formatting artefact,
		// "400 Bad Request  (%!s(*string=<nil>))"; this server's has none.
		jsonEqual(t, "getWithWait", body, fmt.Sprintf(`{"workflowRunId":%q,"workflowStatus":"FAILED","errorType":"STATE_API_FAIL_ERROR_TYPE",
			"errorMessage":"statusCode: 400, responseBody: {}, errMsg: 400 Bad Request"}`, runID))
		// No late retry: the run closed in the transaction that recorded the
		// failure, which deleted its tasks.
		e.w.expectCounts(t, map[string]int{"S1.waitUntil": 1})
	})
}

// TestWfStateAPITimeout mirrors integ/wf_state_api_timeout_test.go: waitUntil
// outlives its 1 s per-attempt timeout, one attempt is allowed, and the
// failure message names the StartToClose timeout.
func TestWfStateAPITimeout(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		e.w.state("S1", func(req iwfapi.WorkflowStateStartRequest) reply {
			e.w.sleep(20 * time.Second) // cut short when the test ends
			return noCommands(req)
		}, nil)
		wfID := e.id("wf-state-api-timeout")
		req := e.startRequest(wfID, "wf_state_api_timeout", "S1")
		req.StateOptions = &iwfapi.WorkflowStateOptions{
			WaitUntilApiTimeoutSeconds: ptr(int32(1)),
			WaitUntilApiRetryPolicy:    &iwfapi.RetryPolicy{MaximumAttempts: ptr(int32(1))},
		}
		runID := e.start(req)
		r, body := e.result(wfID)
		// The worker sleeps 20 s: the StartToClose message below proves the
		// attempt was cut by its 1 s timeout, not ended by the worker.
		msg := deref(r.ErrorMessage)
		if !strings.Contains(msg, "StartToClose") && !strings.Contains(msg, "START_TO_CLOSE") {
			t.Errorf("errorMessage %q names no StartToClose timeout", msg)
		}
		jsonEqual(t, "getWithWait", body, fmt.Sprintf(`{"workflowRunId":%q,"workflowStatus":"FAILED","errorType":"STATE_API_FAIL_ERROR_TYPE",
			"errorMessage":%q}`, runID, msg))
		e.w.expectCounts(t, map[string]int{"S1.waitUntil": 1})
	})
}

// TestWfStateExecuteAPIFailAndProceed mirrors
// integ/wf_state_execute_api_fail_and_proceed_test.go: execute fails once,
// PROCEED_TO_CONFIGURED_STATE starts the recovery state with the failed
// state's input, and the run completes without results.
func TestWfStateExecuteAPIFailAndProceed(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		input := &iwfapi.EncodedObject{Encoding: ptr("test-encoding"), Data: ptr("test-data")}
		sameInput := func(req iwfapi.WorkflowStateDecideRequest) bool {
			return req.StateInput != nil && deref(req.StateInput.Data) == "test-data" && deref(req.StateInput.Encoding) == "test-encoding"
		}
		e.w.state("S1", nil, func(req iwfapi.WorkflowStateDecideRequest) reply {
			if !sameInput(req) {
				return e.w.reject("S1 input %s", mustJSON(req.StateInput))
			}
			return reply{status: 400, body: map[string]string{"error": "test-error"}}
		})
		e.w.state("Recover", nil, func(req iwfapi.WorkflowStateDecideRequest) reply {
			if !sameInput(req) {
				return e.w.reject("Recover input %s", mustJSON(req.StateInput))
			}
			return complete(req)
		})
		wfID := e.id("wf-execute-fail-proceed")
		req := e.startRequest(wfID, "wf_execute_api_fail_and_proceed", "S1")
		req.StateInput = input
		req.StateOptions = &iwfapi.WorkflowStateOptions{
			ExecuteApiRetryPolicy:                &iwfapi.RetryPolicy{MaximumAttempts: ptr(int32(1))},
			SkipWaitUntil:                        ptr(true),
			ExecuteApiFailurePolicy:              ptr(iwfapi.ExecuteApiFailurePolicyProceedToConfiguredState),
			ExecuteApiFailureProceedStateId:      ptr("Recover"),
			ExecuteApiFailureProceedStateOptions: &iwfapi.WorkflowStateOptions{SkipWaitUntil: ptr(true)},
		}
		runID := e.start(req)
		_, body := e.result(wfID)
		jsonEqual(t, "getWithWait", body, fmt.Sprintf(`{"workflowRunId":%q,"workflowStatus":"COMPLETED"}`, runID))
		e.w.expectCounts(t, map[string]int{"S1.execute": 1, "Recover.execute": 1})
	})
}

// TestWfStateWaitUntilAPIFailAndProceed mirrors
// integ/wf_state_wait_until_api_fail_and_proceed_test.go: waitUntil fails,
// the proceed policy (legacy startApiFailurePolicy or the new
// waitUntilApiFailurePolicy) calls execute with
// {stateStartApiSucceeded:false, stateWaitUntilFailed:true}.
func TestWfStateWaitUntilAPIFailAndProceed(t *testing.T) {
	for _, c := range []struct {
		name string
		opts iwfapi.WorkflowStateOptions
	}{
		{"legacy", iwfapi.WorkflowStateOptions{
			StartApiRetryPolicy:   &iwfapi.RetryPolicy{MaximumAttempts: ptr(int32(1))},
			StartApiFailurePolicy: ptr(iwfapi.StartApiFailurePolicyProceedToDecideOnStartApiFailure),
		}},
		{"new enum", iwfapi.WorkflowStateOptions{
			StartApiRetryPolicy:       &iwfapi.RetryPolicy{MaximumAttempts: ptr(int32(1))},
			WaitUntilApiFailurePolicy: ptr(iwfapi.WaitUntilApiFailurePolicyProceedOnFailure),
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			forEachStore(t, func(t *testing.T, e *env) {
				e.w.state("S1", func(iwfapi.WorkflowStateStartRequest) reply {
					return reply{status: 400, body: iwfapi.WorkflowStateStartResponse{}}
				}, complete)
				wfID := e.id("wf-wait-until-fail-proceed")
				req := e.startRequest(wfID, "wf_state_api_fail_and_proceed", "S1")
				opts := c.opts
				req.StateOptions = &opts
				runID := e.start(req)
				_, body := e.result(wfID)
				jsonEqual(t, "getWithWait", body, fmt.Sprintf(`{"workflowRunId":%q,"workflowStatus":"COMPLETED"}`, runID))
				e.w.expectCounts(t, map[string]int{"S1.waitUntil": 1, "S1.execute": 1})
				jsonEqual(t, "execute commandResults", []byte(field(t, e.w.body(t, "S1.execute", 0), "commandResults")),
					`{"stateStartApiSucceeded":false,"stateWaitUntilFailed":true}`)
			})
		})
	}
}

// TestGetWithWaitTimeout mirrors integ/get_with_wait_timeout_test.go:
// getWithWait on a run that does not close answers 420 with iWF's exact body
// once the server's wait cap (or the request's waitTimeSeconds) is reached.
func TestGetWithWaitTimeout(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		e.w.state("S1", waitForever, nil)
		wfID := e.id("wf-wait-timeout")
		req := e.startRequest(wfID, "signal", "S1")
		e.start(req)
		const want = `{"detail":"workflow is still running, waiting has exceeded timeout limit, please retry","subStatus":"LONG_POLL_TIME_OUT_SUB_STATUS"}`

		started := time.Now()
		resp, err := e.api.GetWorkflowWithWaitWithResponse(e.ctx(), iwfapi.WorkflowGetRequest{WorkflowId: wfID})
		if err != nil {
			t.Fatal(err)
		}
		took := time.Since(started)
		expectError(t, "getWithWait without waitTimeSeconds", resp, 420, want)
		if took < defaultMaxWait-200*time.Millisecond {
			t.Errorf("answered after %v, before the server's cap %v", took, defaultMaxWait)
		}

		started = time.Now()
		resp, err = e.api.GetWorkflowWithWaitWithResponse(e.ctx(), iwfapi.WorkflowGetRequest{WorkflowId: wfID, WaitTimeSeconds: ptr(int32(1))})
		if err != nil {
			t.Fatal(err)
		}
		took = time.Since(started)
		expectError(t, "getWithWait with waitTimeSeconds 1", resp, 420, want)
		if took < 800*time.Millisecond {
			t.Errorf("answered after %v, before its 1 s wait", took)
		}
	})
}

// TestWaitForStateCompletion mirrors integ/wait_for_state_completion_test.go:
// waiting by state execution id (S1-1) and by stateId S2 + waitForKey. This
// server answers with the real completion record where iWF answers an empty
// one.
func TestWaitForStateCompletion(t *testing.T) {
	for _, byStateID := range []bool{false, true} {
		name := "by state execution id"
		if byStateID {
			name = "by state id and waitForKey"
		}
		t.Run(name, func(t *testing.T) {
			forEachStore(t, func(t *testing.T, e *env) {
				e.w.state("S1", func(req iwfapi.WorkflowStateStartRequest) reply {
					return commands(iwfapi.CommandRequest{
						DeciderTriggerType: ptr(iwfapi.DeciderTriggerTypeAllCommandCompleted),
						TimerCommands: list(iwfapi.TimerCommand{CommandId: ptr("timer-cmd-id"),
							FiringUnixTimestampSeconds: ptr(time.Now().Unix() + 2)}),
					})
				}, func(iwfapi.WorkflowStateDecideRequest) reply {
					return decide(iwfapi.StateMovement{StateId: "S2", WaitForKey: ptr("testKey")})
				})
				e.w.state("S2", noCommands, complete)
				wfID := e.id("wait-for-state-completion")
				req := e.startRequest(wfID, "wait_for_state_completion", "S1")
				wait := iwfapi.WorkflowWaitForStateCompletionRequest{WorkflowId: wfID, WaitTimeSeconds: ptr(int32(30))}
				want := `{"stateCompletionOutput":{"completedStateId":"S1","completedStateExecutionId":"S1-1"}}`
				if byStateID {
					req.WaitForCompletionStateIds = list("S2")
					wait.StateId, wait.WaitForKey = ptr("S2"), ptr("testKey")
					want = `{"stateCompletionOutput":{"completedStateId":"S2","completedStateExecutionId":"S2-1"}}`
				} else {
					req.WaitForCompletionStateExecutionIds = list("S1-1")
					wait.StateExecutionId = ptr("S1-1")
				}
				e.start(req)
				started := time.Now()
				var resp *iwfapi.WaitForStateCompletionResponse
				for {
					var err error
					resp, err = e.api.WaitForStateCompletionWithResponse(e.ctx(), wait)
					if err != nil {
						t.Fatal(err)
					}
					if resp.StatusCode() != 420 || time.Since(started) > 20*time.Second {
						break
					}
				}
				if resp.StatusCode() != 200 {
					t.Fatalf("waitForStateCompletion: %d %s", resp.StatusCode(), resp.Body)
				}
				jsonEqual(t, "waitForStateCompletion", resp.Body, want)
				if took := time.Since(started); took < time.Second {
					t.Errorf("answered after %v, before the 2 s timer of S1 fired", took)
				}
				r, _ := e.result(wfID)
				if r.WorkflowStatus != iwfapi.WorkflowStatusCompleted {
					t.Errorf("status %s", r.WorkflowStatus)
				}
				// The completion is remembered: asking again answers at once
				// (iWF answers 400 once its waiter is gone).
				resp, err := e.api.WaitForStateCompletionWithResponse(e.ctx(), wait)
				if err != nil {
					t.Fatal(err)
				}
				if resp.StatusCode() != 200 {
					t.Errorf("second waitForStateCompletion: %d %s", resp.StatusCode(), resp.Body)
				} else {
					jsonEqual(t, "second waitForStateCompletion", resp.Body, want)
				}
				e.w.expectCounts(t, map[string]int{"S1.waitUntil": 1, "S1.execute": 1, "S2.waitUntil": 1, "S2.execute": 1})
			})
		})
	}
	t.Run("unknown workflow times out", func(t *testing.T) {
		forEachStore(t, func(t *testing.T, e *env) {
			resp, err := e.api.WaitForStateCompletionWithResponse(e.ctx(), iwfapi.WorkflowWaitForStateCompletionRequest{
				WorkflowId: e.id("never-started"), StateExecutionId: ptr("S1-1"), WaitTimeSeconds: ptr(int32(1)),
			})
			if err != nil {
				t.Fatal(err)
			}
			expectError(t, "waitForStateCompletion", resp, 420,
				`{"detail":"waiting has exceeded timeout limit, please retry","subStatus":"LONG_POLL_TIME_OUT_SUB_STATUS"}`)
		})
	})
}
