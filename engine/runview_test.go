package engine_test

import (
	"context"
	"errors"
	"testing"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine"
)

// ScanHistory reads a run's whole history oldest first (or up to a cap,
// saying so); InspectRun reads named executions and buffered messages with
// counts per channel and a limit.
func TestScanHistoryAndInspectRun(t *testing.T) {
	forEachStore(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		h.worker.state("S1", stateHandlers{WaitUntil: func(iwfapi.WorkflowStateStartRequest) (iwfapi.WorkflowStateStartResponse, int) {
			return iwfapi.WorkflowStateStartResponse{CommandRequest: &iwfapi.CommandRequest{
				CommandWaitingType: ptr(iwfapi.CommandWaitingTypeAllCompleted),
				SignalCommands:     &[]iwfapi.SignalCommand{{CommandId: ptr("s"), SignalChannelName: "go"}},
			}}, 200
		}})
		runID := h.start("wf-scan", "S1", nil)
		h.idle()
		for _, ch := range []string{"x", "y", "x", "y", "x"} {
			if err := h.eng.SignalWorkflow(ctx, iwfapi.WorkflowSignalRequest{WorkflowId: "wf-scan", SignalChannelName: ch, SignalValue: obj(`1`)}); err != nil {
				t.Fatal(err)
			}
		}
		api, err := h.eng.WorkflowHistory(ctx, iwfapi.WorkflowHistoryRequest{WorkflowId: "wf-scan"})
		if err != nil {
			t.Fatal(err)
		}
		var ids []int64
		got, truncated, err := h.eng.ScanHistory(ctx, "wf-scan", "", 0, func(ev *engine.HistoryEvent) error {
			ids = append(ids, ev.ID)
			return nil
		})
		if err != nil || got != runID || truncated || len(ids) != len(api.Events) || len(ids) < 5 {
			t.Fatalf("scan: run %s (want %s), truncated %v, %v, %d events (API: %d)", got, runID, truncated, err, len(ids), len(api.Events))
		}
		for i, ev := range api.Events {
			if ids[i] != ev.EventId {
				t.Fatalf("scan read %v, the API %s", ids, mustJSON(api.Events))
			}
		}
		for _, tc := range []struct {
			max       int
			truncated bool
		}{{2, true}, {len(ids) - 1, true}, {len(ids), false}} {
			n := 0
			_, truncated, err := h.eng.ScanHistory(ctx, "wf-scan", runID, tc.max, func(*engine.HistoryEvent) error { n++; return nil })
			if err != nil || n != tc.max || truncated != tc.truncated {
				t.Fatalf("scan of at most %d: %d events, truncated %v, %v", tc.max, n, truncated, err)
			}
		}
		stop := errors.New("stop")
		if _, _, err := h.eng.ScanHistory(ctx, "wf-scan", "", 0, func(*engine.HistoryEvent) error { return stop }); !errors.Is(err, stop) {
			t.Fatalf("an error of fn: %v", err)
		}
		if _, _, err := h.eng.ScanHistory(ctx, "no-such-workflow", "", 0, func(*engine.HistoryEvent) error { return nil }); engine.CodeOf(err) != engine.CodeWorkflowNotExists {
			t.Fatalf("unknown workflow: %v", err)
		}

		ins, err := h.eng.InspectRun(ctx, "wf-scan", runID, []string{"S1-1", "S1-9"}, 4)
		if err != nil {
			t.Fatal(err)
		}
		if len(ins.Executions) != 1 || ins.Executions[0].ExecutionID != "S1-1" || len(ins.Executions[0].Data) == 0 {
			t.Fatalf("executions: %s", mustJSON(ins.Executions))
		}
		if len(ins.SignalCounts) != 2 || ins.SignalCounts["x"] != 3 || ins.SignalCounts["y"] != 2 || len(ins.InternalCounts) != 0 || len(ins.Internal) != 0 {
			t.Fatalf("counts: %v %v", ins.SignalCounts, ins.InternalCounts)
		}
		var chans []string
		for _, m := range ins.Signals {
			chans = append(chans, m.Channel)
		}
		if len(chans) != 4 || chans[0] != "x" || chans[2] != "x" || chans[3] != "y" {
			t.Fatalf("messages of at most 4, by channel: %v", chans)
		}
	})
}
