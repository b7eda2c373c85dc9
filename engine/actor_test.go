package engine_test

import (
	"context"
	"testing"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine"
)

// TestActorInHistory: stop, reset and external inputs made with an actor
// in their context record it as the "actor" member of their history
// event's data; without one, the data has no such member.
func TestActorInHistory(t *testing.T) {
	forEachStore(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		h.worker.state("Wait", stateHandlers{
			WaitUntil: func(req iwfapi.WorkflowStateStartRequest) (iwfapi.WorkflowStateStartResponse, int) {
				return iwfapi.WorkflowStateStartResponse{CommandRequest: &iwfapi.CommandRequest{
					CommandWaitingType: ptr(iwfapi.CommandWaitingTypeAllCompleted),
					SignalCommands:     &[]iwfapi.SignalCommand{{SignalChannelName: "never"}},
				}}, 200
			},
		})
		first := h.start("wf-actor", "Wait", nil)
		if err := h.eng.SignalWorkflow(ctx, iwfapi.WorkflowSignalRequest{WorkflowId: "wf-actor", SignalChannelName: "other"}); err != nil {
			t.Fatal(err)
		}
		if err := h.eng.SignalWorkflow(engine.WithActor(ctx, "app"), iwfapi.WorkflowSignalRequest{WorkflowId: "wf-actor", SignalChannelName: "other"}); err != nil {
			t.Fatal(err)
		}
		resp, err := h.eng.ResetWorkflow(engine.WithActor(ctx, "alice"), iwfapi.WorkflowResetRequest{WorkflowId: "wf-actor", ResetType: iwfapi.WorkflowResetTypeBeginning})
		if err != nil {
			t.Fatal(err)
		}
		if err := h.eng.StopWorkflow(engine.WithActor(ctx, "CN=ops-bot"), iwfapi.WorkflowStopRequest{WorkflowId: "wf-actor"}); err != nil {
			t.Fatal(err)
		}
		actors := func(runID string) map[string][]any {
			hist, err := h.eng.WorkflowHistory(ctx, iwfapi.WorkflowHistoryRequest{WorkflowId: "wf-actor", WorkflowRunId: &runID})
			if err != nil {
				t.Fatal(err)
			}
			out := map[string][]any{}
			for _, ev := range hist.Events {
				switch ev.EventType {
				case "ExternalInput", "WorkflowClosed", "Reset":
					out[ev.EventType] = append(out[ev.EventType], deref(ev.Data)["actor"])
				}
			}
			return out
		}
		got := actors(first)
		if want := []any{nil, "app"}; len(got["ExternalInput"]) != 2 || got["ExternalInput"][0] != want[0] || got["ExternalInput"][1] != want[1] {
			t.Errorf("first run's inputs: %v, want %v", got["ExternalInput"], want)
		}
		if len(got["WorkflowClosed"]) != 1 || got["WorkflowClosed"][0] != "alice" || len(got["Reset"]) != 1 || got["Reset"][0] != "alice" {
			t.Errorf("first run's close and reset: %v", got)
		}
		got = actors(resp.WorkflowRunId)
		// The reset applied the signals again, with their actors.
		if len(got["ExternalInput"]) != 2 || got["ExternalInput"][0] != nil || got["ExternalInput"][1] != "app" {
			t.Errorf("new run's inputs: %v", got["ExternalInput"])
		}
		if len(got["WorkflowClosed"]) != 1 || got["WorkflowClosed"][0] != "CN=ops-bot" {
			t.Errorf("new run's close: %v", got["WorkflowClosed"])
		}
	})
}
