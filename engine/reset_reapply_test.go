package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine"
)

// TestResetToStateReappliesLaterInputs: a reset to a state restores the
// signals buffered at the reset point and applies again the signals and RPC
// mutations received after it, as iWF does; skipSignalReapply drops the
// latter. S1 moves to S2, which waits for a signal on "unblock" (sent while
// S1 runs, before the reset point, consumed after it) and a message on the
// internal channel "ic" that an RPC publishes once S2 waits (after the
// point). After a reset to S2 the new run gets both, each once, and
// completes; with skipSignalReapply it waits for the RPC's message.
func TestResetToStateReappliesLaterInputs(t *testing.T) {
	forEachStore(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		signalled := make(chan struct{})
		h.worker.state("S1", stateHandlers{Execute: func(req iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
			<-signalled
			return decide(next("S2", nil)), 200
		}})
		h.worker.state("S2", stateHandlers{
			WaitUntil: func(req iwfapi.WorkflowStateStartRequest) (iwfapi.WorkflowStateStartResponse, int) {
				return iwfapi.WorkflowStateStartResponse{CommandRequest: &iwfapi.CommandRequest{
					CommandWaitingType:        ptr(iwfapi.CommandWaitingTypeAllCompleted),
					SignalCommands:            &[]iwfapi.SignalCommand{{CommandId: ptr("s"), SignalChannelName: "unblock"}},
					InterStateChannelCommands: &[]iwfapi.InterStateChannelCommand{{CommandId: ptr("i"), ChannelName: "ic"}},
				}}, 200
			},
			Execute: func(req iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
				r := req.CommandResults
				out := *deref(r.SignalResults)[0].SignalValue.Data + "+" + *deref(r.InterStateChannelResults)[0].Value.Data
				return decide(next(engine.ForceCompletingState, obj(out))), 200
			},
		})
		h.worker.rpc("publish", func(req iwfapi.WorkflowWorkerRpcRequest) (iwfapi.WorkflowWorkerRpcResponse, int) {
			return iwfapi.WorkflowWorkerRpcResponse{PublishToInterStateChannel: &[]iwfapi.InterStateChannelPublishing{{ChannelName: "ic", Value: obj("rpc")}}}, 200
		})
		const id = "wf-reset-later"
		h.start(id, "S1", nil, func(r *iwfapi.WorkflowStartRequest) {
			r.StateOptions = &iwfapi.WorkflowStateOptions{SkipWaitUntil: ptr(true)}
		})
		if err := h.eng.SignalWorkflow(ctx, iwfapi.WorkflowSignalRequest{WorkflowId: id, SignalChannelName: "unblock", SignalValue: obj("sig")}); err != nil {
			t.Fatal(err)
		}
		close(signalled)
		waitCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		if err := h.eng.WaitIdle(waitCtx); err != nil { // S2 waits for "ic"
			t.Fatal(err)
		}
		if _, err := h.eng.InvokeRPC(ctx, iwfapi.WorkflowRpcRequest{WorkflowId: id, RpcName: "publish"}); err != nil {
			t.Fatal(err)
		}
		output := func() string {
			got, err := h.eng.GetWorkflowWithWait(ctx, iwfapi.WorkflowGetRequest{WorkflowId: id})
			if err != nil || got.WorkflowStatus != iwfapi.WorkflowStatusCompleted {
				hist, _ := h.eng.WorkflowHistory(ctx, iwfapi.WorkflowHistoryRequest{WorkflowId: id})
				t.Fatalf("status %s %v\n%s", got.WorkflowStatus, err, mustJSON(hist))
			}
			return *deref(got.Results)[0].CompletedStateOutput.Data
		}
		if got := output(); got != "sig+rpc" {
			t.Fatalf("first run output %q", got)
		}
		if _, err := h.eng.ResetWorkflow(ctx, iwfapi.WorkflowResetRequest{WorkflowId: id, ResetType: iwfapi.WorkflowResetTypeStateId, StateId: ptr("S2")}); err != nil {
			t.Fatal(err)
		}
		if got := output(); got != "sig+rpc" {
			t.Fatalf("after a reset to S2 the output is %q, want the re-applied inputs", got)
		}
		// Each input was applied once: nothing is left in the buffers.
		dump, err := h.eng.DumpWorkflow(ctx, iwfapi.WorkflowDumpRequest{WorkflowId: id, PageSizeInBytes: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Signals  map[string]iwfapi.ChannelInfo `json:"signalChannels"`
			Internal map[string]iwfapi.ChannelInfo `json:"internalChannels"`
		}
		mustUnmarshal(t, dump.JsonData, &doc)
		if len(doc.Signals) != 0 || len(doc.Internal) != 0 {
			t.Fatalf("buffers after the reset run: signals %v internal %v, want empty", doc.Signals, doc.Internal)
		}
		// Without re-application S2 waits for new inputs.
		resp, err := h.eng.ResetWorkflow(ctx, iwfapi.WorkflowResetRequest{WorkflowId: id, ResetType: iwfapi.WorkflowResetTypeStateId, StateId: ptr("S2"), SkipSignalReapply: ptr(true)})
		if err != nil {
			t.Fatal(err)
		}
		if err := h.eng.WaitIdle(waitCtx); err != nil {
			t.Fatal(err)
		}
		got, err := h.eng.GetWorkflow(ctx, iwfapi.WorkflowGetRequest{WorkflowId: id, WorkflowRunId: ptr(resp.WorkflowRunId)})
		if err != nil || got.WorkflowStatus != iwfapi.WorkflowStatusRunning {
			t.Fatalf("with skipSignalReapply: %v %v, want RUNNING", got.WorkflowStatus, err)
		}
	})
}
