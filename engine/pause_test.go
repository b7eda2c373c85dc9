package engine_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/workerclient"
)

// eventLog keeps the history events an engine committed (Config.OnCommit)
// so that a test can wait for the next event that proves what it checks.
type eventLog struct {
	mu      sync.Mutex
	events  []*engine.HistoryEvent
	changed chan struct{}
}

func newEventLog() *eventLog { return &eventLog{changed: make(chan struct{})} }

// config hooks the log to an engine's configuration.
func (l *eventLog) config(c *engine.Config) {
	c.OnCommit = func(evs []*engine.HistoryEvent) {
		l.mu.Lock()
		l.events = append(l.events, evs...)
		close(l.changed)
		l.changed = make(chan struct{})
		l.mu.Unlock()
	}
}

// wait returns the first committed event of run runID of type typ (and
// execution execID, when not ""), waiting for it at most a minute.
func (l *eventLog) wait(t *testing.T, runID, typ, execID string) *engine.HistoryEvent {
	t.Helper()
	deadline := time.After(time.Minute)
	for {
		l.mu.Lock()
		for _, ev := range l.events {
			if ev.RunID == runID && ev.Type == typ && (execID == "" || ev.ExecutionID == execID) {
				l.mu.Unlock()
				return ev
			}
		}
		ch := l.changed
		l.mu.Unlock()
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("no %s event of run %s %s within a minute", typ, runID, execID)
		}
	}
}

// types lists the types of the run's committed events, in order.
func (l *eventLog) types(runID string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, ev := range l.events {
		if ev.RunID == runID {
			out = append(out, ev.Type)
		}
	}
	return out
}

// timerThenSignal makes S1 wait for a one-second timer and then move to
// S2, which waits for a signal "go" and completes the workflow.
func timerThenSignal(w *testWorker) {
	w.state("S1", stateHandlers{
		WaitUntil: func(iwfapi.WorkflowStateStartRequest) (iwfapi.WorkflowStateStartResponse, int) {
			return iwfapi.WorkflowStateStartResponse{CommandRequest: &iwfapi.CommandRequest{
				CommandWaitingType: ptr(iwfapi.CommandWaitingTypeAllCompleted),
				TimerCommands:      &[]iwfapi.TimerCommand{{CommandId: ptr("t"), DurationSeconds: ptr(int64(1))}},
			}}, 200
		},
		Execute: func(iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
			return decide(next("S2", nil)), 200
		},
	})
	w.state("S2", stateHandlers{
		WaitUntil: func(iwfapi.WorkflowStateStartRequest) (iwfapi.WorkflowStateStartResponse, int) {
			return iwfapi.WorkflowStateStartResponse{CommandRequest: &iwfapi.CommandRequest{
				CommandWaitingType: ptr(iwfapi.CommandWaitingTypeAllCompleted),
				SignalCommands:     &[]iwfapi.SignalCommand{{CommandId: ptr("go"), SignalChannelName: "go"}},
			}}, 200
		},
		Execute: func(req iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
			got := deref(deref(req.CommandResults).SignalResults)
			if len(got) != 1 || deref(got[0].SignalValue.Data) != `"v1"` {
				return iwfapi.WorkflowStateDecideResponse{}, 500
			}
			return decide(next(engine.GracefulCompletingState, nil)), 200
		},
	})
	w.rpc("peek", func(iwfapi.WorkflowWorkerRpcRequest) (iwfapi.WorkflowWorkerRpcResponse, int) {
		return iwfapi.WorkflowWorkerRpcResponse{}, 200
	})
}

func describeRun(t *testing.T, h *harness, id string) iwfapi.WorkflowDescribeResponse {
	t.Helper()
	d, err := h.eng.DescribeWorkflow(context.Background(), iwfapi.WorkflowDescribeRequest{WorkflowId: id})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func searchIDs(t *testing.T, h *harness, query string) []string {
	t.Helper()
	resp, err := h.eng.SearchWorkflows(context.Background(), iwfapi.WorkflowSearchRequest{Query: query, PageSize: ptr(int32(100))})
	if err != nil {
		t.Fatalf("search %q: %v", query, err)
	}
	var ids []string
	for _, e := range deref(resp.WorkflowExecutions) {
		ids = append(ids, e.WorkflowId)
	}
	slices.Sort(ids)
	return ids
}

// TestPauseHoldsCallsUntilResume: a paused run makes no worker call: its
// timer comes due and fires, and the execute call that firing makes due is
// held (the event that proves no call was made); a signal sent while
// paused is accepted and buffered; an RPC is refused with CodePaused
// without calling the worker. Describe and search show the pause. On
// resume the held call is made once, the buffered signal is consumed, and
// the workflow completes with each call made once.
func TestPauseHoldsCallsUntilResume(t *testing.T) {
	forEachStoreOpen(t, func(t *testing.T, st engine.Store) {
		ctx := context.Background()
		log := newEventLog()
		h := newHarness(t, st, log.config)
		w := h.worker
		timerThenSignal(w)
		runID := h.start("wf-pause", "S1", nil)
		log.wait(t, runID, "WaitUntilCompleted", "S1-1")
		oncall := engine.WithActor(ctx, "oncall")
		if err := h.eng.PauseWorkflow(oncall, engine.PauseRequest{WorkflowID: "wf-pause", Reason: "worker down"}); err != nil {
			t.Fatal(err)
		}
		err := h.eng.PauseWorkflow(oncall, engine.PauseRequest{WorkflowID: "wf-pause"})
		if engine.CodeOf(err) != engine.CodeInvalidArgument || !strings.Contains(err.Error(), "paused already") {
			t.Fatalf("second pause: %v", err)
		}
		if err := h.eng.SignalWorkflow(ctx, iwfapi.WorkflowSignalRequest{WorkflowId: "wf-pause", SignalChannelName: "go", SignalValue: obj(`"v1"`)}); err != nil {
			t.Fatalf("a signal to a paused run: %v", err)
		}
		_, err = h.eng.InvokeRPC(ctx, iwfapi.WorkflowRpcRequest{WorkflowId: "wf-pause", RpcName: "peek"})
		if engine.CodeOf(err) != engine.CodePaused || !strings.Contains(err.Error(), "paused by oncall") || !strings.Contains(err.Error(), "worker down") {
			t.Fatalf("RPC of a paused run: %v", err)
		}
		// The timer comes due while paused; the execute call it makes due
		// is held, not made.
		log.wait(t, runID, "TimerFired", "S1-1")
		held := log.wait(t, runID, "StateCallHeld", "S1-1")
		if !strings.Contains(string(held.Data), `"pausedBy":"run"`) || !strings.Contains(string(held.Data), `"api":"execute"`) {
			t.Fatalf("held event %s", held.Data)
		}
		h.idle()
		if n := w.count("S1.execute"); n != 0 {
			t.Fatalf("S1.execute was called %d times while paused", n)
		}
		if n := w.count("peek.rpc"); n != 0 {
			t.Fatalf("the RPC reached the worker %d times while paused", n)
		}
		d := describeRun(t, h, "wf-pause")
		if p := d.Paused; p == nil || p.Scope != "run" || deref(p.PausedBy) != "oncall" || deref(p.Reason) != "worker down" || deref(p.PausedTimestampMs) == 0 {
			t.Fatalf("describe paused = %+v", d.Paused)
		}
		if len(d.PendingStates) != 1 || d.PendingStates[0].Phase != iwfapi.PendingStateExecutionPhaseEXECUTE ||
			!deref(d.PendingStates[0].HeldByPause) || d.PendingStates[0].NextAttemptTimestampMs != nil || deref(d.PendingStates[0].Attempt) != 1 {
			t.Fatalf("describe pending = %+v", d.PendingStates)
		}
		if got := searchIDs(t, h, "IwfPaused = true"); !slices.Equal(got, []string{"wf-pause"}) {
			t.Fatalf("IwfPaused = true finds %v", got)
		}

		if err := h.eng.ResumeWorkflow(oncall, engine.ResumeRequest{WorkflowID: "wf-pause"}); err != nil {
			t.Fatal(err)
		}
		if r := h.result("wf-pause"); r.WorkflowStatus != iwfapi.WorkflowStatusCompleted {
			t.Fatalf("after resume: %s", r.WorkflowStatus)
		}
		for key, want := range map[string]int{"S1.waitUntil": 1, "S1.execute": 1, "S2.waitUntil": 1, "S2.execute": 1, "peek.rpc": 0} {
			if got := w.count(key); got != want {
				t.Errorf("%s called %d times, want %d", key, got, want)
			}
		}
		types := log.types(runID)
		order := []string{"WorkflowPaused", "ExternalInput", "TimerFired", "StateCallHeld", "WorkflowResumed", "ExecuteCompleted", "WorkflowClosed"}
		at := 0
		for _, typ := range types {
			if at < len(order) && typ == order[at] {
				at++
			}
		}
		if at != len(order) {
			t.Fatalf("history %v lacks %v in order", types, order)
		}
		if got := searchIDs(t, h, "IwfPaused = false"); !slices.Equal(got, []string{"wf-pause"}) {
			t.Fatalf("IwfPaused = false finds %v", got)
		}
	})
}

// TestPauseSurvivesRestart: a pause and its held call are in the store:
// a new engine on the store makes no call, and makes it once resumed.
func TestPauseSurvivesRestart(t *testing.T) {
	forEachStoreOpen(t, func(t *testing.T, st engine.Store) {
		ctx := context.Background()
		log := newEventLog()
		h := newHarness(t, st, log.config)
		w := h.worker
		timerThenSignal(w)
		runID := h.start("wf-restart", "S1", nil)
		log.wait(t, runID, "WaitUntilCompleted", "S1-1")
		if err := h.eng.PauseWorkflow(ctx, engine.PauseRequest{WorkflowID: "wf-restart"}); err != nil {
			t.Fatal(err)
		}
		log.wait(t, runID, "StateCallHeld", "S1-1")
		closeCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := h.eng.Close(closeCtx); err != nil {
			t.Fatal(err)
		}
		h2 := newHarnessOn(t, st, w, log.config)
		h2.idle()
		if n := w.count("S1.execute"); n != 0 {
			t.Fatalf("S1.execute called %d times by the restarted engine while paused", n)
		}
		if d := describeRun(t, h2, "wf-restart"); d.Paused == nil || len(d.PendingStates) != 1 || !deref(d.PendingStates[0].HeldByPause) {
			t.Fatalf("after restart: paused %+v, pending %+v", d.Paused, d.PendingStates)
		}
		if err := h2.eng.ResumeWorkflow(ctx, engine.ResumeRequest{WorkflowID: "wf-restart"}); err != nil {
			t.Fatal(err)
		}
		log.wait(t, runID, "ExecuteCompleted", "S1-1")
		h2.idle()
		if n := w.count("S1.execute"); n != 1 {
			t.Fatalf("S1.execute called %d times after resume, want 1", n)
		}
	})
}

// TestPausedRunStopsTimesOutAndResets: pausing stops neither the workflow
// timeout clock nor a stop, and a reset of a paused run is paused too.
func TestPausedRunStopsTimesOutAndResets(t *testing.T) {
	forEachStore(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		waitingWorkflow(h)
		short := func(r *iwfapi.WorkflowStartRequest) { r.WorkflowTimeoutSeconds = 1 }
		h.start("wf-timeout", "Wait", nil, short)
		h.start("wf-stop", "Wait", nil)
		h.start("wf-reset", "Wait", nil)
		h.idle()
		for _, id := range []string{"wf-timeout", "wf-stop", "wf-reset"} {
			if err := h.eng.PauseWorkflow(ctx, engine.PauseRequest{WorkflowID: id, Reason: "hold"}); err != nil {
				t.Fatal(err)
			}
		}
		if err := h.eng.StopWorkflow(ctx, iwfapi.WorkflowStopRequest{WorkflowId: "wf-stop", StopType: ptr(iwfapi.WorkflowStopTypeTerminate)}); err != nil {
			t.Fatalf("stop of a paused run: %v", err)
		}
		if s := h.status("wf-stop"); s != iwfapi.WorkflowStatusTerminated {
			t.Fatalf("stopped paused run is %s", s)
		}
		if r := h.result("wf-timeout"); r.WorkflowStatus != iwfapi.WorkflowStatusTimeout {
			t.Fatalf("paused run with a 1 s timeout ended %s, want TIMEOUT", r.WorkflowStatus)
		}
		reset, err := h.eng.ResetWorkflow(ctx, iwfapi.WorkflowResetRequest{WorkflowId: "wf-reset", ResetType: iwfapi.WorkflowResetTypeBeginning})
		if err != nil {
			t.Fatal(err)
		}
		d := describeRun(t, h, "wf-reset")
		if d.WorkflowRunId != reset.WorkflowRunId || d.Paused == nil || d.Paused.Scope != "run" || deref(d.Paused.Reason) != "hold" {
			t.Fatalf("the reset run: %+v paused %+v", d.WorkflowRunId, d.Paused)
		}
		h.idle()
		if n := h.worker.count("Wait.waitUntil"); n != 3 {
			t.Fatalf("Wait.waitUntil called %d times: the reset run called its worker while paused", n)
		}
		if err := h.eng.ResumeWorkflow(ctx, engine.ResumeRequest{WorkflowID: "wf-reset"}); err != nil {
			t.Fatal(err)
		}
		if err := h.eng.SignalWorkflow(ctx, iwfapi.WorkflowSignalRequest{WorkflowId: "wf-reset", SignalChannelName: "go"}); err != nil {
			t.Fatal(err)
		}
		if r := h.result("wf-reset"); r.WorkflowStatus != iwfapi.WorkflowStatusCompleted {
			t.Fatalf("the resumed reset run ended %s", r.WorkflowStatus)
		}
	})
}

// TestPauseScopeType: a paused workflow type holds the calls of its runs,
// those running and those that start while it is paused, with one row
// and no write per run; other types go on. Resuming it makes the held
// calls due at its pace, each once.
func TestPauseScopeType(t *testing.T) {
	forEachStoreOpen(t, func(t *testing.T, st engine.Store) {
		ctx := context.Background()
		log := newEventLog()
		h := newHarness(t, st, log.config)
		waitingWorkflow(h)
		before := h.start("held-1", "Wait", nil, func(r *iwfapi.WorkflowStartRequest) { r.IwfWorkflowType = "Held" })
		h.idle()
		oncall := engine.WithActor(ctx, "oncall")
		info, err := h.eng.SetPause(oncall, engine.ScopePauseRequest{Scope: engine.PauseScope{WorkflowType: "Held"}, Reason: "bad deploy"})
		if err != nil {
			t.Fatal(err)
		}
		if info.By != "oncall" || info.WorkflowType != "Held" {
			t.Fatalf("pause info %+v", info)
		}
		if _, err := h.eng.SetPause(oncall, engine.ScopePauseRequest{Scope: engine.PauseScope{WorkflowType: "Held"}}); engine.CodeOf(err) != engine.CodeInvalidArgument {
			t.Fatalf("second pause of the type: %v", err)
		}
		// A run that starts now starts paused: its first call is held.
		after := h.start("held-2", "Wait", nil, func(r *iwfapi.WorkflowStartRequest) { r.IwfWorkflowType = "Held" })
		log.wait(t, after, "StateCallHeld", "Wait-1")
		// The running one's next call is held too.
		if err := h.eng.SignalWorkflow(ctx, iwfapi.WorkflowSignalRequest{WorkflowId: "held-1", SignalChannelName: "go"}); err != nil {
			t.Fatal(err)
		}
		log.wait(t, before, "StateCallHeld", "Wait-1")
		// Another type goes on.
		h.start("free-1", "Wait", nil, func(r *iwfapi.WorkflowStartRequest) { r.IwfWorkflowType = "Free" })
		if err := h.eng.SignalWorkflow(ctx, iwfapi.WorkflowSignalRequest{WorkflowId: "free-1", SignalChannelName: "go"}); err != nil {
			t.Fatal(err)
		}
		if r := h.result("free-1"); r.WorkflowStatus != iwfapi.WorkflowStatusCompleted {
			t.Fatalf("a run of another type: %s", r.WorkflowStatus)
		}
		h.idle()
		if got, want := h.worker.count("Wait.waitUntil"), 2; got != want { // held-1 and free-1
			t.Fatalf("Wait.waitUntil called %d times, want %d", got, want)
		}
		if got := h.worker.count("Wait.execute"); got != 1 { // free-1
			t.Fatalf("Wait.execute called %d times, want 1", got)
		}
		list, err := h.eng.ListPauses(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != 1 || list[0].WorkflowType != "Held" || list[0].Held != 2 || list[0].Reason != "bad deploy" {
			t.Fatalf("list %+v", list)
		}
		d := describeRun(t, h, "held-2")
		if d.Paused == nil || d.Paused.Scope != "type:Held" || deref(d.Paused.PausedBy) != "oncall" || !deref(d.PendingStates[0].HeldByPause) {
			t.Fatalf("describe: paused %+v pending %+v", d.Paused, d.PendingStates)
		}
		if _, err := h.eng.InvokeRPC(ctx, iwfapi.WorkflowRpcRequest{WorkflowId: "held-1", RpcName: "r"}); engine.CodeOf(err) != engine.CodePaused ||
			!strings.Contains(err.Error(), "workflow type Held") {
			t.Fatalf("RPC of a run of a paused type: %v", err)
		}
		if _, err := h.eng.DeletePause(oncall, engine.ScopeResumeRequest{Scope: engine.PauseScope{WorkflowType: "Held"}, RPS: 100000}); engine.CodeOf(err) != engine.CodeInvalidArgument {
			t.Fatalf("resume at 100000/s: %v", err)
		}
		t0 := time.Now()
		res, err := h.eng.DeletePause(oncall, engine.ScopeResumeRequest{Scope: engine.PauseScope{WorkflowType: "Held"}, RPS: 4})
		if err != nil {
			t.Fatal(err)
		}
		if res.Resumed != 2 || res.LastDue.Sub(t0) < 250*time.Millisecond {
			t.Fatalf("resumed %+v at %s: want 2 calls, the second 250 ms after the first", res, t0)
		}
		if r := h.result("held-1"); r.WorkflowStatus != iwfapi.WorkflowStatusCompleted {
			t.Fatalf("held-1 after resume: %s", r.WorkflowStatus)
		}
		// Paced at 4 a second, the oldest held call first: held-2's
		// waitUntil at once, held-1's execute 250 ms later, not before.
		log.wait(t, after, "WaitUntilCompleted", "Wait-1")
		if done := log.wait(t, before, "ExecuteCompleted", "Wait-1"); done.At.Sub(t0) < 249*time.Millisecond {
			t.Errorf("the second held call was made %s after the resume; at 4 a second, want 250 ms at least", done.At.Sub(t0))
		}
		h.idle()
		if got := h.worker.count("Wait.waitUntil"); got != 3 {
			t.Fatalf("Wait.waitUntil called %d times after resume, want 3", got)
		}
		if _, err := h.eng.DeletePause(oncall, engine.ScopeResumeRequest{Scope: engine.PauseScope{WorkflowType: "Held"}}); engine.CodeOf(err) != engine.CodeInvalidArgument {
			t.Fatalf("resume of a type not paused: %v", err)
		}
	})
}

// TestPauseScopeHost: a paused worker host holds the calls of the runs
// that call it, whichever node they run on (PostgreSQL: a second node
// hears of the pause); runs of other hosts go on.
func TestPauseScopeHost(t *testing.T) {
	forEachStoreOpen(t, func(t *testing.T, st engine.Store) {
		ctx := context.Background()
		log := newEventLog()
		h := newHarness(t, st, log.config)
		waitingWorkflow(h)
		green := newTestWorker(t)
		green.state("Wait", h.worker.handlers("Wait", "none"))
		other := h // where runs start: another node on PostgreSQL
		if _, shared := st.(engine.ChangeFeed); shared {
			other = newHarnessOn(t, st, h.worker, log.config)
		}
		host := strings.TrimPrefix(h.worker.srv.URL, "http://")
		if _, err := h.eng.SetPause(ctx, engine.ScopePauseRequest{Scope: engine.PauseScope{WorkerHost: strings.ToUpper(host)}}); err != nil {
			t.Fatal(err)
		}
		for _, bad := range []engine.PauseScope{{}, {WorkerHost: "no-port"}, {WorkflowType: "T", WorkerHost: host}} {
			if _, err := h.eng.SetPause(ctx, engine.ScopePauseRequest{Scope: bad}); engine.CodeOf(err) != engine.CodeInvalidArgument {
				t.Fatalf("pause of %+v: %v", bad, err)
			}
		}
		onGreen := func(r *iwfapi.WorkflowStartRequest) { r.IwfWorkerUrl = green.srv.URL }
		// The other node holds the pause once it heard of it (at once
		// through the change feed): start runs there until one is held.
		var blueRun string
		for i := 0; blueRun == ""; i++ {
			if i > 100 {
				t.Fatal("the pause of the host never held on the other node")
			}
			calls := h.worker.count("Wait.waitUntil")
			runID := other.start(fmt.Sprintf("blue-%d", i), "Wait", nil)
			other.idle()
			if h.worker.count("Wait.waitUntil") == calls {
				blueRun = runID
			}
		}
		log.wait(t, blueRun, "StateCallHeld", "Wait-1")
		before := h.worker.count("Wait.waitUntil")
		other.start("green-1", "Wait", nil, onGreen)
		if err := other.eng.SignalWorkflow(ctx, iwfapi.WorkflowSignalRequest{WorkflowId: "green-1", SignalChannelName: "go"}); err != nil {
			t.Fatal(err)
		}
		if r := other.result("green-1"); r.WorkflowStatus != iwfapi.WorkflowStatusCompleted {
			t.Fatalf("a run of another host: %s", r.WorkflowStatus)
		}
		if n := h.worker.count("Wait.waitUntil"); n != before {
			t.Fatalf("the paused host was called %d times", n-before)
		}
		if _, err := other.eng.DeletePause(ctx, engine.ScopeResumeRequest{Scope: engine.PauseScope{WorkerHost: host}}); err != nil {
			t.Fatal(err)
		}
		log.wait(t, blueRun, "WaitUntilCompleted", "Wait-1")
	})
}

// TestBatchPauseResume: PAUSE and RESUME batches pause and resume each
// matching run once, with progress; IwfPaused finds the paused ones.
func TestBatchPauseResume(t *testing.T) {
	forEachStore(t, func(t *testing.T, h *harness) {
		ctx := engine.WithActor(context.Background(), "oncall")
		waitingWorkflow(h)
		ids := startTyped(h, "Fleet", 5)
		h.idle()
		if err := h.eng.ResumeWorkflow(ctx, engine.ResumeRequest{WorkflowID: ids[0]}); engine.CodeOf(err) != engine.CodeInvalidArgument ||
			!strings.Contains(err.Error(), "not paused") {
			t.Fatalf("resume of a run not paused: %v", err)
		}
		resp, err := h.eng.StartBatch(ctx, engine.BatchRequest{Query: "IwfWorkflowType = 'Fleet'", Operation: engine.BatchOpPause, Reason: "incident 7", RPS: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if d := batchDone(h, resp.ID); d.Batch.Done != 5 || d.Batch.Failed != 0 {
			t.Fatalf("pause batch %+v", d.Batch)
		}
		if got := searchIDs(t, h, "IwfPaused = true"); !slices.Equal(got, ids) {
			t.Fatalf("IwfPaused = true finds %v, want %v", got, ids)
		}
		for _, id := range ids {
			if err := h.eng.SignalWorkflow(ctx, iwfapi.WorkflowSignalRequest{WorkflowId: id, SignalChannelName: "go"}); err != nil {
				t.Fatal(err)
			}
		}
		h.idle()
		if n := h.worker.count("Wait.execute"); n != 0 {
			t.Fatalf("execute called %d times while the fleet is paused", n)
		}
		if d := describeRun(t, h, ids[0]); d.Paused == nil || deref(d.Paused.Reason) != "incident 7" || deref(d.Paused.PausedBy) != "oncall" {
			t.Fatalf("describe paused %+v", d.Paused)
		}
		resp, err = h.eng.StartBatch(ctx, engine.BatchRequest{Query: "IwfPaused = true", Operation: engine.BatchOpResume, RPS: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if d := batchDone(h, resp.ID); d.Batch.Done != 5 || d.Batch.Failed != 0 {
			t.Fatalf("resume batch %+v", d.Batch)
		}
		for _, id := range ids {
			if r := h.result(id); r.WorkflowStatus != iwfapi.WorkflowStatusCompleted {
				t.Fatalf("%s: %s", id, r.WorkflowStatus)
			}
		}
		if n := h.worker.count("Wait.execute"); n != 5 {
			t.Fatalf("execute called %d times, want 5", n)
		}
	})
}

// TestSetWorkerURLBetweenCalls: a SET_WORKER_URL batch re-routes a run
// while one of its calls is in flight to the old URL: that call's answer
// is applied, the next calls go to the new URL, and the history says who
// re-routed it and why. A URL the policy refuses is a 400.
func TestSetWorkerURLBetweenCalls(t *testing.T) {
	forEachStoreWith(t, func(c *engine.Config) {
		c.CheckWorkerURL = func(_ context.Context, u string) error {
			if strings.Contains(u, "forbidden") {
				return fmt.Errorf("worker URL %s is not allowed", u)
			}
			return nil
		}
	}, func(t *testing.T, h *harness) {
		ctx := engine.WithActor(context.Background(), "oncall")
		blue, green := h.worker, newTestWorker(t)
		inFlight, release := make(chan struct{}), make(chan struct{})
		blue.state("S1", stateHandlers{Execute: func(iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
			close(inFlight)
			<-release
			return decide(next("S2", nil, skipWaitUntil)), 200
		}})
		for _, w := range []*testWorker{blue, green} {
			w.state("S2", stateHandlers{Execute: func(iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
				return decide(next(engine.GracefulCompletingState, nil)), 200
			}})
		}
		h.start("wf-route", "S1", nil, func(r *iwfapi.WorkflowStartRequest) {
			r.StateOptions = &iwfapi.WorkflowStateOptions{SkipWaitUntil: ptr(true)}
		})
		<-inFlight
		if _, err := h.eng.StartBatch(ctx, engine.BatchRequest{Query: "WorkflowId = 'wf-route'", Operation: engine.BatchOpSetWorkerURL,
			WorkerURL: "http://forbidden.example:1"}); engine.CodeOf(err) != engine.CodeInvalidArgument {
			t.Fatalf("re-route to a refused URL: %v", err)
		}
		if _, err := h.eng.StartBatch(ctx, engine.BatchRequest{Query: "WorkflowId = 'wf-route'", Operation: engine.BatchOpSetWorkerURL}); engine.CodeOf(err) != engine.CodeInvalidArgument {
			t.Fatalf("re-route without a URL: %v", err)
		}
		resp, err := h.eng.StartBatch(ctx, engine.BatchRequest{Query: "WorkflowId = 'wf-route'", Operation: engine.BatchOpSetWorkerURL,
			WorkerURL: green.srv.URL + "/", Reason: "blue to green"})
		if err != nil {
			t.Fatal(err)
		}
		if d := batchDone(h, resp.ID); d.Batch.Done != 1 || d.Batch.WorkerURL != green.srv.URL+"/" {
			t.Fatalf("batch %+v failures %+v", d.Batch, d.Failures)
		}
		if d := describeRun(t, h, "wf-route"); d.WorkerUrl != green.srv.URL {
			t.Fatalf("worker URL after the batch: %s", d.WorkerUrl)
		}
		close(release) // the call to blue answers after the re-route
		if r := h.result("wf-route"); r.WorkflowStatus != iwfapi.WorkflowStatusCompleted {
			t.Fatalf("re-routed run: %s", r.WorkflowStatus)
		}
		for key, want := range map[string][2]int{"S1.execute": {1, 0}, "S2.execute": {0, 1}} {
			if b, g := blue.count(key), green.count(key); b != want[0] || g != want[1] {
				t.Errorf("%s: blue %d, green %d; want %v", key, b, g, want)
			}
		}
		hist, err := h.eng.WorkflowHistory(ctx, iwfapi.WorkflowHistoryRequest{WorkflowId: "wf-route"})
		if err != nil {
			t.Fatal(err)
		}
		var changed []map[string]any
		for _, ev := range hist.Events {
			if ev.EventType == "WorkerURLChanged" {
				changed = append(changed, deref(ev.Data))
			}
		}
		if len(changed) != 1 || changed[0]["actor"] != "oncall" || changed[0]["reason"] != "blue to green" ||
			changed[0]["from"] != blue.srv.URL || changed[0]["to"] != green.srv.URL {
			t.Fatalf("WorkerURLChanged events %v", changed)
		}
	})
}

// pauseListFails is a store whose reads of the paused scopes fail.
type pauseListFails struct{ engine.Store }

func (s pauseListFails) View(ctx context.Context, fn func(ctx context.Context, tx engine.ReadTx) error) error {
	return s.Store.View(ctx, func(ctx context.Context, tx engine.ReadTx) error {
		return fn(ctx, pauseListFailsTx{tx})
	})
}

type pauseListFailsTx struct{ engine.ReadTx }

func (pauseListFailsTx) PauseList(context.Context) ([]*engine.Pause, error) {
	return nil, errors.New("the pauses table cannot be read")
}

// TestStartNeedsThePausedScopes: a node that cannot read the paused scopes
// does not start, so it never claims a call an operator has paused.
func TestStartNeedsThePausedScopes(t *testing.T) {
	forEachStoreOpen(t, func(t *testing.T, st engine.Store) {
		logger := zerolog.Nop()
		eng, err := engine.New(pauseListFails{st}, engine.Config{WorkerClient: workerclient.New(nil), Logger: &logger})
		if err != nil {
			t.Fatal(err)
		}
		err = eng.Start(context.Background())
		if err == nil || !strings.Contains(err.Error(), "paused scopes") {
			eng.Close(context.Background())
			t.Fatalf("Start with the paused scopes unreadable: %v, want an error naming them", err)
		}
	})
}
