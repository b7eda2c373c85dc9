package engine_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine"
)

// commitLog records, per run, the event types of each commit (OnCommit).
type commitLog struct {
	mu      sync.Mutex
	commits map[string][][]string
	changed chan struct{} // closed and replaced at every commit
}

func (l *commitLog) hook(c *engine.Config) {
	c.OnCommit = func(events []*engine.HistoryEvent) {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.commits == nil {
			l.commits = map[string][][]string{}
		}
		byRun := map[string][]string{}
		for _, ev := range events {
			byRun[ev.RunID] = append(byRun[ev.RunID], ev.Type)
		}
		for run, types := range byRun {
			l.commits[run] = append(l.commits[run], types)
		}
		if l.changed != nil {
			close(l.changed)
			l.changed = nil
		}
	}
}

// await returns the commits of run that hold an event of type typ once
// there is one. The hook runs a moment after the commit, which a reader
// of the workflow may see first.
func (l *commitLog) await(t *testing.T, run, typ string) [][]string {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		l.mu.Lock()
		out := l.withLocked(run, typ)
		if l.changed == nil {
			l.changed = make(chan struct{})
		}
		changed := l.changed
		l.mu.Unlock()
		if len(out) > 0 {
			return out
		}
		select {
		case <-changed:
		case <-timeout:
			t.Fatalf("no commit of run %s with %s after 30s", run, typ)
		}
	}
}

// withLocked returns the commits of run that hold an event of type typ;
// l.mu is held.
func (l *commitLog) withLocked(run, typ string) [][]string {
	var out [][]string
	for _, c := range l.commits[run] {
		if slices.Contains(c, typ) {
			out = append(out, c)
		}
	}
	return out
}

// oneTimer is a waitUntil answer of one durable timer of a second.
func oneTimer(iwfapi.WorkflowStateStartRequest) (iwfapi.WorkflowStateStartResponse, int) {
	return iwfapi.WorkflowStateStartResponse{CommandRequest: &iwfapi.CommandRequest{
		CommandWaitingType: ptr(iwfapi.CommandWaitingTypeAllCompleted),
		TimerCommands:      &[]iwfapi.TimerCommand{{CommandId: ptr("t"), DurationSeconds: ptr(int64(1))}},
	}}, 200
}

// firedTimer reports whether an execute request says timer "t" fired.
func firedTimer(req iwfapi.WorkflowStateDecideRequest) bool {
	rs := deref(req.CommandResults.TimerResults)
	return len(rs) == 1 && rs[0].CommandId == "t" && rs[0].TimerStatus == iwfapi.TimerStatusFired
}

// TestTimerAloneAppliesExecuteWithTheFiring checks the eager path: a
// timer that is its execution's only command calls execute with the timer
// fired, and one transaction records the firing and applies the answer.
func TestTimerAloneAppliesExecuteWithTheFiring(t *testing.T) {
	var log commitLog
	forEachStoreWith(t, log.hook, func(t *testing.T, h *harness) {
		h.worker.state("S1", stateHandlers{
			WaitUntil: oneTimer,
			Execute: func(req iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
				if !firedTimer(req) || deref(req.Context.Attempt) != 1 {
					return iwfapi.WorkflowStateDecideResponse{}, 400
				}
				return decide(next(engine.GracefulCompletingState, obj(`"done"`))), 200
			},
		})
		runID := h.start("wf-eager", "S1", nil)
		if got := h.result("wf-eager"); got.WorkflowStatus != iwfapi.WorkflowStatusCompleted || h.worker.count("S1.execute") != 1 {
			t.Fatalf("status %s after %d execute calls, want COMPLETED after 1", got.WorkflowStatus, h.worker.count("S1.execute"))
		}
		want := [][]string{{"TimerFired", "CommandsCompleted", "ExecuteCompleted", "WorkflowClosed"}}
		if got := log.await(t, runID, "TimerFired"); !equalCommits(got, want) {
			t.Fatalf("commits with the firing: %v, want %v", got, want)
		}
	})
}

// TestTimerAloneExecuteFailureIsAnAttempt checks that a failed execute call
// made as the timer fired counts as the first attempt: the firing commits,
// the failure is recorded, and attempt 2 follows after backoff.
func TestTimerAloneExecuteFailureIsAnAttempt(t *testing.T) {
	var log commitLog
	forEachStoreWith(t, log.hook, func(t *testing.T, h *harness) {
		var attempts sync.Map
		h.worker.state("S1", stateHandlers{
			WaitUntil: oneTimer,
			Execute: func(req iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
				attempt := deref(req.Context.Attempt)
				prev, _ := attempts.Swap(req.Context.WorkflowRunId, attempt)
				if !firedTimer(req) {
					return iwfapi.WorkflowStateDecideResponse{}, 400
				}
				if prev == nil {
					return iwfapi.WorkflowStateDecideResponse{}, 500
				}
				return decide(next(engine.GracefulCompletingState, obj(mustJSON([]any{prev, attempt})))), 200
			},
		})
		h.start("wf-eager-fails", "S1", nil, func(r *iwfapi.WorkflowStartRequest) {
			r.StateOptions = &iwfapi.WorkflowStateOptions{ExecuteApiRetryPolicy: &iwfapi.RetryPolicy{
				InitialIntervalSeconds: ptr(int32(1)), MaximumAttempts: ptr(int32(3)),
			}}
		})
		got := h.result("wf-eager-fails")
		results := deref(got.Results)
		if got.WorkflowStatus != iwfapi.WorkflowStatusCompleted || len(results) != 1 || *results[0].CompletedStateOutput.Data != "[1,2]" {
			t.Fatalf("status %s, results %s; want COMPLETED by attempt 2 after attempt 1", got.WorkflowStatus, mustJSON(results))
		}
		runID := got.WorkflowRunId
		if got, want := log.await(t, runID, "TimerFired"), [][]string{{"TimerFired", "CommandsCompleted"}}; !equalCommits(got, want) {
			t.Fatalf("commits with the firing: %v, want %v", got, want)
		}
		if got, want := log.await(t, runID, "EXECUTEAttemptFailed"), [][]string{{"EXECUTEAttemptFailed"}}; !equalCommits(got, want) {
			t.Fatalf("commits with the failed attempt: %v, want %v", got, want)
		}
	})
}

// TestTimerWithOtherCommandsFiresFirst checks that a timer that is not its
// execution's only command takes the usual path: the firing commits before
// execute is called.
func TestTimerWithOtherCommandsFiresFirst(t *testing.T) {
	var log commitLog
	forEachStoreWith(t, log.hook, func(t *testing.T, h *harness) {
		h.worker.state("S1", stateHandlers{
			WaitUntil: func(iwfapi.WorkflowStateStartRequest) (iwfapi.WorkflowStateStartResponse, int) {
				return iwfapi.WorkflowStateStartResponse{CommandRequest: &iwfapi.CommandRequest{
					CommandWaitingType: ptr(iwfapi.CommandWaitingTypeAnyCompleted),
					TimerCommands:      &[]iwfapi.TimerCommand{{CommandId: ptr("t"), DurationSeconds: ptr(int64(1))}},
					SignalCommands:     &[]iwfapi.SignalCommand{{CommandId: ptr("s"), SignalChannelName: "never"}},
				}}, 200
			},
			Execute: func(req iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
				return decide(next(engine.GracefulCompletingState, nil)), 200
			},
		})
		runID := h.start("wf-mixed", "S1", nil)
		if got := h.result("wf-mixed"); got.WorkflowStatus != iwfapi.WorkflowStatusCompleted {
			t.Fatalf("status %s", got.WorkflowStatus)
		}
		if got, want := log.await(t, runID, "TimerFired"), [][]string{{"TimerFired", "CommandsCompleted"}}; !equalCommits(got, want) {
			t.Fatalf("commits with the firing: %v, want %v", got, want)
		}
	})
}

// TestTimerAloneSkippedDuringItsExecuteCall checks the race with a timer
// skipped over the API while execute, called as the timer fired, has not
// answered: the skip moves the execution on and calls execute again (state
// API calls are at least once), and only one answer is applied.
func TestTimerAloneSkippedDuringItsExecuteCall(t *testing.T) {
	forEachStore(t, func(t *testing.T, h *harness) {
		released := timerThenHeldExecute(t, h)
		runID := h.start("wf-skip-race", "S1", nil)
		h.eventually("execute called as the timer fired", func() bool { return h.worker.count("S1.execute") == 1 })
		if err := h.eng.SkipTimer(context.Background(), iwfapi.WorkflowSkipTimerRequest{
			WorkflowId: "wf-skip-race", WorkflowStateExecutionId: "S1-1", TimerCommandId: ptr("t"),
		}); err != nil {
			t.Fatal(err)
		}
		got := h.result("wf-skip-race")
		released()
		h.idle()
		results := deref(got.Results)
		if got.WorkflowStatus != iwfapi.WorkflowStatusCompleted || len(results) != 1 || *results[0].CompletedStateOutput.Data != `"second"` {
			t.Fatalf("status %s, results %s; want COMPLETED with the second call's output", got.WorkflowStatus, mustJSON(results))
		}
		hist, err := h.eng.WorkflowHistory(context.Background(), iwfapi.WorkflowHistoryRequest{WorkflowId: "wf-skip-race", WorkflowRunId: &runID})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, ev := range hist.Events {
			if ev.EventType == "ExecuteCompleted" {
				n++
			}
		}
		if n != 1 || h.worker.count("S1.execute") != 2 {
			t.Fatalf("%d ExecuteCompleted events after %d execute calls, want 1 after 2", n, h.worker.count("S1.execute"))
		}
	})
}

// TestTimerAloneSignalDuringItsExecuteCall checks that a message arriving
// while execute, called as the timer fired, has not answered leaves that
// call alone: an execution waiting on timers only cannot take a message,
// so the message's transaction must not fire the due timer itself (that
// would move the execution on and call execute a second time, with the
// same attempt, while the first call is in flight). The timer's task
// applies the first call's answer and the signal stays buffered.
func TestTimerAloneSignalDuringItsExecuteCall(t *testing.T) {
	forEachStore(t, func(t *testing.T, h *harness) {
		released := timerThenHeldExecute(t, h)
		h.start("wf-signal-race", "S1", nil)
		h.eventually("execute called as the timer fired", func() bool { return h.worker.count("S1.execute") == 1 })
		if err := h.eng.SignalWorkflow(context.Background(), iwfapi.WorkflowSignalRequest{
			WorkflowId: "wf-signal-race", SignalChannelName: "unrelated", SignalValue: obj(`1`),
		}); err != nil {
			t.Fatal(err)
		}
		released()
		got := h.result("wf-signal-race")
		h.idle()
		results := deref(got.Results)
		if got.WorkflowStatus != iwfapi.WorkflowStatusCompleted || len(results) != 1 || *results[0].CompletedStateOutput.Data != `"first"` {
			t.Fatalf("status %s, results %s; want COMPLETED with the first call's output", got.WorkflowStatus, mustJSON(results))
		}
		if n := h.worker.count("S1.execute"); n != 1 {
			t.Fatalf("%d execute calls, want 1", n)
		}
	})
}

// timerThenHeldExecute registers state S1: its waitUntil waits for timer
// "t" alone (oneTimer); the first execute call of a run blocks until the
// returned release is called (or the test ends) and completes the
// workflow with "first", any later call at once with "second".
func timerThenHeldExecute(t *testing.T, h *harness) (release func()) {
	ch := make(chan struct{})
	release = sync.OnceFunc(func() { close(ch) })
	t.Cleanup(release)
	var calls sync.Map
	h.worker.state("S1", stateHandlers{
		WaitUntil: oneTimer,
		Execute: func(req iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
			out := `"second"`
			if _, again := calls.LoadOrStore(req.Context.WorkflowRunId, true); !again {
				<-ch
				out = `"first"`
			}
			return decide(next(engine.GracefulCompletingState, obj(out))), 200
		},
	})
	return release
}

func equalCommits(a, b [][]string) bool {
	return slices.EqualFunc(a, b, func(x, y []string) bool { return slices.Equal(x, y) })
}
