package compattest

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/iwf-server/iwf-server/api/iwfapi"
)

// TestSignal mirrors integ/signal_test.go: config/update; ten signals to a
// channel no state reads, with an RPC reading signalChannelInfos after each
// (and publishing a value-less internal message); four signal commands on
// one channel receiving the values in order, commandId "" when absent;
// unconsumed signals survive completion; then BEGINNING, STATE_EXECUTION_ID
// and STATE_ID resets each complete. The configuration and the buffers are
// read through this server's internal/dump where iWF uses a Temporal query.
func TestSignal(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		const (
			channel   = "test-signal-name"
			unhandled = "test-unhandled-signal-name"
			internal  = "test-internal-channel-name"
		)
		loadNone := iwfapi.WorkflowStateOptions{DataAttributesLoadingPolicy: &iwfapi.PersistenceLoadingPolicy{PersistenceLoadingType: ptr(iwfapi.PersistenceLoadingTypeLoadNone)}}
		e.w.rpc("RPCNameGetSignalChannelInfo", func(req iwfapi.WorkflowWorkerRpcRequest) reply {
			return ok(iwfapi.WorkflowWorkerRpcResponse{
				PublishToInterStateChannel: list(iwfapi.InterStateChannelPublishing{ChannelName: internal}),
				Output:                     &iwfapi.EncodedObject{Data: ptr(string(mustJSON(req.SignalChannelInfos)))},
			})
		})
		e.w.rpc("RPCNameGetInternalChannelInfo", func(req iwfapi.WorkflowWorkerRpcRequest) reply {
			return ok(iwfapi.WorkflowWorkerRpcResponse{Output: &iwfapi.EncodedObject{Data: ptr(string(mustJSON(req.InternalChannelInfos)))}})
		})
		e.w.state("S1", func(iwfapi.WorkflowStateStartRequest) reply {
			return commands(iwfapi.CommandRequest{
				SignalCommands: list(
					iwfapi.SignalCommand{CommandId: ptr("signal-cmd-id0"), SignalChannelName: channel},
					iwfapi.SignalCommand{CommandId: ptr("signal-cmd-id1"), SignalChannelName: channel},
					iwfapi.SignalCommand{SignalChannelName: channel},
					iwfapi.SignalCommand{SignalChannelName: channel},
				),
				DeciderTriggerType: ptr(iwfapi.DeciderTriggerTypeAllCommandCompleted),
			})
		}, func(iwfapi.WorkflowStateDecideRequest) reply { return decide(moveWith("S2", nil, loadNone)) })
		e.w.state("S2", noCommands, complete)

		wfID := e.id("signal")
		req := e.startRequest(wfID, "signal", "S1")
		runID := e.start(req)

		config := func() string { return string(mustJSON(e.dump(wfID, "")["config"])) }
		jsonEqual(t, "default config", []byte(config()), `{"continueAsNewThreshold":100}`)
		update := func(c iwfapi.WorkflowConfig) {
			resp, err := e.api.UpdateWorkflowConfigWithResponse(e.ctx(), iwfapi.WorkflowConfigUpdateRequest{WorkflowId: wfID, WorkflowConfig: c})
			if err != nil {
				t.Fatal(err)
			}
			expectError(t, "config/update", resp, 200, `{}`)
		}
		update(iwfapi.WorkflowConfig{DisableSystemSearchAttribute: ptr(true)})
		jsonEqual(t, "config after the first update", []byte(config()), `{"continueAsNewThreshold":100,"disableSystemSearchAttribute":true}`)
		update(iwfapi.WorkflowConfig{ContinueAsNewPageSizeInBytes: ptr(int32(3000000))})
		jsonEqual(t, "config after the second update", []byte(config()),
			`{"continueAsNewThreshold":100,"disableSystemSearchAttribute":true,"continueAsNewPageSizeInBytes":3000000}`)

		for i := 0; i < 10; i++ {
			e.signal(wfID, unhandled, obj(fmt.Sprintf("test-data-%d", i)))
			out := e.rpcOK(iwfapi.WorkflowRpcRequest{WorkflowId: wfID, RpcName: "RPCNameGetSignalChannelInfo"})
			jsonEqual(t, "signalChannelInfos", []byte(deref(out.Output.Data)), fmt.Sprintf(`{%q:{"size":%d}}`, unhandled, i+1))
		}
		out := e.rpcOK(iwfapi.WorkflowRpcRequest{WorkflowId: wfID, RpcName: "RPCNameGetInternalChannelInfo"})
		jsonEqual(t, "internalChannelInfos", []byte(deref(out.Output.Data)), fmt.Sprintf(`{%q:{"size":10}}`, internal))

		reserved, err := e.api.SignalWorkflowWithResponse(e.ctx(), iwfapi.WorkflowSignalRequest{WorkflowId: wfID, SignalChannelName: "__IwfSystem_ExecuteRpc"})
		if err != nil {
			t.Fatal(err)
		}
		expectError(t, "signal on a reserved channel", reserved, 400,
			`{"detail":"signal channel names starting with __IwfSystem_ are reserved","subStatus":"UNCATEGORIZED_SUB_STATUS"}`)

		for i := 0; i < 4; i++ {
			e.signal(wfID, channel, obj(fmt.Sprintf("test-data-%d", i)))
		}
		_, body := e.result(wfID)
		jsonEqual(t, "result", body, fmt.Sprintf(`{"workflowRunId":%q,"workflowStatus":"COMPLETED"}`, runID))
		e.w.expectCounts(t, map[string]int{"S1.waitUntil": 1, "S1.execute": 1, "S2.waitUntil": 1, "S2.execute": 1,
			"RPCNameGetSignalChannelInfo.rpc": 10, "RPCNameGetInternalChannelInfo.rpc": 1})
		const wantResults = `{"signalResults":[
			{"commandId":"signal-cmd-id0","signalChannelName":"test-signal-name","signalRequestStatus":"RECEIVED","signalValue":{"encoding":"json","data":"test-data-0"}},
			{"commandId":"signal-cmd-id1","signalChannelName":"test-signal-name","signalRequestStatus":"RECEIVED","signalValue":{"encoding":"json","data":"test-data-1"}},
			{"commandId":"","signalChannelName":"test-signal-name","signalRequestStatus":"RECEIVED","signalValue":{"encoding":"json","data":"test-data-2"}},
			{"commandId":"","signalChannelName":"test-signal-name","signalRequestStatus":"RECEIVED","signalValue":{"encoding":"json","data":"test-data-3"}}],
			"stateStartApiSucceeded":true,"stateWaitUntilFailed":false}`
		jsonEqual(t, "S1 commandResults", e.executeResults("S1", 0), wantResults)

		// Unconsumed messages survive completion.
		dump := e.dump(wfID, runID)
		jsonEqualValue(t, "buffered signals after completion", dump["signalChannels"], fmt.Sprintf(`{%q:{"size":10}}`, unhandled))
		jsonEqualValue(t, "buffered internal messages after completion", dump["internalChannels"], fmt.Sprintf(`{%q:{"size":10}}`, internal))
		late, err := e.api.SignalWorkflowWithResponse(e.ctx(), iwfapi.WorkflowSignalRequest{WorkflowId: wfID, SignalChannelName: channel})
		if err != nil {
			t.Fatal(err)
		}
		if late.StatusCode() != 400 || late.JSON400 == nil || deref(late.JSON400.SubStatus) != iwfapi.ErrorSubStatusWorkflowNotExists {
			t.Errorf("signal after completion: %d %s", late.StatusCode(), late.Body)
		}

		// Resets: BEGINNING re-applies the signals (and config updates and
		// RPC publishes); the state-based ones resume S2.
		for i, r := range []iwfapi.WorkflowResetRequest{
			{ResetType: iwfapi.WorkflowResetTypeBeginning},
			{ResetType: iwfapi.WorkflowResetTypeStateExecutionId, StateExecutionId: ptr("S2-1")},
			{ResetType: iwfapi.WorkflowResetTypeStateId, StateId: ptr("S2")},
		} {
			r.WorkflowId = wfID
			newRun := e.reset(r)
			got, _ := e.result(wfID)
			if got.WorkflowRunId != newRun || got.WorkflowStatus != iwfapi.WorkflowStatusCompleted {
				t.Errorf("after reset %d (%s): %s", i, r.ResetType, mustJSON(got))
			}
		}
		e.w.expectCounts(t, map[string]int{"S1.waitUntil": 2, "S1.execute": 2, "S2.waitUntil": 4, "S2.execute": 4,
			"RPCNameGetSignalChannelInfo.rpc": 10, "RPCNameGetInternalChannelInfo.rpc": 1})
		jsonEqual(t, "S1 commandResults after the BEGINNING reset", e.executeResults("S1", 1), wantResults)
	})
}

// TestResetByStateID mirrors integ/reset_by_state_id_test.go: a
// skip-waitUntil loop S2 ×5; resets of the first run by STATE_ID S2 and by
// STATE_EXECUTION_ID S2-4 re-execute S2-1…S2-5 and S2-4…S2-5 with the same
// execution ids and results.
func TestResetByStateID(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		checkContext := func(req iwfapi.WorkflowStateDecideRequest) bool {
			return deref(req.Context.Attempt) > 0 && deref(req.Context.FirstAttemptTimestamp) > 0
		}
		e.w.state("S1", nil, func(req iwfapi.WorkflowStateDecideRequest) reply {
			if !checkContext(req) {
				return e.w.reject("context %s", mustJSON(req.Context))
			}
			return decide(moveWith("S2", req.StateInput, iwfapi.WorkflowStateOptions{SkipWaitUntil: ptr(true)}))
		})
		e.w.state("S2", nil, func(req iwfapi.WorkflowStateDecideRequest) reply {
			if !checkContext(req) {
				return e.w.reject("context %s", mustJSON(req.Context))
			}
			var i int
			_ = json.Unmarshal([]byte(deref(req.StateInput.Data)), &i)
			if want := fmt.Sprintf("S2-%d", i); deref(req.Context.StateExecutionId) != want {
				e.w.fail("S2 with input %d runs as %s, want %s", i, deref(req.Context.StateExecutionId), want)
			}
			if i < 5 {
				return decide(moveWith("S2", obj(fmt.Sprint(i+1)), iwfapi.WorkflowStateOptions{SkipWaitUntil: ptr(true)}))
			}
			return decide(move(gracefulComplete, req.StateInput))
		})
		wfID := e.id("reset")
		req := e.startRequest(wfID, "reset", "S1")
		req.WorkflowTimeoutSeconds = 100
		req.StateInput = obj("1")
		req.StateOptions = &iwfapi.WorkflowStateOptions{SkipWaitUntil: ptr(true)}
		req.WorkflowStartOptions = &iwfapi.WorkflowStartOptions{WorkflowIDReusePolicy: ptr(iwfapi.WorkflowIDReusePolicyRejectDuplicate)}
		first := e.start(req)
		results := func(run string) string {
			return fmt.Sprintf(`{"workflowRunId":%q,"workflowStatus":"COMPLETED",
				"results":[{"completedStateId":"S2","completedStateExecutionId":"S2-5","completedStateOutput":{"encoding":"json","data":"5"}}]}`, run)
		}
		_, body := e.result(wfID)
		jsonEqual(t, "first run", body, results(first))
		e.w.expectCounts(t, map[string]int{"S1.execute": 1, "S2.execute": 5})

		second := e.reset(iwfapi.WorkflowResetRequest{WorkflowId: wfID, WorkflowRunId: ptr(first), ResetType: iwfapi.WorkflowResetTypeStateId, StateId: ptr("S2")})
		_, body = e.result(wfID)
		jsonEqual(t, "after the STATE_ID reset", body, results(second))
		e.w.expectCounts(t, map[string]int{"S1.execute": 1, "S2.execute": 10})

		third := e.reset(iwfapi.WorkflowResetRequest{WorkflowId: wfID, WorkflowRunId: ptr(first), ResetType: iwfapi.WorkflowResetTypeStateExecutionId, StateExecutionId: ptr("S2-4")})
		_, body = e.result(wfID)
		jsonEqual(t, "after the STATE_EXECUTION_ID reset", body, results(third))
		e.w.expectCounts(t, map[string]int{"S1.execute": 1, "S2.execute": 12})

		// Unknown targets.
		for _, r := range []iwfapi.WorkflowResetRequest{
			{ResetType: iwfapi.WorkflowResetTypeStateId, StateId: ptr("Nope")},
			{ResetType: iwfapi.WorkflowResetTypeStateExecutionId, StateExecutionId: ptr("S2-9")},
		} {
			r.WorkflowId = wfID
			resp, err := e.api.ResetWorkflowWithResponse(e.ctx(), r)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode() != 400 {
				t.Errorf("reset to %s: %d %s", mustJSON(r), resp.StatusCode(), resp.Body)
			}
		}
	})
}
