package iwf_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/sdk-go/iwf"
)

// testWorkflow has a state with WaitUntil ("wait"), one without ("ship")
// whose options proceed to "recover" on execute failure, and "recover".
type testWorkflow struct {
	wf      *iwf.Workflow
	wait    *waitState
	ship    *state
	recover *state
	handler http.Handler
}

func newTestWorkflow(t *testing.T) *testWorkflow {
	t.Helper()
	tw := &testWorkflow{
		wait: &waitState{state: state{id: "wait"}},
		ship: &state{id: "ship", options: &iwf.StateOptions{
			ExecuteTimeout:               5 * time.Second,
			ExecuteRetryPolicy:           &iwf.RetryPolicy{InitialInterval: 2 * time.Second, BackoffCoefficient: 1.5, MaximumAttempts: 3},
			ExecuteFailurePolicy:         iwf.ProceedToConfiguredState,
			ExecuteFailureProceedStateID: "recover",
			DataAttributesLoading:        &iwf.LoadingPolicy{Type: iwf.LoadPartialWithExclusiveLock, PartialLoadingKeys: []string{"order"}, LockingKeys: []string{"stock"}},
		}},
		recover: &state{id: "recover"},
	}
	tw.wf = &iwf.Workflow{
		Type:             "OrderWorkflow",
		StartState:       tw.wait,
		States:           []iwf.WorkflowState{tw.wait, tw.ship, tw.recover},
		SignalChannels:   []string{"payment"},
		InternalChannels: []string{"ready", "log-*"},
		DataAttributes:   []string{"order", "stock", "paidAt"},
		SearchAttributes: []iwf.SearchAttributeDef{
			{Key: "CustomKeywordField", Type: iwf.SearchAttributeKeyword},
			{Key: "CustomIntField", Type: iwf.SearchAttributeInt},
			{Key: "CustomDatetimeField", Type: iwf.SearchAttributeDatetime},
		},
		RPCs: map[string]iwf.RPC{},
	}
	reg, err := iwf.NewRegistry(tw.wf)
	if err != nil {
		t.Fatal(err)
	}
	tw.handler = iwf.NewWorkerService(reg, &iwf.WorkerOptions{Logger: quietLogger()})
	return tw
}

const waitUntilRequest = `{
 "context":{"workflowId":"order-42","workflowRunId":"run-1","workflowStartedTimestamp":1700000000,
            "stateExecutionId":"wait-1","firstAttemptTimestamp":1700000001,"attempt":2},
 "workflowType":"OrderWorkflow","workflowStateId":"wait",
 "stateInput":{"encoding":"json","data":"{\"amount\":10}"},
 "searchAttributes":[{"key":"CustomKeywordField","valueType":"KEYWORD","stringValue":"new"}],
 "dataObjects":[{"key":"stock","value":{"encoding":"json","data":"5"}}]}`

func TestWaitUntilEncodesCommandsAndWrites(t *testing.T) {
	tw := newTestWorkflow(t)
	var seen struct {
		workflowID, runID, execID string
		attempt                   int
		started, first            time.Time
		amount, stock             int
		keyword                   string
	}
	tw.wait.waitUntil = func(ctx iwf.Context, in iwf.Object, p iwf.Persistence, c iwf.Communication) (*iwf.CommandRequest, error) {
		seen.workflowID, seen.runID, seen.execID = ctx.WorkflowID(), ctx.WorkflowRunID(), ctx.StateExecutionID()
		seen.attempt, seen.started, seen.first = ctx.Attempt(), ctx.WorkflowStartedAt(), ctx.FirstAttemptAt()
		order, err := iwf.As[struct{ Amount int }](in)
		if err != nil {
			return nil, err
		}
		seen.amount = order.Amount
		if err := p.GetDataAttribute("stock", &seen.stock); err != nil {
			return nil, err
		}
		seen.keyword = p.GetSearchAttributeKeyword("CustomKeywordField")

		p.SetStateLocal("startedAt", 1700000000)
		p.SetDataAttribute("order", map[string]int{"amount": 10})
		p.SetDataAttribute("stock", 4)
		p.SetDataAttribute("order", map[string]int{"amount": 11}) // last write wins, first position kept
		p.SetSearchAttributeKeyword("CustomKeywordField", "waiting")
		p.SetSearchAttributeInt("CustomIntField", 7)
		p.SetSearchAttributeDatetime("CustomDatetimeField", time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC))
		p.RecordEvent("waited", "yes")
		c.PublishToInternalChannel("ready", "go")
		c.PublishToInternalChannel("log-1", nil)
		return iwf.AnyCommandCompleted(
			iwf.TimerCommand("expire", 90*time.Second),
			iwf.SignalCommand("paid", "payment"),
			iwf.InternalChannelCommand("ready", "ready"),
			iwf.TimerCommand("", 1500*time.Millisecond),
		), nil
	}
	status, body := post(t, tw.handler, iwf.WaitUntilPath, waitUntilRequest)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, body)
	}
	jsonEqual(t, body, `{
	 "commandRequest":{"commandWaitingType":"ANY_COMPLETED",
	   "timerCommands":[{"commandId":"expire","durationSeconds":90},{"commandId":"","durationSeconds":2}],
	   "signalCommands":[{"commandId":"paid","signalChannelName":"payment"}],
	   "interStateChannelCommands":[{"commandId":"ready","channelName":"ready"}]},
	 "upsertDataObjects":[
	   {"key":"order","value":{"encoding":"json","data":"{\"amount\":11}"}},
	   {"key":"stock","value":{"encoding":"json","data":"4"}}],
	 "upsertSearchAttributes":[
	   {"key":"CustomKeywordField","valueType":"KEYWORD","stringValue":"waiting"},
	   {"key":"CustomIntField","valueType":"INT","integerValue":7},
	   {"key":"CustomDatetimeField","valueType":"DATETIME","stringValue":"2024-01-02T03:04:05+00:00"}],
	 "upsertStateLocals":[{"key":"startedAt","value":{"encoding":"json","data":"1700000000"}}],
	 "recordEvents":[{"key":"waited","value":{"encoding":"json","data":"\"yes\""}}],
	 "publishToInterStateChannel":[
	   {"channelName":"ready","value":{"encoding":"json","data":"\"go\""}},
	   {"channelName":"log-1"}]}`)
	if seen.workflowID != "order-42" || seen.runID != "run-1" || seen.execID != "wait-1" || seen.attempt != 2 ||
		seen.started.Unix() != 1700000000 || seen.first.Unix() != 1700000001 {
		t.Errorf("context not passed through: %+v", seen)
	}
	if seen.amount != 10 || seen.stock != 5 || seen.keyword != "new" {
		t.Errorf("input or persistence not read: %+v", seen)
	}
}

func TestWaitUntilCommandVariants(t *testing.T) {
	cases := []struct {
		name   string
		req    *iwf.CommandRequest
		status int
		want   string // commandRequest, or a part of the error detail
	}{
		{"nil means no commands", nil, 200, `{"commandWaitingType":"ALL_COMPLETED"}`},
		{"all", iwf.AllCommandsCompleted(iwf.SignalCommand("a", "payment"), iwf.SignalCommand("b", "payment")), 200,
			`{"commandWaitingType":"ALL_COMPLETED","signalCommands":[{"commandId":"a","signalChannelName":"payment"},{"commandId":"b","signalChannelName":"payment"}]}`},
		{"combinations", iwf.AnyCommandCombinationsCompleted([][]string{{"t"}, {"s", "s"}},
			iwf.TimerCommand("t", time.Hour), iwf.SignalCommand("s", "payment"), iwf.SignalCommand("s", "payment")), 200,
			`{"commandWaitingType":"ANY_COMBINATION_COMPLETED",
			  "timerCommands":[{"commandId":"t","durationSeconds":3600}],
			  "signalCommands":[{"commandId":"s","signalChannelName":"payment"},{"commandId":"s","signalChannelName":"payment"}],
			  "commandCombinations":[{"commandIds":["t"]},{"commandIds":["s","s"]}]}`},
		{"combination with unknown id", iwf.AnyCommandCombinationsCompleted([][]string{{"x"}}, iwf.TimerCommand("t", time.Second)), 500, `unknown command id "x"`},
		{"combination without id", iwf.AnyCommandCombinationsCompleted([][]string{{"t"}}, iwf.TimerCommand("t", time.Second), iwf.TimerCommand("", time.Second)), 500, "needs an id on every command"},
		{"undeclared signal channel", iwf.AnyCommandCompleted(iwf.SignalCommand("s", "nope")), 500, `signal channel "nope"`},
		{"undeclared internal channel", iwf.AnyCommandCompleted(iwf.InternalChannelCommand("s", "nope")), 500, `internal channel "nope"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tw := newTestWorkflow(t)
			tw.wait.waitUntil = func(iwf.Context, iwf.Object, iwf.Persistence, iwf.Communication) (*iwf.CommandRequest, error) {
				return tc.req, nil
			}
			status, body := post(t, tw.handler, iwf.WaitUntilPath, waitUntilRequest)
			if status != tc.status {
				t.Fatalf("status %d, want %d: %s", status, tc.status, body)
			}
			if status == 200 {
				jsonEqual(t, field(t, body, "commandRequest"), tc.want)
			} else if !strings.Contains(stringField(t, body, "detail"), tc.want) {
				t.Fatalf("detail does not mention %q: %s", tc.want, body)
			}
		})
	}
}

func executeRequest(stateID string, extra string) string {
	return `{"context":{"workflowId":"order-42","workflowRunId":"run-1","workflowStartedTimestamp":1700000000,
	  "stateExecutionId":"` + stateID + `-1","firstAttemptTimestamp":1700000001,"attempt":1},
	 "workflowType":"OrderWorkflow","workflowStateId":"` + stateID + `"` + extra + `}`
}

func TestExecuteEncodesDecisions(t *testing.T) {
	// The options every movement to "ship" carries, from its Options and
	// from having no WaitUntil; "recover" has no WaitUntil either.
	const shipOptions = `{"skipWaitUntil":true,"executeApiTimeoutSeconds":5,
	  "executeApiRetryPolicy":{"initialIntervalSeconds":2,"backoffCoefficient":1.5,"maximumAttempts":3},
	  "executeApiFailurePolicy":"PROCEED_TO_CONFIGURED_STATE","executeApiFailureProceedStateId":"recover",
	  "executeApiFailureProceedStateOptions":{"skipWaitUntil":true},
	  "dataAttributesLoadingPolicy":{"persistenceLoadingType":"LOAD_PARTIAL_WITH_EXCLUSIVE_LOCK","partialLoadingKeys":["order"],"lockingKeys":["stock"]}}`
	tw := newTestWorkflow(t)
	cases := []struct {
		name     string
		decision *iwf.StateDecision
		want     string
	}{
		{"single next state", iwf.SingleNextState(tw.ship, "box"),
			`{"nextStates":[{"stateId":"ship","stateInput":{"encoding":"json","data":"\"box\""},"stateOptions":` + shipOptions + `}]}`},
		{"multi next states", iwf.MultiNextStates(iwf.NextState(tw.wait, nil), iwf.StateMovement{StateID: "recover", Input: 1, WaitForKey: "k"}),
			`{"nextStates":[{"stateId":"wait"},
			  {"stateId":"recover","stateInput":{"encoding":"json","data":"1"},"stateOptions":{"skipWaitUntil":true},"waitForKey":"k"}]}`},
		{"graceful complete", iwf.GracefulCompleteWorkflow("done"),
			`{"nextStates":[{"stateId":"_SYS_GRACEFUL_COMPLETING_WORKFLOW","stateInput":{"encoding":"json","data":"\"done\""}}]}`},
		{"force complete without output", iwf.ForceCompleteWorkflow(nil),
			`{"nextStates":[{"stateId":"_SYS_FORCE_COMPLETING_WORKFLOW"}]}`},
		{"force fail", iwf.ForceFailWorkflow(map[string]string{"why": "no stock"}),
			`{"nextStates":[{"stateId":"_SYS_FORCE_FAILING_WORKFLOW","stateInput":{"encoding":"json","data":"{\"why\":\"no stock\"}"}}]}`},
		{"dead end", iwf.DeadEnd(), `{"nextStates":[{"stateId":"_SYS_DEAD_END"}]}`},
		{"close if internal channel empty", iwf.ForceCompleteIfInternalChannelEmptyOrElse("ready", "drained", iwf.NextState(tw.wait, nil)),
			`{"conditionalClose":{"conditionalCloseType":"FORCE_COMPLETE_ON_INTERNAL_CHANNEL_EMPTY","channelName":"ready",
			   "closeInput":{"encoding":"json","data":"\"drained\""}},
			  "nextStates":[{"stateId":"wait"}]}`},
		{"close if signal channel empty", iwf.ForceCompleteIfSignalChannelEmptyOrElse("payment", nil, iwf.NextState(tw.wait, nil)),
			`{"conditionalClose":{"conditionalCloseType":"FORCE_COMPLETE_ON_SIGNAL_CHANNEL_EMPTY","channelName":"payment"},
			  "nextStates":[{"stateId":"wait"}]}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tw.recover.execute = func(iwf.Context, iwf.Object, iwf.CommandResults, iwf.Persistence, iwf.Communication) (*iwf.StateDecision, error) {
				return tc.decision, nil
			}
			status, body := post(t, tw.handler, iwf.ExecutePath, executeRequest("recover", ""))
			if status != http.StatusOK {
				t.Fatalf("status %d: %s", status, body)
			}
			jsonEqual(t, body, `{"stateDecision":`+tc.want+`}`)
		})
	}
}

func TestExecuteRejectsInvalidDecisions(t *testing.T) {
	tw := newTestWorkflow(t)
	cases := []struct {
		name     string
		decision *iwf.StateDecision
		detail   string
	}{
		{"nil decision", nil, "empty state decision"},
		{"unknown next state", iwf.MultiNextStates(iwf.StateMovement{StateID: "nope"}), `"nope" is not a state`},
		{"conditional close without fallback", iwf.ForceCompleteIfInternalChannelEmptyOrElse("ready", nil), "at least one orElse"},
		{"conditional close on undeclared channel", iwf.ForceCompleteIfSignalChannelEmptyOrElse("ready", nil, iwf.NextState(tw.wait, nil)), `channel "ready"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tw.recover.execute = func(iwf.Context, iwf.Object, iwf.CommandResults, iwf.Persistence, iwf.Communication) (*iwf.StateDecision, error) {
				return tc.decision, nil
			}
			status, body := post(t, tw.handler, iwf.ExecutePath, executeRequest("recover", ""))
			if status != http.StatusInternalServerError || stringField(t, body, "errorType") != iwf.WorkerErrorTypeUserCode ||
				!strings.Contains(stringField(t, body, "detail"), tc.detail) {
				t.Fatalf("got %d %s, want 500 UserCodeError mentioning %q", status, body, tc.detail)
			}
		})
	}
}

func TestStateLocalsRoundTrip(t *testing.T) {
	tw := newTestWorkflow(t)
	type started struct{ At int64 }
	tw.wait.waitUntil = func(_ iwf.Context, _ iwf.Object, p iwf.Persistence, _ iwf.Communication) (*iwf.CommandRequest, error) {
		p.SetStateLocal("started", started{At: 1700000000})
		p.SetStateLocal("note", "hello")
		return nil, nil
	}
	tw.wait.execute = func(_ iwf.Context, _ iwf.Object, _ iwf.CommandResults, p iwf.Persistence, _ iwf.Communication) (*iwf.StateDecision, error) {
		var s started
		var note string
		missing := "default"
		for key, ptr := range map[string]any{"started": &s, "note": &note, "missing": &missing} {
			if err := p.GetStateLocal(key, ptr); err != nil {
				return nil, err
			}
		}
		return iwf.GracefulCompleteWorkflow(fmt.Sprintf("%d %s %s", s.At, note, missing)), nil
	}
	status, body := post(t, tw.handler, iwf.WaitUntilPath, waitUntilRequest)
	if status != http.StatusOK {
		t.Fatalf("waitUntil: %d %s", status, body)
	}
	locals := field(t, body, "upsertStateLocals")
	// The server hands waitUntil's upsertStateLocals verbatim to execute.
	status, body = post(t, tw.handler, iwf.ExecutePath, executeRequest("wait", `,"stateLocals":`+locals+
		`,"commandResults":{"stateStartApiSucceeded":true,"stateWaitUntilFailed":false}`))
	if status != http.StatusOK {
		t.Fatalf("execute: %d %s", status, body)
	}
	jsonEqual(t, body, `{"stateDecision":{"nextStates":[{"stateId":"_SYS_GRACEFUL_COMPLETING_WORKFLOW",
	  "stateInput":{"encoding":"json","data":"\"1700000000 hello default\""}}]}}`)
}

func TestExecuteReadsCommandResultsAndPersistence(t *testing.T) {
	tw := newTestWorkflow(t)
	var got struct {
		results   iwf.CommandResults
		paid      string
		order     map[string]int
		intSA     int64
		timeSA    time.Time
		wrongType string
	}
	tw.wait.execute = func(_ iwf.Context, _ iwf.Object, r iwf.CommandResults, p iwf.Persistence, c iwf.Communication) (*iwf.StateDecision, error) {
		got.results = r
		if s, ok := r.SignalByChannel("payment"); ok {
			if err := s.Value.Get(&got.paid); err != nil {
				return nil, err
			}
		}
		if err := p.GetDataAttribute("order", &got.order); err != nil {
			return nil, err
		}
		got.intSA = p.GetSearchAttributeInt("CustomIntField")
		got.timeSA = p.GetSearchAttributeDatetime("CustomDatetimeField")
		got.wrongType = p.GetSearchAttributeKeyword("CustomIntField")
		p.SetDataAttribute("paidAt", 1700000005)
		c.PublishToInternalChannel("ready", nil)
		return iwf.SingleNextState(tw.ship, nil), nil
	}
	status, body := post(t, tw.handler, iwf.ExecutePath, executeRequest("wait", `,
	 "DataObjects":[{"key":"order","value":{"encoding":"json","data":"{\"amount\":10}"}}],
	 "searchAttributes":[{"key":"CustomIntField","valueType":"INT","integerValue":3},
	   {"key":"CustomDatetimeField","valueType":"DATETIME","stringValue":"2022-12-27T20:00:24.338155843Z"}],
	 "commandResults":{
	   "signalResults":[{"commandId":"early","signalChannelName":"payment","signalRequestStatus":"WAITING"},
	     {"commandId":"paid","signalChannelName":"payment","signalRequestStatus":"RECEIVED","signalValue":{"encoding":"json","data":"\"ok\""}}],
	   "timerResults":[{"commandId":"expire","timerStatus":"SCHEDULED"},{"commandId":"","timerStatus":"FIRED"}],
	   "interStateChannelResults":[{"commandId":"ready","channelName":"ready","requestStatus":"WAITING"}],
	   "stateStartApiSucceeded":true,"stateWaitUntilFailed":false}`))
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, body)
	}
	r := got.results
	if r.TimerStatus("expire") != iwf.TimerScheduled || r.TimerStatus("") != iwf.TimerFired || r.TimerStatus("nope") != "" {
		t.Errorf("timer results: %+v", r.Timers)
	}
	if s, ok := r.SignalByCommandID("early"); !ok || s.Received() || !s.Value.IsNull() {
		t.Errorf("SignalByCommandID(early) = %+v, %v", s, ok)
	}
	if m, ok := r.InternalMessageByChannel("ready"); !ok || m.Status != iwf.ChannelWaiting || m.CommandID != "ready" {
		t.Errorf("InternalMessageByChannel(ready) = %+v, %v", m, ok)
	}
	if _, ok := r.InternalMessageByCommandID("nope"); ok {
		t.Error("InternalMessageByCommandID(nope) found something")
	}
	if r.WaitUntilFailed {
		t.Error("WaitUntilFailed set")
	}
	want := time.Date(2022, 12, 27, 20, 0, 24, 338155843, time.UTC)
	if got.paid != "ok" || got.order["amount"] != 10 || got.intSA != 3 || !got.timeSA.Equal(want) || got.wrongType != "" {
		t.Errorf("read %+v", got)
	}
	jsonEqual(t, field(t, body, "upsertDataObjects"), `[{"key":"paidAt","value":{"encoding":"json","data":"1700000005"}}]`)
	jsonEqual(t, field(t, body, "publishToInterStateChannel"), `[{"channelName":"ready"}]`)
}

func TestExecuteWithoutCommandResults(t *testing.T) {
	tw := newTestWorkflow(t)
	var results iwf.CommandResults
	var input iwf.Object
	tw.ship.execute = func(_ iwf.Context, in iwf.Object, r iwf.CommandResults, _ iwf.Persistence, _ iwf.Communication) (*iwf.StateDecision, error) {
		results, input = r, in
		return iwf.DeadEnd(), nil
	}
	status, body := post(t, tw.handler, iwf.ExecutePath, executeRequest("ship", ""))
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, body)
	}
	if len(results.Timers)+len(results.Signals)+len(results.InternalChannels) != 0 || !input.IsNull() {
		t.Errorf("skip-waitUntil state got results %+v, input %+v", results, input)
	}
}

func TestRPC(t *testing.T) {
	tw := newTestWorkflow(t)
	var sizes [3]int
	tw.wf.RPCs["pay"] = func(ctx iwf.Context, in iwf.Object, p iwf.Persistence, c iwf.Communication) (any, error) {
		amount, err := iwf.As[int](in)
		if err != nil {
			return nil, err
		}
		var stock int
		if err := p.GetDataAttribute("stock", &stock); err != nil {
			return nil, err
		}
		sizes = [3]int{c.SignalChannelSize("payment"), c.InternalChannelSize("ready"), c.InternalChannelSize("none")}
		p.SetDataAttribute("stock", stock-amount)
		p.SetSearchAttributeKeyword("CustomKeywordField", "paid")
		c.PublishToInternalChannel("ready", amount)
		c.TriggerStateMovements(iwf.NextState(tw.ship, "express"))
		return map[string]any{"workflow": ctx.WorkflowID(), "left": stock - amount}, nil
	}
	reg, err := iwf.NewRegistry(tw.wf)
	if err != nil {
		t.Fatal(err)
	}
	h := iwf.NewWorkerService(reg, &iwf.WorkerOptions{Logger: quietLogger()})
	status, body := post(t, h, iwf.RPCPath, `{
	 "context":{"workflowId":"order-42","workflowRunId":"run-1","workflowStartedTimestamp":1700000000},
	 "workflowType":"OrderWorkflow","rpcName":"pay","input":{"encoding":"json","data":"3"},
	 "dataAttributes":[{"key":"stock","value":{"encoding":"json","data":"5"}}],
	 "signalChannelInfos":{"payment":{"size":2}},"internalChannelInfos":{"ready":{"size":1}}}`)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, body)
	}
	jsonEqual(t, body, `{
	 "output":{"encoding":"json","data":"{\"left\":2,\"workflow\":\"order-42\"}"},
	 "upsertDataAttributes":[{"key":"stock","value":{"encoding":"json","data":"2"}}],
	 "upsertSearchAttributes":[{"key":"CustomKeywordField","valueType":"KEYWORD","stringValue":"paid"}],
	 "publishToInterStateChannel":[{"channelName":"ready","value":{"encoding":"json","data":"3"}}],
	 "stateDecision":{"nextStates":[{"stateId":"ship","stateInput":{"encoding":"json","data":"\"express\""},
	   "stateOptions":`+field(t, mustExecuteShip(t, tw), "stateOptions")+`}]}}`)
	if sizes != [3]int{2, 1, 0} {
		t.Errorf("channel sizes %v", sizes)
	}

	// An RPC without output answers without the field.
	tw.wf.RPCs["noop"] = func(iwf.Context, iwf.Object, iwf.Persistence, iwf.Communication) (any, error) { return nil, nil }
	reg, _ = iwf.NewRegistry(tw.wf)
	h = iwf.NewWorkerService(reg, &iwf.WorkerOptions{Logger: quietLogger()})
	status, body = post(t, h, iwf.RPCPath, `{"context":{"workflowId":"w","workflowRunId":"r","workflowStartedTimestamp":1},
	  "workflowType":"OrderWorkflow","rpcName":"noop"}`)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, body)
	}
	jsonEqual(t, body, `{}`)
}

// mustExecuteShip returns the movement to "ship" a state decision encodes,
// so that the RPC test compares against the same options.
func mustExecuteShip(t *testing.T, tw *testWorkflow) string {
	t.Helper()
	tw.recover.execute = func(iwf.Context, iwf.Object, iwf.CommandResults, iwf.Persistence, iwf.Communication) (*iwf.StateDecision, error) {
		return iwf.SingleNextState(tw.ship, nil), nil
	}
	_, body := post(t, tw.handler, iwf.ExecutePath, executeRequest("recover", ""))
	moves := field(t, field(t, body, "stateDecision"), "nextStates")
	return strings.TrimSuffix(strings.TrimPrefix(moves, "["), "]")
}

func TestWorkerErrors(t *testing.T) {
	tw := newTestWorkflow(t)
	tw.wf.RPCs["boom"] = func(iwf.Context, iwf.Object, iwf.Persistence, iwf.Communication) (any, error) {
		return nil, fmt.Errorf("charging card: %w", &iwf.WorkerError{StatusCode: 501, ErrorType: "test-error-type", Detail: "card declined"})
	}
	tw.wf.RPCs["fail"] = func(iwf.Context, iwf.Object, iwf.Persistence, iwf.Communication) (any, error) {
		return nil, errors.New("plain failure")
	}
	tw.wf.RPCs["panic"] = func(iwf.Context, iwf.Object, iwf.Persistence, iwf.Communication) (any, error) {
		panic("kaboom")
	}
	tw.wf.RPCs["undeclared"] = func(_ iwf.Context, _ iwf.Object, p iwf.Persistence, _ iwf.Communication) (any, error) {
		p.SetDataAttribute("secret", 1)
		return "ignored", nil
	}
	tw.wf.RPCs["wrong-type"] = func(_ iwf.Context, _ iwf.Object, p iwf.Persistence, _ iwf.Communication) (any, error) {
		p.SetSearchAttributeText("CustomKeywordField", "x")
		return nil, nil
	}
	tw.ship.execute = func(_ iwf.Context, _ iwf.Object, _ iwf.CommandResults, _ iwf.Persistence, c iwf.Communication) (*iwf.StateDecision, error) {
		c.TriggerStateMovements(iwf.NextState(tw.wait, nil))
		return iwf.DeadEnd(), nil
	}
	reg, err := iwf.NewRegistry(tw.wf)
	if err != nil {
		t.Fatal(err)
	}
	h := iwf.NewWorkerService(reg, &iwf.WorkerOptions{Logger: quietLogger()})
	rpc := func(name string) string {
		return `{"context":{"workflowId":"w","workflowRunId":"r","workflowStartedTimestamp":1},"workflowType":"OrderWorkflow","rpcName":"` + name + `"}`
	}
	cases := []struct {
		name, path, body string
		status           int
		errorType        string
		detail           string
	}{
		{"unknown workflow type", iwf.ExecutePath, strings.Replace(executeRequest("ship", ""), "OrderWorkflow", "Nope", 1),
			404, iwf.WorkerErrorTypeUnknownWorkflowType, `workflow type "Nope"`},
		{"unknown state", iwf.ExecutePath, executeRequest("nope", ""), 404, iwf.WorkerErrorTypeUnknownState, `no state "nope"`},
		{"waitUntil of a state without one", iwf.WaitUntilPath, strings.Replace(waitUntilRequest, `"workflowStateId":"wait"`, `"workflowStateId":"ship"`, 1),
			404, iwf.WorkerErrorTypeUnknownState, "has no WaitUntil"},
		{"unknown RPC", iwf.RPCPath, rpc("nope"), 404, iwf.WorkerErrorTypeUnknownRPC, `no RPC "nope"`},
		{"undecodable body", iwf.RPCPath, `{"context":`, 400, iwf.WorkerErrorTypeInvalidRequest, "invalid request body"},
		{"worker error", iwf.RPCPath, rpc("boom"), 501, "test-error-type", "charging card: card declined"},
		{"plain error", iwf.RPCPath, rpc("fail"), 500, iwf.WorkerErrorTypeUserCode, "plain failure"},
		{"panic", iwf.RPCPath, rpc("panic"), 500, iwf.WorkerErrorTypePanic, "kaboom"},
		{"undeclared data attribute", iwf.RPCPath, rpc("undeclared"), 500, iwf.WorkerErrorTypeUserCode, `data attribute "secret" is not declared`},
		{"search attribute of the wrong type", iwf.RPCPath, rpc("wrong-type"), 500, iwf.WorkerErrorTypeUserCode, "declared KEYWORD, not TEXT"},
		{"state movements from a state", iwf.ExecutePath, executeRequest("ship", ""), 500, iwf.WorkerErrorTypeUserCode, "only for RPCs"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, body := post(t, h, tc.path, tc.body)
			if status != tc.status {
				t.Fatalf("status %d, want %d: %s", status, tc.status, body)
			}
			if got := stringField(t, body, "errorType"); got != tc.errorType {
				t.Errorf("errorType %q, want %q", got, tc.errorType)
			}
			if got := stringField(t, body, "detail"); !strings.Contains(got, tc.detail) {
				t.Errorf("detail %q does not contain %q", got, tc.detail)
			}
		})
	}

	rec := httptestGet(h, iwf.RPCPath)
	if rec != http.StatusMethodNotAllowed {
		t.Errorf("GET answered %d, want 405", rec)
	}
	if rec := httptestGet(h, "/other"); rec != http.StatusNotFound {
		t.Errorf("unknown path answered %d, want 404", rec)
	}
}

func TestNewRegistryValidates(t *testing.T) {
	ok := &state{id: "a"}
	cases := []struct {
		name string
		wfs  []*iwf.Workflow
		want string
	}{
		{"nil workflow", []*iwf.Workflow{nil}, "nil workflow"},
		{"no type", []*iwf.Workflow{{StartState: ok}}, "no Type"},
		{"duplicate type", []*iwf.Workflow{{Type: "W"}, {Type: "W"}}, "registered twice"},
		{"duplicate state id", []*iwf.Workflow{{Type: "W", States: []iwf.WorkflowState{ok, &state{id: "a"}}}}, `two states with id "a"`},
		{"empty state id", []*iwf.Workflow{{Type: "W", States: []iwf.WorkflowState{&state{}}}}, "empty ID"},
		{"reserved state id", []*iwf.Workflow{{Type: "W", States: []iwf.WorkflowState{&state{id: "_SYS_X"}}}}, "reserved prefix"},
		{"unknown proceed state", []*iwf.Workflow{{Type: "W", States: []iwf.WorkflowState{&state{id: "b", options: &iwf.StateOptions{
			ExecuteFailurePolicy: iwf.ProceedToConfiguredState, ExecuteFailureProceedStateID: "zz"}}}}}, `unknown state "zz"`},
		{"bad search attribute type", []*iwf.Workflow{{Type: "W", SearchAttributes: []iwf.SearchAttributeDef{{Key: "k", Type: "STRING"}}}}, "invalid search attribute"},
		{"nil RPC", []*iwf.Workflow{{Type: "W", RPCs: map[string]iwf.RPC{"r": nil}}}, `RPC "r"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := iwf.NewRegistry(tc.wfs...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one mentioning %q", err, tc.want)
			}
		})
	}
	reg, err := iwf.NewRegistry(&iwf.Workflow{Type: "B", StartState: ok, States: []iwf.WorkflowState{ok}}, &iwf.Workflow{Type: "A"})
	if err != nil {
		t.Fatal(err)
	}
	if got := reg.WorkflowTypes(); len(got) != 2 || got[0] != "A" || got[1] != "B" {
		t.Errorf("WorkflowTypes() = %v", got)
	}
}

// A cycle of proceed-on-failure states encodes without recursing forever.
func TestProceedStateCycle(t *testing.T) {
	a := &state{id: "a", options: &iwf.StateOptions{ExecuteFailurePolicy: iwf.ProceedToConfiguredState, ExecuteFailureProceedStateID: "b"}}
	b := &state{id: "b", options: &iwf.StateOptions{ExecuteFailurePolicy: iwf.ProceedToConfiguredState, ExecuteFailureProceedStateID: "a"}}
	b.execute = func(iwf.Context, iwf.Object, iwf.CommandResults, iwf.Persistence, iwf.Communication) (*iwf.StateDecision, error) {
		return iwf.SingleNextState(a, nil), nil
	}
	reg, err := iwf.NewRegistry(&iwf.Workflow{Type: "W", States: []iwf.WorkflowState{a, b}})
	if err != nil {
		t.Fatal(err)
	}
	h := iwf.NewWorkerService(reg, &iwf.WorkerOptions{Logger: quietLogger()})
	status, body := post(t, h, iwf.ExecutePath, `{"context":{"workflowId":"w","workflowRunId":"r","workflowStartedTimestamp":1},"workflowType":"W","workflowStateId":"b"}`)
	if status != 200 {
		t.Fatalf("status %d: %s", status, body)
	}
	jsonEqual(t, body, `{"stateDecision":{"nextStates":[{"stateId":"a","stateOptions":{"skipWaitUntil":true,
	  "executeApiFailurePolicy":"PROCEED_TO_CONFIGURED_STATE","executeApiFailureProceedStateId":"b",
	  "executeApiFailureProceedStateOptions":{"skipWaitUntil":true,
	    "executeApiFailurePolicy":"PROCEED_TO_CONFIGURED_STATE","executeApiFailureProceedStateId":"a"}}}]}}`)
}

func httptestGet(h http.Handler, path string) int {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec.Code
}

// NonRetryable and RetryAfter become the Iwf-Non-Retryable and Retry-After
// headers of the failed answer, however they are nested.
func TestWorkerRetryHints(t *testing.T) {
	tw := newTestWorkflow(t)
	errs := map[string]error{
		"plain":         errors.New("plain"),
		"non-retryable": iwf.NonRetryable(&iwf.WorkerError{StatusCode: 422, Detail: "bad order"}),
		"retry-after":   fmt.Errorf("rate limited: %w", iwf.RetryAfter(90*time.Second+time.Millisecond, errors.New("429 from the bank"))),
		"both":          iwf.RetryAfter(time.Minute, iwf.NonRetryable(errors.New("both"))),
	}
	for name, err := range errs {
		tw.wf.RPCs[name] = func(iwf.Context, iwf.Object, iwf.Persistence, iwf.Communication) (any, error) { return nil, err }
	}
	reg, err := iwf.NewRegistry(tw.wf)
	if err != nil {
		t.Fatal(err)
	}
	h := iwf.NewWorkerService(reg, &iwf.WorkerOptions{Logger: quietLogger()})
	for _, tc := range []struct {
		name, nonRetryable, retryAfter string
		status                         int
	}{
		{"plain", "", "", 500},
		{"non-retryable", "true", "", 422},
		{"retry-after", "", "91", 500},
		{"both", "true", "60", 500},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := `{"context":{"workflowId":"w","workflowRunId":"r","workflowStartedTimestamp":1},"workflowType":"OrderWorkflow","rpcName":"` + tc.name + `"}`
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, iwf.RPCPath, strings.NewReader(body)))
			if rec.Code != tc.status || rec.Header().Get(iwf.NonRetryableHeader) != tc.nonRetryable || rec.Header().Get(iwf.RetryAfterHeader) != tc.retryAfter {
				t.Fatalf("status %d, headers %v", rec.Code, rec.Header())
			}
		})
	}
	if iwf.NonRetryable(nil) != nil || iwf.RetryAfter(time.Second, nil) != nil {
		t.Fatal("a nil error must stay nil")
	}
	var we *iwf.WorkerError
	if !errors.As(errs["non-retryable"], &we) || errs["non-retryable"].Error() != "bad order" {
		t.Fatal("NonRetryable must keep the wrapped error visible")
	}
}
