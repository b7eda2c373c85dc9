package engine_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/store/sqlite"
)

// twiceStore runs every Update function twice, as a store may (a deadlock
// retry, a group commit re-run): first in a transaction it rolls back, then
// in the one it commits.
type twiceStore struct {
	engine.Store
}

var errDiscard = errors.New("discarded first run")

func (s twiceStore) Update(ctx context.Context, fn func(ctx context.Context, tx engine.Tx) error) error {
	err := s.Store.Update(ctx, func(ctx context.Context, tx engine.Tx) error {
		if err := fn(ctx, tx); err != nil {
			return err
		}
		return errDiscard
	})
	if !errors.Is(err, errDiscard) {
		return err
	}
	return s.Store.Update(ctx, fn)
}

// TestUpdateFunctionsRunTwice drives workflows with timers, signals and
// two states through an engine whose every transaction function runs twice.
// Nothing outside the transactions may see the discarded runs: each worker
// API is called once per execution, and the metrics count each start,
// timer and close once.
func TestUpdateFunctionsRunTwice(t *testing.T) {
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "iwf.db"))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	// A long lease: on a loaded machine a lease could expire and let the
	// poller run a task again, which is at-least-once delivery, not a
	// re-run of a transaction function.
	// A run's close is visible to readers as soon as it commits, a moment
	// before the committing goroutine counts it in the metrics; OnCommit
	// runs after the counting, so the test waits for it there.
	closes := make(chan struct{}, 64)
	h := newHarness(t, twiceStore{st}, func(c *engine.Config) {
		c.LeaseDuration = time.Minute
		c.OnCommit = func(events []*engine.HistoryEvent) {
			for _, ev := range events {
				if ev.Type == "WorkflowClosed" {
					closes <- struct{}{}
				}
			}
		}
	})
	h.worker.state("S1", stateHandlers{
		WaitUntil: func(req iwfapi.WorkflowStateStartRequest) (iwfapi.WorkflowStateStartResponse, int) {
			return iwfapi.WorkflowStateStartResponse{CommandRequest: &iwfapi.CommandRequest{
				CommandWaitingType: ptr(iwfapi.CommandWaitingTypeAllCompleted),
				TimerCommands:      &[]iwfapi.TimerCommand{{CommandId: ptr("t"), DurationSeconds: ptr(int64(1))}},
				SignalCommands:     &[]iwfapi.SignalCommand{{CommandId: ptr("s"), SignalChannelName: "go"}},
			}}, 200
		},
		Execute: func(req iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
			return decide(next("S2", nil)), 200
		},
	})
	h.worker.state("S2", stateHandlers{Execute: func(req iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
		return decide(next(engine.GracefulCompletingState, obj(`"done"`))), 200
	}})
	const n = 5
	for i := range n {
		id := fmt.Sprintf("wf-twice-%d", i)
		h.start(id, "S1", nil, func(r *iwfapi.WorkflowStartRequest) {
			r.StateOptions = nil
		})
		if err := h.eng.SignalWorkflow(context.Background(), iwfapi.WorkflowSignalRequest{WorkflowId: id, SignalChannelName: "go", SignalValue: obj(`1`)}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		if got := h.result(fmt.Sprintf("wf-twice-%d", i)); got.WorkflowStatus != iwfapi.WorkflowStatusCompleted {
			t.Fatalf("workflow %d: %s", i, got.WorkflowStatus)
		}
	}
	for i := range n {
		select {
		case <-closes:
		case <-time.After(time.Minute):
			t.Fatalf("%d of %d closes committed", i, n)
		}
	}
	for _, k := range []string{"S1.waitUntil", "S1.execute", "S2.execute"} {
		if got := h.worker.count(k); got != n {
			t.Errorf("%s called %d times, want %d", k, got, n)
		}
	}
	var b strings.Builder
	if err := h.eng.WriteMetrics(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		fmt.Sprintf("iwf_workflows_started_total %d\n", n),
		fmt.Sprintf("iwf_timers_fired_total %d\n", n),
		fmt.Sprintf("iwf_workflows_closed_total{status=\"COMPLETED\"} %d\n", n),
		fmt.Sprintf("iwf_worker_calls_total{api=\"execute\",outcome=\"ok\"} %d\n", 2*n),
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("metrics lack %q:\n%s", want, b.String())
		}
	}
}
