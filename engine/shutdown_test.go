package engine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine"
)

// TestCloseHandsBackWorkCutOffByTheGrace: a worker call still running when
// the shutdown grace ends is cancelled, and its task goes back to the store
// at once — unleased, its attempt counted — so that another node makes the
// next attempt without waiting for the lease to expire.
func TestCloseHandsBackWorkCutOffByTheGrace(t *testing.T) {
	forEachStore(t, func(t *testing.T, h *harness) {
		arrived, unblock := make(chan int, 4), make(chan struct{})
		defer close(unblock)
		h.worker.state("S1", stateHandlers{
			WaitUntil: func(req iwfapi.WorkflowStateStartRequest) (iwfapi.WorkflowStateStartResponse, int) {
				arrived <- int(deref(req.Context.Attempt))
				if deref(req.Context.Attempt) == 1 {
					<-unblock // the first attempt outlives the grace
				}
				return iwfapi.WorkflowStateStartResponse{}, 200
			},
			Execute: func(iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
				return decide(next(engine.ForceCompletingState, nil)), 200
			},
		})
		runID := h.start("wf-grace", "S1", nil)
		if got := <-arrived; got != 1 {
			t.Fatalf("first attempt %d", got)
		}
		grace, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		if err := h.eng.Close(grace); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Close with a call outliving the grace: %v", err)
		}
		tasks, err := taskList(h.store, runID)
		if err != nil {
			t.Fatal(err)
		}
		if len(tasks) != 1 || tasks[0].Kind != engine.TaskWaitUntil || tasks[0].LeaseOwner != "" || tasks[0].Attempt != 2 {
			t.Fatalf("tasks after Close: %s, want the waitUntil task unleased at attempt 2", mustJSON(tasks))
		}
		// Another node takes it over and completes the workflow.
		other := newHarnessOn(t, h.store, h.worker)
		if got := other.result("wf-grace"); got.WorkflowStatus != iwfapi.WorkflowStatusCompleted {
			t.Fatalf("result %s", mustJSON(got))
		}
		if got := <-arrived; got != 2 {
			t.Fatalf("the next node made attempt %d, want 2", got)
		}
	})
}

// TestCloseHandsBackWorkNotStarted: tasks a node holds but has not run
// (here a timer due in an hour) go back to the store unleased and with
// their attempt unchanged when the node closes.
func TestCloseHandsBackWorkNotStarted(t *testing.T) {
	// A long lease leases the hour-long timer to the node that creates it
	// (tasks due within half a lease are), so that it is held, not run.
	forEachStoreWith(t, func(c *engine.Config) { c.LeaseDuration = 4 * time.Hour }, func(t *testing.T, h *harness) {
		h.worker.state("S1", stateHandlers{
			WaitUntil: func(iwfapi.WorkflowStateStartRequest) (iwfapi.WorkflowStateStartResponse, int) {
				return iwfapi.WorkflowStateStartResponse{CommandRequest: &iwfapi.CommandRequest{
					CommandWaitingType: ptr(iwfapi.CommandWaitingTypeAllCompleted),
					TimerCommands:      &[]iwfapi.TimerCommand{{CommandId: ptr("t"), DurationSeconds: ptr(int64(3600))}},
				}}, 200
			},
		})
		runID := h.start("wf-held", "S1", nil)
		h.eventually("the timer task leased to this node", func() bool {
			tasks, err := taskList(h.store, runID)
			return err == nil && len(tasks) == 1 && tasks[0].Kind == engine.TaskTimer && tasks[0].LeaseOwner != ""
		})
		if err := h.eng.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		tasks, err := taskList(h.store, runID)
		if err != nil {
			t.Fatal(err)
		}
		if len(tasks) != 1 || tasks[0].LeaseOwner != "" || tasks[0].Attempt != 1 {
			t.Fatalf("tasks after Close: %s, want the timer unleased at attempt 1", mustJSON(tasks))
		}
	})
}

// taskList returns the run's tasks but its timeout.
func taskList(st engine.Store, runID string) ([]*engine.Task, error) {
	var tasks []*engine.Task
	err := st.View(context.Background(), func(ctx context.Context, tx engine.ReadTx) error {
		var err error
		all, err := tx.TaskList(ctx, runID)
		for _, tk := range all {
			if tk.Kind != engine.TaskTimeout { // the run's own timeout
				tasks = append(tasks, tk)
			}
		}
		return err
	})
	return tasks, err
}
