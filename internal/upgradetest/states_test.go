package upgradetest

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
)

// The user code of the scenario: what the worker answers for each state
// and RPC. State ids are unique across the scenario's workflows; every
// workflow has the type workflowType.

const workflowType = "UpgradeV1"

// Firing times of timer commands: farFuture only ends by a skip, longAgo is
// due at once. Neither depends on when the data is written.
var (
	farFuture = time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	longAgo   = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
)

// napSeconds is the duration of the nap timer: pending when the generator
// stops the engine, due when the upgrade tests start theirs (upgradeDelay
// later at least).
const napSeconds = 60

// Attempts that fail on purpose while the data is written: these states
// are left waiting for their next attempt, which the upgrade test sees.
const failedAttempts = 3

// retrySlowly is the retry policy of the states that fail while the data
// is written: attempts at 0 s, 1 s and 5 s, the next one 16 s later, long
// after the generator has stopped the engine.
var retrySlowly = &iwfapi.RetryPolicy{
	InitialIntervalSeconds: ptr(int32(1)),
	BackoffCoefficient:     ptr(float32(4)),
	MaximumIntervalSeconds: ptr(int32(100)),
	MaximumAttempts:        ptr(int32(10)),
}

func (w *worker) waitUntil(req *iwfapi.WorkflowStateStartRequest) (*iwfapi.WorkflowStateStartResponse, int) {
	switch req.WorkflowStateId {
	case "flaky":
		return nil, http.StatusInternalServerError
	case "stubborn":
		if w.generating {
			return nil, http.StatusInternalServerError
		}
		return &iwfapi.WorkflowStateStartResponse{}, http.StatusOK
	case "park":
		return waitFor(iwfapi.CommandWaitingTypeAllCompleted, signalCmd("never")), http.StatusOK
	case "await-go":
		return waitFor(iwfapi.CommandWaitingTypeAllCompleted, signalCmd("go")), http.StatusOK
	case "wait":
		return waitFor(iwfapi.CommandWaitingTypeAllCompleted, signalCmd("approve")), http.StatusOK
	case "drain":
		return waitFor(iwfapi.CommandWaitingTypeAllCompleted, signalCmd("note")), http.StatusOK
	case "linger":
		return waitFor(iwfapi.CommandWaitingTypeAllCompleted, signalCmd("finish")), http.StatusOK
	case "recv":
		return waitFor(iwfapi.CommandWaitingTypeAllCompleted, &iwfapi.CommandRequest{
			InterStateChannelCommands: &[]iwfapi.InterStateChannelCommand{{CommandId: ptr("box"), ChannelName: "box"}},
		}), http.StatusOK
	case "sleep":
		return waitFor(iwfapi.CommandWaitingTypeAllCompleted, timerCmds(
			iwfapi.TimerCommand{CommandId: ptr("far"), FiringUnixTimestampSeconds: ptr(farFuture)},
			iwfapi.TimerCommand{CommandId: ptr("past"), FiringUnixTimestampSeconds: ptr(longAgo)},
		)), http.StatusOK
	case "nap":
		return waitFor(iwfapi.CommandWaitingTypeAllCompleted, timerCmds(
			iwfapi.TimerCommand{CommandId: ptr("nap"), DurationSeconds: ptr(int64(napSeconds))},
		)), http.StatusOK
	case "combo":
		cr := &iwfapi.CommandRequest{
			SignalCommands: &[]iwfapi.SignalCommand{{CommandId: ptr("c1"), SignalChannelName: "x"}, {CommandId: ptr("c2"), SignalChannelName: "y"}},
			TimerCommands:  &[]iwfapi.TimerCommand{{CommandId: ptr("t1"), FiringUnixTimestampSeconds: ptr(farFuture)}},
			CommandCombinations: &[]iwfapi.CommandCombination{
				{CommandIds: &[]string{"c1", "c2"}}, {CommandIds: &[]string{"t1"}},
			},
		}
		return waitFor(iwfapi.CommandWaitingTypeAnyCombinationCompleted, cr), http.StatusOK
	case "hold":
		resp := waitFor(iwfapi.CommandWaitingTypeAllCompleted, signalCmd("release"))
		resp.UpsertStateLocals = kvs("note", "local-1")
		return resp, http.StatusOK
	}
	return nil, http.StatusNotImplemented
}

func (w *worker) execute(req *iwfapi.WorkflowStateDecideRequest) (*iwfapi.WorkflowStateDecideResponse, int) {
	in := str(req.StateInput)
	results := deref(req.CommandResults)
	switch req.WorkflowStateId {
	case "fork":
		return moveTo(move("par-a", "a", skipWaitUntil()), move("par-b", "b", skipWaitUntil())), http.StatusOK
	case "par-a", "par-b":
		resp := complete("out-" + in)
		resp.UpsertDataObjects = kvs("result-"+in, "done-"+in)
		return resp, http.StatusOK
	case "boom":
		return decideTo(iwfapi.StateMovement{StateId: "_SYS_FORCE_FAILING_WORKFLOW", StateInput: obj("boom-reason")}), http.StatusOK
	case "park":
		return complete("park:" + signalValue(results, "never")), http.StatusOK
	case "intro":
		return moveTo(move("await-go", in, nil)), http.StatusOK
	case "await-go":
		if v := signalValue(results, "go"); v != "fail" {
			return complete(v), http.StatusOK
		}
		return decideTo(iwfapi.StateMovement{StateId: "_SYS_FORCE_FAILING_WORKFLOW", StateInput: obj("failed:" + in)}), http.StatusOK
	case "wait":
		if v := signalValue(results, "approve"); v != "again" {
			return moveTo(move("drain", v, nil)), http.StatusOK
		}
		return moveTo(move("wait", "", nil)), http.StatusOK
	case "drain":
		return complete(in + "+" + signalValue(results, "note")), http.StatusOK
	case "recv":
		return complete(str(deref(results.InterStateChannelResults)[0].Value)), http.StatusOK
	case "sleep", "combo", "nap":
		return complete(commandSummary(results)), http.StatusOK
	case "stubborn":
		return complete("stubborn-done"), http.StatusOK
	case "obstinate":
		if w.generating {
			return nil, http.StatusInternalServerError
		}
		return complete("obstinate-done"), http.StatusOK
	case "setup":
		hold := move("hold", "held", holdOptions())
		hold.WaitForKey = ptr("hold-key")
		resp := moveTo(hold)
		resp.UpsertSearchAttributes = &setupSearchAttributes
		resp.UpsertDataObjects = kvs("profile", "gold-member")
		return resp, http.StatusOK
	case "hold":
		resp := complete("released:" + keyValues(deref(req.StateLocals))["note"] + ":" + signalValue(results, "release"))
		resp.UpsertSearchAttributes = &[]iwfapi.SearchAttribute{keyword("Stage", "done")}
		return resp, http.StatusOK
	case "late":
		return complete("late-done"), http.StatusOK
	case "split":
		return moveTo(move("done-first", "", skipWaitUntil()), move("linger", "", nil)), http.StatusOK
	case "done-first":
		return complete("first-out"), http.StatusOK
	case "linger":
		return decideTo(iwfapi.StateMovement{StateId: "_SYS_DEAD_END"}), http.StatusOK
	}
	return nil, http.StatusNotImplemented
}

func (w *worker) rpc(req *iwfapi.WorkflowWorkerRpcRequest) (*iwfapi.WorkflowWorkerRpcResponse, int) {
	switch req.RpcName {
	case "write":
		return &iwfapi.WorkflowWorkerRpcResponse{
			Output:                 obj("written"),
			UpsertDataAttributes:   kvs("rpc-da", "from-rpc-v1"),
			UpsertSearchAttributes: &[]iwfapi.SearchAttribute{keyword("RpcTag", "rpc-v1")},
		}, http.StatusOK
	case "publish":
		return &iwfapi.WorkflowWorkerRpcResponse{
			Output:                     obj("published"),
			UpsertDataAttributes:       kvs("rpc-da", "published"),
			PublishToInterStateChannel: &[]iwfapi.InterStateChannelPublishing{{ChannelName: "box", Value: obj("from-rpc")}},
		}, http.StatusOK
	case "advance":
		return &iwfapi.WorkflowWorkerRpcResponse{
			Output:        obj("advanced"),
			StateDecision: &iwfapi.StateDecision{NextStates: &[]iwfapi.StateMovement{move("late", "", skipWaitUntil())}},
		}, http.StatusOK
	case "peek":
		return &iwfapi.WorkflowWorkerRpcResponse{Output: obj(channelSizes(req))}, http.StatusOK
	case "lock":
		return &iwfapi.WorkflowWorkerRpcResponse{Output: obj("locked")}, http.StatusOK
	}
	return nil, http.StatusNotImplemented
}

// setupSearchAttributes are the search attributes the setup state writes;
// the workflow starts with the KEYWORD and INT ones (startAttributes).
var setupSearchAttributes = []iwfapi.SearchAttribute{
	{Key: ptr("Notes"), ValueType: ptr(iwfapi.SearchAttributeValueTypeText), StringValue: ptr("The quick brown fox")},
	{Key: ptr("Since"), ValueType: ptr(iwfapi.SearchAttributeValueTypeDatetime), StringValue: ptr("2024-01-02T03:04:05+08:00")},
	{Key: ptr("Score"), ValueType: ptr(iwfapi.SearchAttributeValueTypeDouble), DoubleValue: ptr(1.5)},
	{Key: ptr("Vip"), ValueType: ptr(iwfapi.SearchAttributeValueTypeBool), BoolValue: ptr(true)},
	{Key: ptr("Tags"), ValueType: ptr(iwfapi.SearchAttributeValueTypeKeywordArray), StringArrayValue: &[]string{"gold", "early"}},
}

// holdOptions are the custom options of the hold state: timeouts, a retry
// policy and partial loading of data and search attributes.
func holdOptions() *iwfapi.WorkflowStateOptions {
	return &iwfapi.WorkflowStateOptions{
		WaitUntilApiTimeoutSeconds: ptr(int32(20)),
		ExecuteApiTimeoutSeconds:   ptr(int32(20)),
		WaitUntilApiRetryPolicy:    &iwfapi.RetryPolicy{InitialIntervalSeconds: ptr(int32(2)), MaximumAttempts: ptr(int32(5))},
		DataAttributesLoadingPolicy: &iwfapi.PersistenceLoadingPolicy{
			PersistenceLoadingType: ptr(iwfapi.PersistenceLoadingTypeLoadPartialWithoutLocking), PartialLoadingKeys: &[]string{"profile"},
		},
		SearchAttributesLoadingPolicy: &iwfapi.PersistenceLoadingPolicy{
			PersistenceLoadingType: ptr(iwfapi.PersistenceLoadingTypeLoadPartialWithoutLocking), PartialLoadingKeys: &[]string{"Customer", "Tags"},
		},
	}
}

// lockPolicy loads and locks the data attribute locked-key.
func lockPolicy() *iwfapi.PersistenceLoadingPolicy {
	return &iwfapi.PersistenceLoadingPolicy{
		PersistenceLoadingType: ptr(iwfapi.PersistenceLoadingTypeLoadPartialWithExclusiveLock),
		LockingKeys:            &[]string{"locked-key"},
	}
}

func skipWaitUntil() *iwfapi.WorkflowStateOptions {
	return &iwfapi.WorkflowStateOptions{SkipWaitUntil: ptr(true)}
}

func keyword(key, value string) iwfapi.SearchAttribute {
	return iwfapi.SearchAttribute{Key: ptr(key), ValueType: ptr(iwfapi.SearchAttributeValueTypeKeyword), StringValue: ptr(value)}
}

func kvs(pairs ...string) *[]iwfapi.KeyValue {
	var out []iwfapi.KeyValue
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, iwfapi.KeyValue{Key: ptr(pairs[i]), Value: obj(pairs[i+1])})
	}
	return &out
}

func signalCmd(channel string) *iwfapi.CommandRequest {
	return &iwfapi.CommandRequest{SignalCommands: &[]iwfapi.SignalCommand{{CommandId: ptr(channel), SignalChannelName: channel}}}
}

func timerCmds(timers ...iwfapi.TimerCommand) *iwfapi.CommandRequest {
	return &iwfapi.CommandRequest{TimerCommands: &timers}
}

func waitFor(wt iwfapi.CommandWaitingType, cr *iwfapi.CommandRequest) *iwfapi.WorkflowStateStartResponse {
	cr.CommandWaitingType = ptr(wt)
	return &iwfapi.WorkflowStateStartResponse{CommandRequest: cr}
}

func move(stateID, input string, opts *iwfapi.WorkflowStateOptions) iwfapi.StateMovement {
	m := iwfapi.StateMovement{StateId: stateID, StateOptions: opts}
	if input != "" {
		m.StateInput = obj(input)
	}
	return m
}

func moveTo(moves ...iwfapi.StateMovement) *iwfapi.WorkflowStateDecideResponse {
	return &iwfapi.WorkflowStateDecideResponse{StateDecision: &iwfapi.StateDecision{NextStates: &moves}}
}

// decideTo is a decision to move to one (usually reserved) state.
func decideTo(m iwfapi.StateMovement) *iwfapi.WorkflowStateDecideResponse { return moveTo(m) }

func complete(output string) *iwfapi.WorkflowStateDecideResponse {
	return decideTo(iwfapi.StateMovement{StateId: "_SYS_GRACEFUL_COMPLETING_WORKFLOW", StateInput: obj(output)})
}

// signalValue is the value a signal command (whose id is its channel)
// received.
func signalValue(r iwfapi.CommandResults, commandID string) string {
	for _, s := range deref(r.SignalResults) {
		if s.CommandId == commandID {
			return str(s.SignalValue)
		}
	}
	return "<none>"
}

// commandSummary lists every command result: "id=value" for a channel
// command that received a message, "id=STATUS" otherwise.
func commandSummary(r iwfapi.CommandResults) string {
	var parts []string
	for _, t := range deref(r.TimerResults) {
		parts = append(parts, t.CommandId+"="+string(t.TimerStatus))
	}
	for _, s := range deref(r.SignalResults) {
		v := string(s.SignalRequestStatus)
		if s.SignalRequestStatus == iwfapi.ChannelRequestStatusReceived {
			v = str(s.SignalValue)
		}
		parts = append(parts, s.CommandId+"="+v)
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

// channelSizes lists the buffered messages an RPC saw: "signal:note=1,...".
func channelSizes(req *iwfapi.WorkflowWorkerRpcRequest) string {
	var parts []string
	for name, info := range deref(req.SignalChannelInfos) {
		parts = append(parts, fmt.Sprintf("signal:%s=%d", name, deref(info.Size)))
	}
	for name, info := range deref(req.InternalChannelInfos) {
		parts = append(parts, fmt.Sprintf("internal:%s=%d", name, deref(info.Size)))
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}
