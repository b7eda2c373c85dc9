package compattest

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
)

// TestBasic mirrors integ/basic_test.go: a two-state happy path started with
// the legacy option names, REJECT_DUPLICATE and a workflow retry policy.
func TestBasic(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		startedAt := time.Now().Unix()
		checkContext := func(api string, c iwfapi.Context) bool {
			now := time.Now().Unix()
			if deref(c.Attempt) != 1 || deref(c.FirstAttemptTimestamp) < startedAt-1 || deref(c.FirstAttemptTimestamp) > now+1 ||
				c.WorkflowStartedTimestamp < startedAt-1 || c.WorkflowStartedTimestamp > now+1 || c.WorkflowRunId == "" {
				e.w.fail("%s: bad context %s", api, mustJSON(c))
				return false
			}
			return true
		}
		e.w.state("S1", func(req iwfapi.WorkflowStateStartRequest) reply {
			if !checkContext("S1.waitUntil", req.Context) || deref(req.Context.StateExecutionId) != "S1-1" {
				return e.w.reject("S1.waitUntil context %s", mustJSON(req.Context))
			}
			return noCommands(req)
		}, func(req iwfapi.WorkflowStateDecideRequest) reply {
			checkContext("S1.execute", req.Context)
			return decide(moveWith("S2", req.StateInput, iwfapi.WorkflowStateOptions{
				StartApiTimeoutSeconds:   ptr(int32(14)),
				ExecuteApiTimeoutSeconds: ptr(int32(15)),
				StartApiRetryPolicy:      retryPolicy(14),
				ExecuteApiRetryPolicy:    retryPolicy(15),
			}))
		})
		e.w.state("S2", func(req iwfapi.WorkflowStateStartRequest) reply {
			checkContext("S2.waitUntil", req.Context)
			return noCommands(req)
		}, func(req iwfapi.WorkflowStateDecideRequest) reply {
			checkContext("S2.execute", req.Context)
			return decide(move(gracefulComplete, req.StateInput))
		})

		wfID := e.id("basic")
		input := obj(`"test data"`)
		req := e.startRequest(wfID, "basic", "S1")
		req.WorkflowTimeoutSeconds = 100
		req.StateInput = input
		req.WorkflowStartOptions = &iwfapi.WorkflowStartOptions{
			WorkflowIDReusePolicy: ptr(iwfapi.WorkflowIDReusePolicyRejectDuplicate),
			RetryPolicy: &iwfapi.WorkflowRetryPolicy{
				InitialIntervalSeconds: ptr(int32(11)), BackoffCoefficient: ptr(float32(11)),
				MaximumAttempts: ptr(int32(11)), MaximumIntervalSeconds: ptr(int32(11)),
			},
		}
		req.StateOptions = &iwfapi.WorkflowStateOptions{
			StartApiTimeoutSeconds:  ptr(int32(12)),
			DecideApiTimeoutSeconds: ptr(int32(13)),
			StartApiRetryPolicy:     retryPolicy(12),
			DecideApiRetryPolicy:    retryPolicy(13),
		}
		runID := e.start(req)

		// A second start with REJECT_DUPLICATE is refused, while running and after.
		dup := e.startRaw(req)
		if dup.StatusCode() != 400 || dup.JSON400 == nil || deref(dup.JSON400.SubStatus) != iwfapi.ErrorSubStatusWorkflowAlreadyStarted {
			t.Errorf("duplicate start: %d %s", dup.StatusCode(), dup.Body)
		}

		_, body := e.result(wfID)
		jsonEqual(t, "getWithWait", body, fmt.Sprintf(`{"workflowRunId":%q,"workflowStatus":"COMPLETED",
			"results":[{"completedStateId":"S2","completedStateExecutionId":"S2-1","completedStateOutput":{"encoding":"json","data":"\"test data\""}}]}`, runID))

		dup = e.startRaw(req)
		if dup.StatusCode() != 400 || dup.JSON400 == nil || deref(dup.JSON400.SubStatus) != iwfapi.ErrorSubStatusWorkflowAlreadyStarted {
			t.Errorf("REJECT_DUPLICATE start after completion: %d %s", dup.StatusCode(), dup.Body)
		}

		wrong, err := e.api.GetWorkflowWithWaitWithResponse(e.ctx(), iwfapi.WorkflowGetRequest{WorkflowId: "a wrong workflowId " + wfID})
		if err != nil {
			t.Fatal(err)
		}
		if wrong.StatusCode() != 400 || wrong.JSON400 == nil || deref(wrong.JSON400.SubStatus) != iwfapi.ErrorSubStatusWorkflowNotExists {
			t.Errorf("getWithWait of an unknown workflow: %d %s", wrong.StatusCode(), wrong.Body)
		}

		e.w.expectCounts(t, map[string]int{"S1.waitUntil": 1, "S1.execute": 1, "S2.waitUntil": 1, "S2.execute": 1})
	})
}

func retryPolicy(n int32) *iwfapi.RetryPolicy {
	return &iwfapi.RetryPolicy{
		InitialIntervalSeconds: ptr(n), BackoffCoefficient: ptr(float32(n)),
		MaximumAttempts: ptr(n), MaximumIntervalSeconds: ptr(n),
	}
}

// TestNoWorkflowID mirrors integ/no_workflow_id_test.go: an empty workflowId
// is "not exists" with Temporal's message, on every endpoint that names a
// workflow.
func TestNoWorkflowID(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		const want = `{"detail":"WorkflowId is not set on request.","subStatus":"WORKFLOW_NOT_EXISTS_SUB_STATUS"}`
		sig, err := e.api.SignalWorkflowWithResponse(e.ctx(), iwfapi.WorkflowSignalRequest{WorkflowId: "", SignalChannelName: "test-signal-name"})
		if err != nil {
			t.Fatal(err)
		}
		expectError(t, "signal", sig, 400, want)

		get, err := e.api.GetWorkflowWithResponse(e.ctx(), iwfapi.WorkflowGetRequest{WorkflowId: ""})
		if err != nil {
			t.Fatal(err)
		}
		expectError(t, "get", get, 400, want)

		stop, err := e.api.StopWorkflowWithResponse(e.ctx(), iwfapi.WorkflowStopRequest{WorkflowId: ""})
		if err != nil {
			t.Fatal(err)
		}
		expectError(t, "stop", stop, 400, want)

		rpc := e.rpc(iwfapi.WorkflowRpcRequest{WorkflowId: "", RpcName: "r"})
		expectError(t, "rpc", rpc, 400, want)
	})
}

// TestStartWithNoOptions mirrors integ/start_with_no_options_test.go: a
// start without workflowStartOptions still sets the system search attribute
// IwfWorkflowType (read here through searchattributes/get instead of
// Temporal's describe).
func TestStartWithNoOptions(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		e.w.state("S1", func(iwfapi.WorkflowStateStartRequest) reply {
			return commands(iwfapi.CommandRequest{
				CommandWaitingType: ptr(iwfapi.CommandWaitingTypeAllCompleted),
				SignalCommands:     list(iwfapi.SignalCommand{SignalChannelName: "never"}),
			})
		}, nil)
		wfID := e.id("no-options")
		req := e.startRequest(wfID, "basic", "S1")
		req.StateInput = obj(`"test data"`)
		runID := e.start(req)
		got := e.searchAttributes(wfID, "", iwfapi.SearchAttributeKeyAndType{Key: ptr("IwfWorkflowType"), ValueType: ptr(iwfapi.SearchAttributeValueTypeKeyword)})
		jsonEqualValue(t, "IwfWorkflowType", got, `[{"key":"IwfWorkflowType","valueType":"KEYWORD","stringValue":"basic"}]`)
		e.stop(iwfapi.WorkflowStopRequest{WorkflowId: wfID, StopType: ptr(iwfapi.WorkflowStopTypeTerminate)})
		_, body := e.get(wfID, "", true)
		jsonEqual(t, "get after terminate", body, fmt.Sprintf(`{"workflowRunId":%q,"workflowStatus":"TERMINATED"}`, runID))
	})
}

// TestSkipStart mirrors integ/skip_start_test.go: skipWaitUntil on the start
// state and the legacy skipStartApi on the next one; waitUntil is never
// called and execute gets no commandResults and no stateLocals.
func TestSkipStart(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		e.w.state("S1", nil, func(req iwfapi.WorkflowStateDecideRequest) reply {
			return decide(moveWith("S2", req.StateInput, iwfapi.WorkflowStateOptions{SkipStartApi: ptr(true)}))
		})
		e.w.state("S2", nil, func(req iwfapi.WorkflowStateDecideRequest) reply {
			return decide(move(gracefulComplete, req.StateInput))
		})
		wfID := e.id("skipstart")
		req := e.startRequest(wfID, "skipstart", "S1")
		req.StateInput = obj(`"test data"`)
		req.StateOptions = &iwfapi.WorkflowStateOptions{SkipWaitUntil: ptr(true)}
		runID := e.start(req)
		_, body := e.result(wfID)
		jsonEqual(t, "result", body, fmt.Sprintf(`{"workflowRunId":%q,"workflowStatus":"COMPLETED",
			"results":[{"completedStateId":"S2","completedStateExecutionId":"S2-1","completedStateOutput":{"encoding":"json","data":"\"test data\""}}]}`, runID))
		e.w.expectCounts(t, map[string]int{"S1.execute": 1, "S2.execute": 1})
		for _, key := range []string{"S1.execute", "S2.execute"} {
			b := e.w.body(t, key, 0)
			if f := field(t, b, "commandResults"); f != "" {
				t.Errorf("%s got commandResults %s after a skipped waitUntil", key, f)
			}
			if f := field(t, b, "stateLocals"); f != "" {
				t.Errorf("%s got stateLocals %s", key, f)
			}
		}
	})
}

// TestStartDelay mirrors integ/start_delay_test.go with a 2 s delay: the run
// exists at once but its first state starts only after the delay.
func TestStartDelay(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		var firstCall atomic.Pointer[time.Time]
		e.w.state("S1", func(req iwfapi.WorkflowStateStartRequest) reply {
			now := time.Now()
			firstCall.CompareAndSwap(nil, &now)
			return noCommands(req)
		}, goTo("S2"))
		e.w.state("S2", noCommands, complete)
		wfID := e.id("start-delay")
		req := e.startRequest(wfID, "basic", "S1")
		req.WorkflowTimeoutSeconds = 100
		req.StateInput = obj(`"test data"`)
		req.WorkflowStartOptions = &iwfapi.WorkflowStartOptions{
			WorkflowStartDelaySeconds: ptr(int32(2)),
			WorkflowIDReusePolicy:     ptr(iwfapi.WorkflowIDReusePolicyRejectDuplicate),
			RetryPolicy: &iwfapi.WorkflowRetryPolicy{
				InitialIntervalSeconds: ptr(int32(11)), BackoffCoefficient: ptr(float32(11)),
				MaximumAttempts: ptr(int32(11)), MaximumIntervalSeconds: ptr(int32(11)),
			},
		}
		req.StateOptions = &iwfapi.WorkflowStateOptions{
			StartApiTimeoutSeconds: ptr(int32(12)), DecideApiTimeoutSeconds: ptr(int32(13)),
			StartApiRetryPolicy: retryPolicy(12), DecideApiRetryPolicy: retryPolicy(13),
		}
		sent := time.Now()
		e.start(req)
		// The run exists at once. Whether it still runs when get answers
		// depends on the machine only if get itself took the whole delay.
		if s := e.status(wfID); s != iwfapi.WorkflowStatusRunning && time.Since(sent) < 2*time.Second {
			t.Errorf("status during the delay: %s", s)
		}
		r, _ := e.result(wfID)
		took := time.Since(sent)
		if r.WorkflowStatus != iwfapi.WorkflowStatusCompleted || took < 2*time.Second {
			t.Errorf("completed as %s after %v, want COMPLETED after the 2 s delay", r.WorkflowStatus, took)
		}
		if first := firstCall.Load(); first == nil {
			t.Errorf("S1 never started")
		} else if d := first.Sub(sent); d < 1900*time.Millisecond {
			t.Errorf("S1 started %v after the start request, before the 2 s delay", d)
		}
		e.w.expectCounts(t, map[string]int{"S1.waitUntil": 1, "S1.execute": 1, "S2.waitUntil": 1, "S2.execute": 1})
	})
}

// TestWfIgnoreAlreadyStarted mirrors integ/wf_ignore_already_started_test.go:
// the four combinations of ignoreAlreadyStartedError and requestIds.
func TestWfIgnoreAlreadyStarted(t *testing.T) {
	cases := []struct {
		name          string
		first, second *iwfapi.WorkflowAlreadyStartedOptions
		wantError     bool
	}{
		{"not ignored", nil, nil, true},
		{"ignored", nil, &iwfapi.WorkflowAlreadyStartedOptions{IgnoreAlreadyStartedError: true}, false},
		{"ignored with the same requestId",
			&iwfapi.WorkflowAlreadyStartedOptions{IgnoreAlreadyStartedError: false, RequestId: ptr("test")},
			&iwfapi.WorkflowAlreadyStartedOptions{IgnoreAlreadyStartedError: true, RequestId: ptr("test")}, false},
		{"not ignored with another requestId",
			&iwfapi.WorkflowAlreadyStartedOptions{IgnoreAlreadyStartedError: false, RequestId: ptr("test1")},
			&iwfapi.WorkflowAlreadyStartedOptions{IgnoreAlreadyStartedError: true, RequestId: ptr("test2")}, true},
		{"requestId given but the run has none",
			nil,
			&iwfapi.WorkflowAlreadyStartedOptions{IgnoreAlreadyStartedError: true, RequestId: ptr("test")}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			forEachStore(t, func(t *testing.T, e *env) {
				e.w.state("S1", func(iwfapi.WorkflowStateStartRequest) reply {
					return commands(iwfapi.CommandRequest{
						DeciderTriggerType: ptr(iwfapi.DeciderTriggerTypeAllCommandCompleted),
						TimerCommands:      list(iwfapi.TimerCommand{CommandId: ptr("timer-cmd-id"), DurationSeconds: ptr(int64(600))}),
					})
				}, complete)
				wfID := e.id("ignore-already-started")
				req := func(o *iwfapi.WorkflowAlreadyStartedOptions) iwfapi.WorkflowStartRequest {
					r := e.startRequest(wfID, "wf_ignore_already_started", "S1")
					r.WorkflowStartOptions = &iwfapi.WorkflowStartOptions{WorkflowAlreadyStartedOptions: o}
					return r
				}
				first := e.start(req(c.first))
				second := e.startRaw(req(c.second))
				if c.wantError {
					if second.StatusCode() != 400 || second.JSON400 == nil || deref(second.JSON400.SubStatus) != iwfapi.ErrorSubStatusWorkflowAlreadyStarted {
						t.Errorf("second start: %d %s, want 400 WORKFLOW_ALREADY_STARTED_SUB_STATUS", second.StatusCode(), second.Body)
					}
					return
				}
				jsonEqual(t, "second start", second.Body, fmt.Sprintf(`{"workflowRunId":%q}`, first))
			})
		})
	}
}

// TestIDReusePolicies extends integ/basic_test.go and integ/wf_stop_test.go
// to the whole id-reuse matrix: every policy, in its current and legacy
// spelling, against a running, a completed and a failed previous run; and
// the legacy field winning when both are given.
func TestIDReusePolicies(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		e.w.state("Wait", waitForever, nil)
		e.w.state("Done", noCommands, complete)
		type policy struct {
			name   string
			opts   iwfapi.WorkflowStartOptions
			allows map[string]bool // by previous run: running, completed, failed
		}
		modern := func(p iwfapi.WorkflowIDReusePolicy) iwfapi.WorkflowStartOptions {
			return iwfapi.WorkflowStartOptions{WorkflowIDReusePolicy: ptr(p)}
		}
		legacy := func(p iwfapi.IDReusePolicy) iwfapi.WorkflowStartOptions {
			return iwfapi.WorkflowStartOptions{IdReusePolicy: ptr(p)}
		}
		dup := map[string]bool{"running": false, "completed": true, "failed": true}
		failedOnly := map[string]bool{"running": false, "completed": false, "failed": true}
		reject := map[string]bool{"running": false, "completed": false, "failed": false}
		terminate := map[string]bool{"running": true, "completed": true, "failed": true}
		policies := []policy{
			{"default", iwfapi.WorkflowStartOptions{}, dup},
			{"ALLOW_DUPLICATE", modern(iwfapi.WorkflowIDReusePolicyAllowDuplicate), dup},
			{"ALLOW_IF_NO_RUNNING", legacy(iwfapi.IDReusePolicyAllowIfNoRunning), dup},
			{"ALLOW_DUPLICATE_FAILED_ONLY", modern(iwfapi.WorkflowIDReusePolicyAllowDuplicateFailedOnly), failedOnly},
			{"ALLOW_IF_PREVIOUS_EXISTS_ABNORMALLY", legacy(iwfapi.IDReusePolicyAllowIfPreviousExistsAbnormally), failedOnly},
			{"ALLOW_IF_PREVIOUS_EXITS_ABNORMALLY", legacy(iwfapi.IDReusePolicyAllowIfPreviousExitsAbnormally), failedOnly},
			{"REJECT_DUPLICATE", modern(iwfapi.WorkflowIDReusePolicyRejectDuplicate), reject},
			{"DISALLOW_REUSE", legacy(iwfapi.IDReusePolicyDisallowReuse), reject},
			{"TERMINATE_IF_RUNNING", modern(iwfapi.WorkflowIDReusePolicyTerminateIfRunning), terminate},
			{"ALLOW_TERMINATE_IF_RUNNING", legacy(iwfapi.IDReusePolicyAllowTerminateIfRunning), terminate},
			{"legacy field wins", iwfapi.WorkflowStartOptions{
				IdReusePolicy:         ptr(iwfapi.IDReusePolicyDisallowReuse),
				WorkflowIDReusePolicy: ptr(iwfapi.WorkflowIDReusePolicyAllowDuplicate),
			}, reject},
		}
		for _, p := range policies {
			for _, prev := range []string{"running", "completed", "failed"} {
				wfID := e.id("reuse")
				first := e.startRequest(wfID, "t", "Wait")
				if prev == "completed" {
					first.StartStateId = ptr("Done")
				}
				firstRun := e.start(first)
				switch prev {
				case "completed":
					e.result(wfID)
				case "failed":
					e.stop(iwfapi.WorkflowStopRequest{WorkflowId: wfID, StopType: ptr(iwfapi.WorkflowStopTypeFail)})
				}
				second := e.startRequest(wfID, "t", "Wait")
				opts := p.opts
				second.WorkflowStartOptions = &opts
				resp := e.startRaw(second)
				switch {
				case p.allows[prev] && resp.StatusCode() != 200:
					t.Errorf("%s after a %s run: %d %s, want a new run", p.name, prev, resp.StatusCode(), resp.Body)
				case !p.allows[prev] && (resp.StatusCode() != 400 || !strings.Contains(string(resp.Body), "WORKFLOW_ALREADY_STARTED_SUB_STATUS")):
					t.Errorf("%s after a %s run: %d %s, want 400 WORKFLOW_ALREADY_STARTED_SUB_STATUS", p.name, prev, resp.StatusCode(), resp.Body)
				case p.allows[prev] && prev == "running":
					if r, _ := e.get(wfID, firstRun, false); r.WorkflowStatus != iwfapi.WorkflowStatusTerminated {
						t.Errorf("%s: the running run is %s, want TERMINATED", p.name, r.WorkflowStatus)
					}
				}
			}
		}
	})
}
