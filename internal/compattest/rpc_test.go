package compattest

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
)

// saKey is a typed search attribute key.
func saKey(key string, typ iwfapi.SearchAttributeValueType) iwfapi.SearchAttributeKeyAndType {
	return iwfapi.SearchAttributeKeyAndType{Key: ptr(key), ValueType: ptr(typ)}
}

func keywordSA(key, v string) iwfapi.SearchAttribute {
	return iwfapi.SearchAttribute{Key: ptr(key), ValueType: ptr(iwfapi.SearchAttributeValueTypeKeyword), StringValue: ptr(v)}
}

func intSA(key string, v int64) iwfapi.SearchAttribute {
	return iwfapi.SearchAttribute{Key: ptr(key), ValueType: ptr(iwfapi.SearchAttributeValueTypeInt), IntegerValue: ptr(v)}
}

func boolSA(key string, v bool) iwfapi.SearchAttribute {
	return iwfapi.SearchAttribute{Key: ptr(key), ValueType: ptr(iwfapi.SearchAttributeValueTypeBool), BoolValue: ptr(v)}
}

func kv(key string, v *iwfapi.EncodedObject) iwfapi.KeyValue {
	return iwfapi.KeyValue{Key: ptr(key), Value: v}
}

// partial is a LOAD_PARTIAL_WITHOUT_LOCKING policy.
func partial(keys ...string) *iwfapi.PersistenceLoadingPolicy {
	return &iwfapi.PersistenceLoadingPolicy{
		PersistenceLoadingType: ptr(iwfapi.PersistenceLoadingTypeLoadPartialWithoutLocking), PartialLoadingKeys: &keys,
	}
}

// TestRPC mirrors integ/rpc_test.go: a read-only RPC, a failing RPC (worker
// 502) with iWF's exact 420 body, and a mutating RPC (upserts, a publish
// that unblocks the running state, new states) next to a running state.
func TestRPC(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		const (
			channel = "test-TestInterStateChannelName"
			daKey   = "test-data-attribute"
			kwKey   = "CustomKeywordField"
			intKey  = "CustomIntField"
			boolKey = "CustomBoolField"
		)
		input, output := obj("test-input-value"), obj("test-output-value")
		daVal1, daVal2 := obj("test-data-attribute-value1"), obj("test-data-attribute-value2")
		channelValue := obj("test-interstatechannel-value")
		checkRPC := func(req iwfapi.WorkflowWorkerRpcRequest) bool {
			return req.Context.WorkflowId != "" && req.Context.WorkflowRunId != "" && req.WorkflowType == "rpc" &&
				req.Context.StateExecutionId == nil && req.Context.Attempt == nil && req.Context.FirstAttemptTimestamp == nil
		}
		e.w.rpc("test-RPC-readonly", func(req iwfapi.WorkflowWorkerRpcRequest) reply {
			if !checkRPC(req) {
				return e.w.reject("bad RPC request %s", mustJSON(req))
			}
			return ok(iwfapi.WorkflowWorkerRpcResponse{Output: output})
		})
		e.w.rpc("test-RPC-error", func(iwfapi.WorkflowWorkerRpcRequest) reply {
			return reply{status: 502, body: iwfapi.WorkerErrorResponse{Detail: ptr("test-details"), ErrorType: ptr("test-type")}}
		})
		e.w.rpc("test-RPCName", func(req iwfapi.WorkflowWorkerRpcRequest) reply {
			if !checkRPC(req) {
				return e.w.reject("bad RPC request %s", mustJSON(req))
			}
			return ok(iwfapi.WorkflowWorkerRpcResponse{
				Output:                     output,
				StateDecision:              &iwfapi.StateDecision{NextStates: list(move("S2", nil))},
				UpsertSearchAttributes:     list(keywordSA(kwKey, "keyword-value2"), intSA(intKey, 2)),
				UpsertDataAttributes:       list(kv(daKey, daVal2)),
				RecordEvents:               list(kv("test-key", obj("test-record-event-value"))),
				PublishToInterStateChannel: list(iwfapi.InterStateChannelPublishing{ChannelName: channel, Value: channelValue}),
			})
		})
		e.w.state("S1", func(iwfapi.WorkflowStateStartRequest) reply {
			return ok(iwfapi.WorkflowStateStartResponse{
				CommandRequest: &iwfapi.CommandRequest{
					InterStateChannelCommands: list(iwfapi.InterStateChannelCommand{ChannelName: channel}),
					DeciderTriggerType:        ptr(iwfapi.DeciderTriggerTypeAllCommandCompleted),
				},
				UpsertSearchAttributes: list(keywordSA(kwKey, "keyword-value1"), intSA(intKey, 1), boolSA(boolKey, false)),
				UpsertDataObjects:      list(kv(daKey, daVal1)),
			})
		}, goTo("S2"))
		e.w.state("S2", noCommands, complete)

		wfID := e.id("rpc")
		req := e.startRequest(wfID, "rpc", "S1")
		runID := e.start(req)
		e.waiting(wfID, "S1-1")
		allSAs := list(saKey(kwKey, iwfapi.SearchAttributeValueTypeKeyword), saKey(intKey, iwfapi.SearchAttributeValueTypeInt), saKey(boolKey, iwfapi.SearchAttributeValueTypeBool))
		rpcReq := func(name string) iwfapi.WorkflowRpcRequest {
			return iwfapi.WorkflowRpcRequest{
				WorkflowId: wfID, WorkflowRunId: ptr(""), RpcName: name, Input: input,
				SearchAttributesLoadingPolicy: partial(intKey),
				TimeoutSeconds:                ptr(int32(30)), UseMemoForDataAttributes: ptr(false), SearchAttributes: allSAs,
			}
		}

		readOnly := e.rpc(rpcReq("test-RPC-readonly"))
		expectError(t, "read-only RPC", readOnly, 200, `{"output":{"encoding":"json","data":"test-output-value"}}`)

		failed := e.rpc(rpcReq("test-RPC-error"))
		expectError(t, "failing RPC", failed, 420, `{"detail":"worker API error, status:502, errorType:test-type","subStatus":"WORKER_API_ERROR",
			"originalWorkerErrorStatus":502,"originalWorkerErrorType":"test-type","originalWorkerErrorDetail":"test-details"}`)

		mutating := e.rpc(rpcReq("test-RPCName"))
		expectError(t, "mutating RPC", mutating, 200, `{"output":{"encoding":"json","data":"test-output-value"}}`)

		_, body := e.result(wfID)
		jsonEqual(t, "result", body, fmt.Sprintf(`{"workflowRunId":%q,"workflowStatus":"COMPLETED"}`, runID))
		e.w.expectCounts(t, map[string]int{"S1.waitUntil": 1, "S1.execute": 1, "S2.waitUntil": 2, "S2.execute": 2,
			"test-RPC-readonly.rpc": 1, "test-RPC-error.rpc": 1, "test-RPCName.rpc": 1})

		// What each RPC handler received: the input, the partially loaded
		// search attribute, all data attributes, and channel infos as {}.
		for _, name := range []string{"test-RPC-readonly", "test-RPC-error", "test-RPCName"} {
			b := e.w.body(t, name+".rpc", 0)
			jsonEqual(t, name+" input", []byte(field(t, b, "input")), `{"encoding":"json","data":"test-input-value"}`)
			jsonEqual(t, name+" searchAttributes", []byte(field(t, b, "searchAttributes")), `[{"key":"CustomIntField","valueType":"INT","integerValue":1}]`)
			jsonEqual(t, name+" dataAttributes", []byte(field(t, b, "dataAttributes")), `[{"key":"test-data-attribute","value":{"encoding":"json","data":"test-data-attribute-value1"}}]`)
			jsonEqual(t, name+" signalChannelInfos", []byte(field(t, b, "signalChannelInfos")), `{}`)
			jsonEqual(t, name+" internalChannelInfos", []byte(field(t, b, "internalChannelInfos")), `{}`)
			jsonEqual(t, name+" context.workflowRunId", []byte(field(t, []byte(field(t, b, "context")), "workflowRunId")), strconv.Quote(runID))
		}
		jsonEqual(t, "S1 commandResults", e.executeResults("S1", 0), `{"interStateChannelResults":[{"commandId":"","channelName":"test-TestInterStateChannelName",
			"requestStatus":"RECEIVED","value":{"encoding":"json","data":"test-interstatechannel-value"}}],"stateStartApiSucceeded":true,"stateWaitUntilFailed":false}`)

		jsonEqualValue(t, "data attributes", e.dataAttributes(wfID, ""), `[{"key":"test-data-attribute","value":{"encoding":"json","data":"test-data-attribute-value2"}}]`)
		jsonEqualValue(t, "search attributes", e.searchAttributes(wfID, "", slice(allSAs)...), `[
			{"key":"CustomKeywordField","valueType":"KEYWORD","stringValue":"keyword-value2"},
			{"key":"CustomIntField","valueType":"INT","integerValue":2},
			{"key":"CustomBoolField","valueType":"BOOL","boolValue":false}]`)

		// On the closed run a read-only RPC still works, a mutating one is
		// "not exists".
		expectError(t, "read-only RPC after completion", e.rpc(rpcReq("test-RPC-readonly")), 200, `{"output":{"encoding":"json","data":"test-output-value"}}`)
		late := e.rpc(rpcReq("test-RPCName"))
		if late.StatusCode() != 400 || late.JSON400 == nil || deref(late.JSON400.SubStatus) != iwfapi.ErrorSubStatusWorkflowNotExists {
			t.Errorf("mutating RPC after completion: %d %s", late.StatusCode(), late.Body)
		}
	})
}

// TestRPCInvalidAnswers extends integ/rpc_test.go: an RPC may not close the
// workflow, and an undecodable worker error body is reported as iWF does.
func TestRPCInvalidAnswers(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		e.w.rpc("close", func(iwfapi.WorkflowWorkerRpcRequest) reply {
			return ok(iwfapi.WorkflowWorkerRpcResponse{StateDecision: &iwfapi.StateDecision{NextStates: list(move(forceComplete, nil))},
				UpsertDataAttributes: list(kv("k", obj("v")))})
		})
		e.w.rpc("garbage", func(iwfapi.WorkflowWorkerRpcRequest) reply { return reply{status: 500, body: "not json"} })
		wfID := e.id("rpc-invalid")
		e.start(e.startRequest(wfID, "rpc", ""))
		expectError(t, "closing RPC", e.rpc(iwfapi.WorkflowRpcRequest{WorkflowId: wfID, RpcName: "close"}), 420,
			`{"detail":"closing workflow in RPC is not supported yet","subStatus":"WORKER_API_ERROR",
			"originalWorkerErrorStatus":0,"originalWorkerErrorType":"","originalWorkerErrorDetail":""}`)
		if das := e.dataAttributes(wfID, ""); len(das) != 0 {
			t.Errorf("the rejected RPC answer was applied: %s", mustJSON(das))
		}
		expectError(t, "undecodable worker error", e.rpc(iwfapi.WorkflowRpcRequest{WorkflowId: wfID, RpcName: "garbage"}), 420,
			`{"detail":"unable to decode worker response body to WorkerErrorResponse: bodynot json","subStatus":"WORKER_API_ERROR",
			"originalWorkerErrorStatus":500,"originalWorkerErrorType":"","originalWorkerErrorDetail":""}`)
		if s := e.status(wfID); s != iwfapi.WorkflowStatusRunning {
			t.Errorf("status %s", s)
		}
		missing := e.rpc(iwfapi.WorkflowRpcRequest{WorkflowId: wfID + "-missing", RpcName: "close"})
		if missing.StatusCode() != 400 || missing.JSON400 == nil || deref(missing.JSON400.SubStatus) != iwfapi.ErrorSubStatusWorkflowNotExists {
			t.Errorf("RPC on a missing workflow: %d %s", missing.StatusCode(), missing.Body)
		}
	})
}

// TestCreate mirrors integ/create_test.go: a workflow started without a
// start state runs nothing until an RPC decides a first state.
func TestCreate(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		e.w.rpc("test-RPCName", func(req iwfapi.WorkflowWorkerRpcRequest) reply {
			return ok(iwfapi.WorkflowWorkerRpcResponse{Output: req.Input, StateDecision: &iwfapi.StateDecision{NextStates: list(move("S2", nil))}})
		})
		e.w.state("S2", noCommands, complete)
		wfID := e.id("create")
		req := e.startRequest(wfID, "rpc", "")
		runID := e.start(req)
		time.Sleep(200 * time.Millisecond)
		if n := len(e.w.counts()); n != 0 {
			t.Errorf("the worker was called before any state was decided: %v", e.w.counts())
		}
		dump := e.dump(wfID, runID)
		if len(dump["stateExecutionCounters"].(map[string]any)) != 0 || dump["stateExecutions"] != nil {
			t.Errorf("dump shows executions: counters %v, executions %v", dump["stateExecutionCounters"], dump["stateExecutions"])
		}
		out := e.rpcOK(iwfapi.WorkflowRpcRequest{
			WorkflowId: wfID, RpcName: "test-RPCName", Input: obj("test-input-value"),
			SearchAttributesLoadingPolicy: partial("CustomIntField"), TimeoutSeconds: ptr(int32(30)),
		})
		jsonEqualValue(t, "RPC output", out, `{"output":{"encoding":"json","data":"test-input-value"}}`)
		_, body := e.result(wfID)
		jsonEqual(t, "result", body, fmt.Sprintf(`{"workflowRunId":%q,"workflowStatus":"COMPLETED"}`, runID))
		e.w.expectCounts(t, map[string]int{"S2.waitUntil": 1, "S2.execute": 1, "test-RPCName.rpc": 1})
	})
}

// TestLocking mirrors integ/locking_test.go with shorter sleeps: ten
// parallel states and locking RPCs increment a search attribute and a data
// attribute under exclusive locks. State APIs wait for the locks, locking
// RPCs answer 450 while a key is held; no increment is lost. The RPC handler
// also checks the channel infos (four value-less signals; one internal
// message per earlier successful RPC). Finally a STATE_ID reset with
// skipUpdateReapply re-runs the states from the current attribute values.
func TestLocking(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		const (
			da1, da2         = "test-data-attribute-1", "test-data-attribute-2"
			kwKey, intKey    = "CustomKeywordField", "CustomIntField"
			unusedSignal     = "test-unused-signal-channel"
			unusedInternal   = "test-unused-internal-channel"
			internalChannel  = "test-channel"
			unblock          = "shouldUnblockStateWaiting"
			parallelS2       = 10
			numUnusedSignals = 4
			stateSleep       = 80 * time.Millisecond
		)
		value := obj("data")
		saPolicy := &iwfapi.PersistenceLoadingPolicy{
			PersistenceLoadingType: ptr(iwfapi.PersistenceLoadingTypeLoadPartialWithExclusiveLock),
			PartialLoadingKeys:     list(intKey, kwKey), LockingKeys: list(intKey),
		}
		daPolicy := &iwfapi.PersistenceLoadingPolicy{
			PersistenceLoadingType: ptr(iwfapi.PersistenceLoadingTypeLoadPartialWithExclusiveLock),
			PartialLoadingKeys:     list(da1, da2), LockingKeys: list(da1),
		}
		s2 := moveWith("S2", nil, iwfapi.WorkflowStateOptions{SearchAttributesLoadingPolicy: saPolicy, DataAttributesLoadingPolicy: daPolicy})
		intOf := func(sas []iwfapi.SearchAttribute) int64 {
			for _, sa := range sas {
				if deref(sa.Key) == intKey {
					return deref(sa.IntegerValue)
				}
			}
			return 0
		}
		counterOf := func(das []iwfapi.KeyValue) int {
			for _, d := range das {
				if deref(d.Key) == da1 && d.Value != nil {
					n, _ := strconv.Atoi(deref(d.Value.Data))
					return n
				}
			}
			return 0
		}
		var successfulRPCs atomic.Int32
		var holdReset atomic.Bool // set: StateWaiting's execute waits for resetDone
		resetDone := newGate()
		e.w.rpc("increase-counter", func(req iwfapi.WorkflowWorkerRpcRequest) reply {
			if deref(req.Input.Data) == unblock {
				return ok(iwfapi.WorkflowWorkerRpcResponse{PublishToInterStateChannel: list(iwfapi.InterStateChannelPublishing{ChannelName: internalChannel, Value: value})})
			}
			if got := deref(deref(req.SignalChannelInfos)[unusedSignal].Size); got != numUnusedSignals {
				e.w.fail("signal channel size %d, want %d", got, numUnusedSignals)
			}
			if got, want := deref(deref(req.InternalChannelInfos)[unusedInternal].Size), successfulRPCs.Load(); got != want {
				e.w.fail("internal channel size %d, want %d", got, want)
			}
			successfulRPCs.Add(1)
			return ok(iwfapi.WorkflowWorkerRpcResponse{
				Output:                 value,
				StateDecision:          &iwfapi.StateDecision{NextStates: list(s2)},
				UpsertSearchAttributes: list(keywordSA(kwKey, "rpc"), intSA(intKey, intOf(slice(req.SearchAttributes))+1)),
				UpsertDataAttributes: list(kv(da1, obj(strconv.Itoa(counterOf(slice(req.DataAttributes))+1))),
					kv(da2, obj(`"rpc"`))),
				RecordEvents:               list(kv("test-key", value)),
				PublishToInterStateChannel: list(iwfapi.InterStateChannelPublishing{ChannelName: unusedInternal, Value: value}),
			})
		})
		e.w.state("S1", noCommands, func(iwfapi.WorkflowStateDecideRequest) reply {
			moves := []iwfapi.StateMovement{move("StateWaiting", nil)}
			for i := 0; i < parallelS2; i++ {
				moves = append(moves, s2)
			}
			return decide(moves...)
		})
		e.w.state("StateWaiting", func(iwfapi.WorkflowStateStartRequest) reply {
			return commands(iwfapi.CommandRequest{
				DeciderTriggerType:        ptr(iwfapi.DeciderTriggerTypeAllCommandCompleted),
				InterStateChannelCommands: list(iwfapi.InterStateChannelCommand{ChannelName: internalChannel}),
			})
		}, func(req iwfapi.WorkflowStateDecideRequest) reply {
			if holdReset.Load() {
				e.w.await(resetDone) // the reset run stays running until the test has checked it
			}
			return complete(req)
		})
		e.w.state("S2", func(req iwfapi.WorkflowStateStartRequest) reply {
			e.w.sleep(stateSleep)
			return ok(iwfapi.WorkflowStateStartResponse{
				CommandRequest:         &iwfapi.CommandRequest{DeciderTriggerType: ptr(iwfapi.DeciderTriggerTypeAllCommandCompleted)},
				UpsertSearchAttributes: list(keywordSA(kwKey, deref(req.Context.StateExecutionId)), intSA(intKey, intOf(slice(req.SearchAttributes))+1)),
			})
		}, func(req iwfapi.WorkflowStateDecideRequest) reply {
			e.w.sleep(stateSleep)
			return ok(iwfapi.WorkflowStateDecideResponse{
				UpsertDataObjects: list(kv(da1, obj(strconv.Itoa(counterOf(slice(req.DataObjects))+1))),
					kv(da2, obj(strconv.Quote(deref(req.Context.StateExecutionId))))),
				StateDecision: &iwfapi.StateDecision{NextStates: list(move(gracefulComplete, nil))},
			})
		})

		wfID := e.id("locking")
		req := e.startRequest(wfID, "locking", "S1")
		req.WorkflowTimeoutSeconds = 300
		e.start(req)
		for i := 0; i < numUnusedSignals; i++ {
			e.signal(wfID, unusedSignal, nil)
		}
		e.waitEvent(wfID, "", "StateExecutionStarted", "S2-1")

		locked, succeeded := 0, 0
		for i := 0; i < 200 && (locked == 0 || succeeded < 2); i++ {
			resp := e.rpc(iwfapi.WorkflowRpcRequest{
				WorkflowId: wfID, RpcName: "increase-counter", Input: value,
				SearchAttributesLoadingPolicy: saPolicy, DataAttributesLoadingPolicy: daPolicy,
				TimeoutSeconds:   ptr(int32(30)),
				SearchAttributes: list(saKey(kwKey, iwfapi.SearchAttributeValueTypeKeyword), saKey(intKey, iwfapi.SearchAttributeValueTypeInt)),
			})
			switch resp.StatusCode() {
			case 450:
				locked++
				jsonEqual(t, "locked RPC", resp.Body, `{"detail":"requested data or search attributes are being locked by other operations","subStatus":"WORKER_API_ERROR"}`)
			case 200:
				succeeded++
				jsonEqual(t, "locking RPC", resp.Body, `{"output":{"encoding":"json","data":"data"}}`)
			default:
				t.Fatalf("locking RPC: %d %s", resp.StatusCode(), resp.Body)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if locked == 0 || succeeded < 2 {
			t.Fatalf("locking RPCs: %d locked, %d succeeded; want both", locked, succeeded)
		}
		t.Logf("locking RPCs: %d answered 450, %d succeeded", locked, succeeded)

		// Unblock StateWaiting with a non-locking RPC; the run completes once
		// every S2 has finished.
		e.rpcOK(iwfapi.WorkflowRpcRequest{WorkflowId: wfID, RpcName: "increase-counter", Input: obj(unblock)})
		r, body := e.result(wfID)
		jsonEqual(t, "result", body, fmt.Sprintf(`{"workflowRunId":%q,"workflowStatus":"COMPLETED"}`, r.WorkflowRunId))
		s2Runs := parallelS2 + succeeded
		e.w.expectCounts(t, map[string]int{"S1.waitUntil": 1, "S1.execute": 1, "StateWaiting.waitUntil": 1, "StateWaiting.execute": 1,
			"S2.waitUntil": s2Runs, "S2.execute": s2Runs, "increase-counter.rpc": succeeded + 1})
		final := int64(parallelS2 + 2*succeeded)
		jsonEqualValue(t, "search attribute counter", e.searchAttributes(wfID, "", saKey(intKey, iwfapi.SearchAttributeValueTypeInt)),
			fmt.Sprintf(`[{"key":"CustomIntField","valueType":"INT","integerValue":%d}]`, final))
		jsonEqualValue(t, "data attribute counter", e.dataAttributes(wfID, "", da1),
			fmt.Sprintf(`[{"key":"test-data-attribute-1","value":{"encoding":"json","data":"%d"}}]`, final))

		// Reset to StateWaiting without re-applying locking RPCs. The reset
		// run's StateWaiting execution is held (resetDone) so that the run is
		// still running when the test sends another unblock, however loaded
		// the machine: the run completes once it is released.
		holdReset.Store(true)
		newRun := e.reset(iwfapi.WorkflowResetRequest{
			WorkflowId: wfID, ResetType: iwfapi.WorkflowResetTypeStateId, StateId: ptr("StateWaiting"), SkipUpdateReapply: ptr(true),
		})
		e.eventually("the reset run's S2 executions", func() bool { return e.w.count("S2.execute") == s2Runs+parallelS2 })
		if s := e.status(wfID); s != iwfapi.WorkflowStatusRunning {
			t.Errorf("reset run status %s, want RUNNING while StateWaiting is held", s)
		}
		e.rpcOK(iwfapi.WorkflowRpcRequest{WorkflowId: wfID, RpcName: "increase-counter", Input: obj(unblock)})
		resetDone.open()
		_, body = e.result(wfID)
		jsonEqual(t, "reset run result", body, fmt.Sprintf(`{"workflowRunId":%q,"workflowStatus":"COMPLETED"}`, newRun))
		jsonEqualValue(t, "search attribute counter after reset", e.searchAttributes(wfID, "", saKey(intKey, iwfapi.SearchAttributeValueTypeInt)),
			fmt.Sprintf(`[{"key":"CustomIntField","valueType":"INT","integerValue":%d}]`, final+parallelS2))
		jsonEqualValue(t, "data attribute counter after reset", e.dataAttributes(wfID, "", da1),
			fmt.Sprintf(`[{"key":"test-data-attribute-1","value":{"encoding":"json","data":"%d"}}]`, final+parallelS2))
	})
}

// TestPersistenceLoadingPolicy mirrors integ/persistence_loading_policy_test.go:
// an RPC and the state it starts load search and data attributes with each
// loading type (plus LOAD_ALL_WITH_PARTIAL_LOCK, which iWF does not test).
func TestPersistenceLoadingPolicy(t *testing.T) {
	types := []iwfapi.PersistenceLoadingType{
		iwfapi.PersistenceLoadingTypeLoadAllWithoutLocking,
		iwfapi.PersistenceLoadingTypeLoadPartialWithoutLocking,
		iwfapi.PersistenceLoadingTypeLoadPartialWithExclusiveLock,
		iwfapi.PersistenceLoadingTypeLoadNone,
		iwfapi.PersistenceLoadingTypeLoadAllWithPartialLock,
	}
	for _, lt := range types {
		t.Run(string(lt), func(t *testing.T) {
			forEachStore(t, func(t *testing.T, e *env) {
				const kwKey, textKey = "CustomKeywordField", "CustomStringField"
				kw := keywordSA(kwKey, "test-search-attribute-1")
				text := iwfapi.SearchAttribute{Key: ptr(textKey), ValueType: ptr(iwfapi.SearchAttributeValueTypeText), StringValue: ptr("test-search-attribute-2")}
				da1, da2 := kv("da_1", obj("test-data-attribute-value1")), kv("da_2", obj("test-data-attribute-value2"))
				var wantSAs []iwfapi.SearchAttribute
				var wantDAs []iwfapi.KeyValue
				switch lt {
				case iwfapi.PersistenceLoadingTypeLoadAllWithoutLocking, iwfapi.PersistenceLoadingTypeLoadPartialWithExclusiveLock,
					iwfapi.PersistenceLoadingTypeLoadAllWithPartialLock:
					wantSAs, wantDAs = []iwfapi.SearchAttribute{kw, text}, []iwfapi.KeyValue{da1, da2}
				case iwfapi.PersistenceLoadingTypeLoadPartialWithoutLocking:
					wantSAs, wantDAs = []iwfapi.SearchAttribute{kw}, []iwfapi.KeyValue{da1}
				}
				policies := func() (sa, da *iwfapi.PersistenceLoadingPolicy) {
					return &iwfapi.PersistenceLoadingPolicy{PersistenceLoadingType: ptr(lt), PartialLoadingKeys: list(kwKey), LockingKeys: list(textKey)},
						&iwfapi.PersistenceLoadingPolicy{PersistenceLoadingType: ptr(lt), PartialLoadingKeys: list("da_1"), LockingKeys: list("da_2")}
				}
				verify := func(where string, sas []iwfapi.SearchAttribute, das []iwfapi.KeyValue) bool {
					if string(mustJSON(sas)) != string(mustJSON(wantSAs)) || string(mustJSON(das)) != string(mustJSON(wantDAs)) {
						e.w.fail("%s loaded search attributes %s and data attributes %s, want %s and %s",
							where, mustJSON(sas), mustJSON(das), mustJSON(wantSAs), mustJSON(wantDAs))
						return false
					}
					return true
				}
				toS2 := func() *iwfapi.StateDecision {
					sa, da := policies()
					return &iwfapi.StateDecision{NextStates: list(moveWith("S2", nil, iwfapi.WorkflowStateOptions{
						SearchAttributesLoadingPolicy: sa, DataAttributesLoadingPolicy: da,
					}))}
				}
				e.w.state("S1", noCommands, func(iwfapi.WorkflowStateDecideRequest) reply {
					return ok(iwfapi.WorkflowStateDecideResponse{
						StateDecision:          &iwfapi.StateDecision{NextStates: list(move(deadEnd, nil))},
						UpsertSearchAttributes: list(kw, text),
						UpsertDataObjects:      list(da1, da2),
					})
				})
				e.w.rpc("persistence_loading_policy_rpc", func(req iwfapi.WorkflowWorkerRpcRequest) reply {
					if !verify("rpc", slice(req.SearchAttributes), slice(req.DataAttributes)) {
						return reply{status: 400, body: iwfapi.WorkerErrorResponse{Detail: ptr("unexpected attributes")}}
					}
					return ok(iwfapi.WorkflowWorkerRpcResponse{StateDecision: toS2()})
				})
				e.w.state("S2", func(req iwfapi.WorkflowStateStartRequest) reply {
					verify("S2.waitUntil", slice(req.SearchAttributes), slice(req.DataObjects))
					return noCommands(req)
				}, func(req iwfapi.WorkflowStateDecideRequest) reply {
					verify("S2.execute", slice(req.SearchAttributes), slice(req.DataObjects))
					return complete(req)
				})
				wfID := e.id("persistence-loading-policy")
				req := e.startRequest(wfID, "persistence_loading_policy", "S1")
				req.WorkflowStartOptions = &iwfapi.WorkflowStartOptions{UseMemoForDataAttributes: ptr(true)}
				e.start(req)
				e.waitEvent(wfID, "", "ExecuteCompleted", "S1-1")
				sa, da := policies()
				e.rpcOK(iwfapi.WorkflowRpcRequest{
					WorkflowId: wfID, RpcName: "persistence_loading_policy_rpc", SearchAttributesLoadingPolicy: sa, DataAttributesLoadingPolicy: da,
					TimeoutSeconds: ptr(int32(30)), UseMemoForDataAttributes: ptr(true),
					SearchAttributes: list(saKey(kwKey, iwfapi.SearchAttributeValueTypeKeyword), saKey(textKey, iwfapi.SearchAttributeValueTypeText)),
				})
				r, _ := e.result(wfID)
				if r.WorkflowStatus != iwfapi.WorkflowStatusCompleted {
					t.Errorf("status %s", r.WorkflowStatus)
				}
				e.w.expectCounts(t, map[string]int{"S1.waitUntil": 1, "S1.execute": 1, "persistence_loading_policy_rpc.rpc": 1,
					"S2.waitUntil": 1, "S2.execute": 1})
			})
		})
	}
}

// TestHeaders mirrors integ/headers_test.go: a server configured with a
// worker header (engine.Config.WorkerHeaders / workerclient.New) sends it
// with waitUntil and execute; the worker rejects calls without it. This
// server also sends it with RPC calls.
func TestHeaders(t *testing.T) {
	const name, value = "integration-test-header", "integration-test-value"
	forEachStoreWith(t, serverOptions{maxWait: defaultMaxWait, header: name + ": " + value}, func(t *testing.T, e *env) {
		e.w.requireHeader(name, value)
		e.w.state("S1", noCommands, complete)
		e.w.rpc("read", func(iwfapi.WorkflowWorkerRpcRequest) reply { return ok(iwfapi.WorkflowWorkerRpcResponse{}) })
		wfID := e.id("headers")
		req := e.startRequest(wfID, "headers", "S1")
		req.StateInput = obj(`"test data"`)
		req.WorkflowStartOptions = &iwfapi.WorkflowStartOptions{WorkflowConfigOverride: &iwfapi.WorkflowConfig{DisableSystemSearchAttribute: ptr(true)}}
		e.start(req)
		r, _ := e.result(wfID)
		if r.WorkflowStatus != iwfapi.WorkflowStatusCompleted {
			t.Errorf("status %s", r.WorkflowStatus)
		}
		e.rpcOK(iwfapi.WorkflowRpcRequest{WorkflowId: wfID, RpcName: "read"})
		e.w.expectCounts(t, map[string]int{"S1.waitUntil": 1, "S1.execute": 1, "read.rpc": 1})
		for _, key := range []string{"S1.waitUntil", "S1.execute", "read.rpc"} {
			h := e.w.header(t, key, 0)
			if h.Get(name) != value || h.Get("Content-Type") != "application/json" || h.Get("Accept") != "application/json" ||
				!strings.HasPrefix(h.Get("User-Agent"), "Go-http-client/") {
				t.Errorf("%s headers: %v", key, h)
			}
		}
	})
}

// decodeOutput unmarshals the JSON data of an RPC output.
func decodeOutput(t *testing.T, out iwfapi.WorkflowRpcResponse, v any) {
	t.Helper()
	if out.Output == nil {
		t.Fatalf("RPC without output")
	}
	if err := json.Unmarshal([]byte(deref(out.Output.Data)), v); err != nil {
		t.Fatalf("RPC output %q: %v", deref(out.Output.Data), err)
	}
}
