package engine_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine"
)

// TestBufferedMessagesAllMatchAtRegistration: when commands are registered,
// every command that an already buffered message can satisfy consumes one
// before the waiting condition is evaluated, as iWF does. Signals for
// channels 1, 3 and 2 arrive while waitUntil is in flight; it then asks for
// commands on channels 1, 1, 2 and 3 under a combination that the first
// command alone satisfies. Execute sees channels 1 (first command), 2 and 3
// RECEIVED with their values; the second command on channel 1 has no
// message and stays WAITING.
func TestBufferedMessagesAllMatchAtRegistration(t *testing.T) {
	forEachStore(t, func(t *testing.T, h *harness) {
		sent := make(chan struct{})
		results := make(chan *iwfapi.CommandResults, 1)
		h.worker.state("S1", stateHandlers{
			WaitUntil: func(req iwfapi.WorkflowStateStartRequest) (iwfapi.WorkflowStateStartResponse, int) {
				<-sent
				sig := func(id, ch string) iwfapi.SignalCommand {
					return iwfapi.SignalCommand{CommandId: ptr(id), SignalChannelName: ch}
				}
				return iwfapi.WorkflowStateStartResponse{CommandRequest: &iwfapi.CommandRequest{
					CommandWaitingType:  ptr(iwfapi.CommandWaitingTypeAnyCombinationCompleted),
					SignalCommands:      &[]iwfapi.SignalCommand{sig("one", "ch1"), sig("one-again", "ch1"), sig("two", "ch2"), sig("three", "ch3")},
					CommandCombinations: &[]iwfapi.CommandCombination{{CommandIds: &[]string{"one"}}, {CommandIds: &[]string{"two", "three"}}},
				}}, 200
			},
			Execute: func(req iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
				select {
				case results <- req.CommandResults:
				default: // a repeated call (an expired lease on a loaded machine) answers the same
				}
				return decide(next(engine.ForceCompletingState, nil)), 200
			},
		})
		h.start("wf-buffered", "S1", nil)
		for _, ch := range []string{"ch1", "ch3", "ch2"} {
			if err := h.eng.SignalWorkflow(context.Background(), iwfapi.WorkflowSignalRequest{WorkflowId: "wf-buffered", SignalChannelName: ch, SignalValue: obj(`"` + ch + `"`)}); err != nil {
				t.Fatal(err)
			}
		}
		close(sent)
		if got := h.result("wf-buffered"); got.WorkflowStatus != iwfapi.WorkflowStatusCompleted {
			t.Fatalf("status %s", got.WorkflowStatus)
		}
		got, _ := json.Marshal(deref((<-results).SignalResults))
		want := `[{"commandId":"one","signalChannelName":"ch1","signalRequestStatus":"RECEIVED","signalValue":{"data":"\"ch1\"","encoding":"json"}},` +
			`{"commandId":"one-again","signalChannelName":"ch1","signalRequestStatus":"WAITING"},` +
			`{"commandId":"two","signalChannelName":"ch2","signalRequestStatus":"RECEIVED","signalValue":{"data":"\"ch2\"","encoding":"json"}},` +
			`{"commandId":"three","signalChannelName":"ch3","signalRequestStatus":"RECEIVED","signalValue":{"data":"\"ch3\"","encoding":"json"}}]`
		if string(got) != want {
			t.Fatalf("signal results\n got %s\nwant %s", got, want)
		}
	})
}
