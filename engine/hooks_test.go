package engine_test

import (
	"context"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/store/sqlite"
)

// TestOnCommitAndWaitIdle checks the two hooks tests wait on: OnCommit
// reports every committed history event once, in order, with its ID; and
// WaitIdle returns only once the workflow has done all it can before its
// signal arrives.
func TestOnCommitAndWaitIdle(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "iwf.db"))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	var mu sync.Mutex
	var seen []*engine.HistoryEvent
	h := newHarness(t, st, func(c *engine.Config) {
		c.OnCommit = func(events []*engine.HistoryEvent) {
			mu.Lock()
			seen = append(seen, events...)
			mu.Unlock()
		}
	})
	eng, w := h.eng, h.worker
	w.state("S1", stateHandlers{
		WaitUntil: func(req iwfapi.WorkflowStateStartRequest) (iwfapi.WorkflowStateStartResponse, int) {
			return iwfapi.WorkflowStateStartResponse{CommandRequest: &iwfapi.CommandRequest{
				CommandWaitingType: ptr(iwfapi.CommandWaitingTypeAllCompleted),
				SignalCommands:     &[]iwfapi.SignalCommand{{CommandId: ptr("s"), SignalChannelName: "go"}},
			}}, 200
		},
		Execute: func(req iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
			return decide(next(engine.ForceCompletingState, nil)), 200
		},
	})
	if _, err := eng.StartWorkflow(ctx, iwfapi.WorkflowStartRequest{WorkflowId: "wf-hooks", IwfWorkflowType: "T", IwfWorkerUrl: w.srv.URL, StartStateId: ptr("S1")}); err != nil {
		t.Fatal(err)
	}
	waitCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := eng.WaitIdle(waitCtx); err != nil {
		t.Fatal(err)
	}
	// Idle means waitUntil has answered: the execution waits for the signal.
	if got := w.count("S1.waitUntil"); got != 1 {
		t.Fatalf("after WaitIdle waitUntil was called %d times, want 1", got)
	}
	mu.Lock()
	types := eventTypes(seen)
	mu.Unlock()
	want := []string{"WorkflowStarted", "StateExecutionStarted", "WaitUntilCompleted"}
	if !slices.Equal(types, want) {
		t.Fatalf("events before the signal: %v, want %v", types, want)
	}
	if err := eng.SignalWorkflow(ctx, iwfapi.WorkflowSignalRequest{WorkflowId: "wf-hooks", SignalChannelName: "go"}); err != nil {
		t.Fatal(err)
	}
	if err := eng.WaitIdle(waitCtx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	want = append(want, "ExternalInput", "CommandsCompleted", "ExecuteCompleted", "WorkflowClosed")
	if types := eventTypes(seen); !slices.Equal(types, want) {
		t.Fatalf("events: %v, want %v", types, want)
	}
	for i, ev := range seen {
		if ev.ID == 0 || (i > 0 && ev.ID <= seen[i-1].ID) {
			t.Fatalf("event %d has ID %d after %d", i, ev.ID, seen[max(i-1, 0)].ID)
		}
	}
}

func eventTypes(events []*engine.HistoryEvent) []string {
	out := make([]string, len(events))
	for i, ev := range events {
		out[i] = ev.Type
	}
	return out
}
