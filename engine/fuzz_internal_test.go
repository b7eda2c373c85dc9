package engine

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine/internal/record"
	"github.com/iwf-server/iwf-server/search"
)

// Seeds of FuzzWorkerAnswer: waitUntil answers (kind 0) and execute
// answers (kind 1) as SDKs send them, and a few the engine must refuse.
var (
	waitUntilSeeds = []string{
		`{}`,
		`{"commandRequest":{"commandWaitingType":"ALL_COMPLETED","timerCommands":[{"commandId":"t","durationSeconds":10}]}}`,
		`{"commandRequest":{"deciderTriggerType":"ANY_COMMAND_COMPLETED","signalCommands":[{"commandId":"s","signalChannelName":"sig"}],"interStateChannelCommands":[{"commandId":"c","channelName":"ch","atLeast":1,"atMost":2}]}}`,
		`{"commandRequest":{"commandWaitingType":"ANY_COMBINATION_COMPLETED","commandCombinations":[{"commandIds":["t","s"]},{"commandIds":["c"]}],"timerCommands":[{"commandId":"t","firingUnixTimestampSeconds":1717243200}],"signalCommands":[{"commandId":"s","signalChannelName":"sig"}],"interStateChannelCommands":[{"commandId":"c","channelName":"ch"}]}}`,
		`{"commandRequest":{"commandWaitingType":"ANY_COMBINATION_COMPLETED","timerCommands":[{"durationSeconds":1}]}}`,
		`{"commandRequest":{"timerCommands":[{"commandId":"t","durationSeconds":-1}]}}`,
		`{"commandRequest":{"commandWaitingType":"ALL_COMPLETED","timerCommands":[{"commandId":"t","durationSeconds":9223372036854775807}]}}`,
		`{"upsertStateLocals":[{"key":"l","value":{"encoding":"json","data":"1"}}],"upsertDataObjects":[{"key":"k","value":{"data":"v"}}],"upsertSearchAttributes":[{"key":"CustomIntField","valueType":"INT","integerValue":5},{"key":"CustomDatetimeField","valueType":"DATETIME","stringValue":"2024-01-02T03:04:05+08:00"},{"key":"Tags","valueType":"KEYWORD_ARRAY","stringArrayValue":["a"]}],"publishToInterStateChannel":[{"channelName":"ch","value":{"data":"x"}}],"recordEvents":[{"key":"e"}],"localActivityInput":"x"}`,
		`{"upsertSearchAttributes":[{"key":"IwfWorkflowType","valueType":"KEYWORD","stringValue":"x"}]}`,
		`{"upsertDataObjects":[{"value":{"data":"no key"}}]}`,
	}
	executeSeeds = []string{
		`{"stateDecision":{"nextStates":[{"stateId":"S2","stateInput":{"encoding":"json","data":"2"}}]}}`,
		`{"stateDecision":{"nextStates":[{"stateId":"_SYS_GRACEFUL_COMPLETING_WORKFLOW","stateInput":{"data":"out"}}]}}`,
		`{"stateDecision":{"nextStates":[{"stateId":"S2","waitForKey":"k","stateOptions":{"skipWaitUntil":true,"executeApiRetryPolicy":{"maximumAttempts":2,"backoffCoefficient":2},"executeApiFailurePolicy":"PROCEED_TO_CONFIGURED_STATE","executeApiFailureProceedStateId":"S3","executeApiFailureProceedStateOptions":{"startApiTimeoutSeconds":3},"dataAttributesLoadingPolicy":{"persistenceLoadingType":"LOAD_PARTIAL_WITH_EXCLUSIVE_LOCK","partialLoadingKeys":["a"],"lockingKeys":["a"],"useKeyAsPrefix":true}}},{"stateId":"S3"}]}}`,
		`{"stateDecision":{"conditionalClose":{"conditionalCloseType":"FORCE_COMPLETE_ON_INTERNAL_CHANNEL_EMPTY","channelName":"ch","closeInput":{"data":"bye"}},"nextStates":[{"stateId":"S1"}]},"upsertDataObjects":[{"key":"k"}],"publishToInterStateChannel":[{"channelName":"ch"}]}`,
		`{"stateDecision":{}}`,
		`{}`,
	}
)

// fuzzNow is the clock reading of FuzzWorkerAnswer.
var fuzzNow = time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC)

// FuzzWorkerAnswer decodes arbitrary JSON as a worker's waitUntil answer
// (kind even) or execute answer (kind odd) and runs the checks and
// conversions the engine applies to it before and inside its transaction.
// Invariants: no panic; an accepted command request has timers that fire
// at or after now and within the supported range, and its waiting
// condition holds once every command completes (ALL / ANY); every part of
// an answer converts to its record and back without loss (the record's
// JSON equals the wire JSON, and the stored form decodes to an equal
// record); accepted attribute upserts read back as written.
func FuzzWorkerAnswer(f *testing.F) {
	for _, s := range waitUntilSeeds {
		f.Add(uint8(0), []byte(s))
	}
	for _, s := range executeSeeds {
		f.Add(uint8(1), []byte(s))
	}
	plain := &Engine{}
	declared := &Engine{cfg: Config{SearchAttributeTypes: map[string]search.ValueType{
		"CustomIntField": search.Int, "CustomDatetimeField": search.Datetime, "Tags": search.KeywordArray, "K": search.Keyword,
	}}}
	f.Fuzz(func(t *testing.T, kind uint8, data []byte) {
		var (
			sas  *[]iwfapi.SearchAttribute
			das  *[]iwfapi.KeyValue
			pubs *[]iwfapi.InterStateChannelPublishing
		)
		if kind%2 == 0 {
			var resp iwfapi.WorkflowStateStartResponse
			if json.Unmarshal(data, &resp) != nil {
				return
			}
			checkWaitUntilAnswer(t, &resp)
			sas, das, pubs = resp.UpsertSearchAttributes, resp.UpsertDataObjects, resp.PublishToInterStateChannel
		} else {
			var resp iwfapi.WorkflowStateDecideResponse
			if json.Unmarshal(data, &resp) != nil {
				return
			}
			checkExecuteAnswer(t, &resp)
			sas, das, pubs = resp.UpsertSearchAttributes, resp.UpsertDataObjects, resp.PublishToInterStateChannel
		}
		u := upsertsIn(sas, das, pubs)
		sameAsWire(t, "upsertSearchAttributes", sas, &u.searchAttrs)
		sameAsWire(t, "upsertDataObjects", das, &u.dataAttrs)
		sameAsWire(t, "publishToInterStateChannel", pubs, &u.publishes)
		for _, e := range []*Engine{plain, declared} {
			checkSearchUpserts(t, e, u.searchAttrs)
		}
		if attrs, err := toStoreDataAttributes(u.dataAttrs); err == nil {
			if das != nil {
				back := fromStoreDataAttributes(attrs)
				sameAsWire(t, "data attributes read back", &back, das)
			}
		} else {
			checkDomainError(t, err)
		}
	})
}

// checkWaitUntilAnswer runs the checks of callWaitUntil and the
// conversions of applyWaitUntil.
func checkWaitUntilAnswer(t *testing.T, resp *iwfapi.WorkflowStateStartResponse) {
	t.Helper()
	commands := mapPtr(resp.CommandRequest, commandsIn)
	sameAsWire(t, "commandRequest", resp.CommandRequest, commands)
	locals := mapSlice(resp.UpsertStateLocals, kvIn)
	sameAsWire(t, "upsertStateLocals", resp.UpsertStateLocals, locals)

	req := flatCommands(commands)
	err := req.Validate()
	if err == nil {
		err = checkTimers(commands)
	}
	if err != nil {
		if msg := err.Error(); msg == "" {
			t.Fatal("empty validation error")
		}
		return
	}
	n := len(req.Commands)
	nowMs := fuzzNow.UnixMilli()
	if commands != nil {
		for i, tc := range slice(commands.TimerCommands) {
			at := timerFireAt(tc, fuzzNow)
			if tc.DurationSeconds != nil && at < nowMs {
				t.Fatalf("timer %d of %s fires at %d, before now %d", i, encode(commands), at, nowMs)
			}
			if at < 0 || at > maxTimerFiringSeconds*1000+maxTimerDurationSeconds*1000+nowMs {
				t.Fatalf("timer %d of %s fires at %d, out of range", i, encode(commands), at)
			}
		}
	}
	all := make([]bool, n)
	for i := range all {
		all[i] = true
	}
	switch req.WaitingType {
	case "ALL_COMPLETED", "ANY_COMPLETED":
		if !req.Satisfied(all) {
			t.Fatalf("%s is not satisfied when every command completed", encode(commands))
		}
	}
	if n > 0 && req.WaitingType != "ANY_COMBINATION_COMPLETED" && req.Satisfied(make([]bool, n)) {
		t.Fatalf("%s is satisfied before any command completed", encode(commands))
	}
	// The stored form: an execution record carrying the answer.
	xd := record.Execution{V: record.FormatVersion, Commands: commands, StateLocals: locals,
		Done: make([]bool, n), Values: make([]*record.Value, n), FireAt: make([]int64, n)}
	back, err := record.DecodeExecution(encode(xd))
	if err != nil {
		t.Fatalf("stored execution %s does not decode: %v", encode(xd), err)
	}
	if !reflect.DeepEqual(back.Commands, commands) || !reflect.DeepEqual(back.StateLocals, locals) {
		t.Fatalf("stored execution %s decodes to a different answer", encode(xd))
	}
	if results := commandResults(back); results != nil {
		_ = resultsOut(*results)
	}
}

// checkExecuteAnswer runs the check of callExecute and the conversions of
// applyExecute and startStates.
func checkExecuteAnswer(t *testing.T, resp *iwfapi.WorkflowStateDecideResponse) {
	t.Helper()
	decision := decisionIn(deref(resp.StateDecision))
	if resp.StateDecision != nil {
		sameAsWire(t, "stateDecision", resp.StateDecision, &decision)
	}
	var d record.Decision
	if err := json.Unmarshal(encode(decision), &d); err != nil || !reflect.DeepEqual(d, decision) {
		t.Fatalf("decision %s does not decode to itself: %v", encode(decision), err)
	}
	for _, m := range slice(decision.NextStates) {
		xd := record.Execution{V: record.FormatVersion, Input: m.StateInput, Options: m.StateOptions, WaitForKey: deref(m.WaitForKey)}
		back, err := record.DecodeExecution(encode(xd))
		if err != nil || !reflect.DeepEqual(*back, xd) {
			t.Fatalf("execution %s does not decode to itself: %v", encode(xd), err)
		}
		_ = skipsWaitUntil(back.Options)
		for _, waitUntil := range []bool{true, false} {
			if d := apiTimeout(back.Options, waitUntil); d <= 0 {
				t.Fatalf("options %s give a non-positive API timeout %s", encode(back.Options), d)
			}
			_ = lockKeys(loadingPolicies(back.Options, waitUntil))
		}
	}
}

// checkSearchUpserts converts accepted search attribute upserts to their
// stored form and reads them back: the value is the one written (DATETIME
// in its canonical form).
func checkSearchUpserts(t *testing.T, e *Engine, sas []record.SearchAttribute) {
	t.Helper()
	attrs, err := e.toStoreSearchAttributes(sas, fuzzNow)
	if err != nil {
		checkDomainError(t, err)
		return
	}
	for i, a := range attrs {
		got := readSearchAttribute(a)
		want := searchAttributeOut(sas[i])
		if a.ValueType == search.Datetime {
			want.StringValue = got.StringValue
		}
		sameAsWire(t, "search attribute read back", &got, &want)
	}
}

// checkDomainError checks that err is an invalid-argument error with a
// one-line message.
func checkDomainError(t *testing.T, err error) {
	t.Helper()
	if CodeOf(err) != CodeInvalidArgument {
		t.Fatalf("error %v has code %s, want %s", err, CodeOf(err), CodeInvalidArgument)
	}
	if msg := err.Error(); msg == "" || strings.ContainsAny(msg, "\r\n") {
		t.Fatalf("error message %q is empty or not one line", msg)
	}
}

// sameAsWire fails when wire and rec encode to different JSON values: the
// record lost or changed a field of the wire value.
func sameAsWire(t *testing.T, what string, wire, rec any) {
	t.Helper()
	var a, b any
	wb, _ := json.Marshal(wire)
	rb, _ := json.Marshal(rec)
	if reflect.ValueOf(rec).IsNil() && string(wb) == "null" {
		return
	}
	_ = json.Unmarshal(wb, &a)
	_ = json.Unmarshal(rb, &b)
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("%s: the record differs from the wire value:\nwire   %s\nrecord %s", what, wb, rb)
	}
}
