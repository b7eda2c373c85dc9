package engine_test

import (
	"bufio"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/store/postgres"
	"github.com/iwf-server/iwf-server/internal/store/postgres/pgtest"
)

// noFallback makes a node rely on the change feed alone: within a test's
// time its long polls never re-read the store on their own and its poller
// never runs again after the first claim at start (it also runs at the
// lease renewal interval, a third of LeaseDuration).
func noFallback(c *engine.Config) {
	c.LongPollRecheck = time.Hour
	c.PollInterval = time.Hour
	c.LeaseDuration = time.Hour
}

// twoNodes starts two engines on one PostgreSQL database, without the
// fallbacks that would hide a missing change feed, sharing one worker. It
// returns once each node's listener receives the other's announcements:
// what is announced before a node LISTENs is lost.
func twoNodes(t *testing.T) (a, b *harness, w *testWorker) {
	t.Helper()
	stores := pgtest.NewStores(t, 2)
	w = newTestWorker(t)
	a, b = newHarnessOn(t, stores[0], w, noFallback), newHarnessOn(t, stores[1], w, noFallback)
	listening(t, a, stores[1])
	listening(t, b, stores[0])
	return a, b, w
}

// listening announces probes through the other node's store until h's
// engine has received one.
func listening(t *testing.T, h *harness, other *postgres.Store) {
	t.Helper()
	i := 0
	h.eventually("the node to listen", func() bool {
		i++
		other.PublishChanges(engine.Changes{Keys: []string{fmt.Sprintf("probe-%d", i)}})
		v := gauge(t, h, `iwf_change_notices_received_total{kind="runs"}`)
		return v != "" && v != "0"
	})
}

// gauge reads one metric of an engine.
func gauge(t *testing.T, h *harness, name string) string {
	t.Helper()
	var b strings.Builder
	if err := h.eng.WriteMetrics(&b); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(strings.NewReader(b.String()))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			return v
		}
	}
	return ""
}

// waitsForGo is a state whose waitUntil waits for a signal on "go" and
// whose execute completes the workflow.
func waitsForGo() stateHandlers {
	return stateHandlers{
		WaitUntil: func(req iwfapi.WorkflowStateStartRequest) (iwfapi.WorkflowStateStartResponse, int) {
			return iwfapi.WorkflowStateStartResponse{CommandRequest: &iwfapi.CommandRequest{
				CommandWaitingType: ptr(iwfapi.CommandWaitingTypeAllCompleted),
				SignalCommands:     &[]iwfapi.SignalCommand{{SignalChannelName: "go"}},
			}}, 200
		},
		Execute: func(req iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
			return decide(next(engine.GracefulCompletingState, obj(`"done"`))), 200
		},
	}
}

// TestChangeFeedWakesLongPollOnOtherNode: a getWithWait waiting on node A
// returns as soon as node B completes the workflow, told through the
// store's change feed (node A's long polls never re-read the store by
// themselves here, so without the feed the call would time out).
func TestChangeFeedWakesLongPollOnOtherNode(t *testing.T) {
	a, b, w := twoNodes(t)
	w.state("S1", waitsForGo())
	a.start("wf-feed", "S1", nil)
	a.idle() // node A committed the waitUntil answer: the run waits for the signal

	type answer struct {
		resp iwfapi.WorkflowGetResponse
		err  error
	}
	got := make(chan answer, 1)
	go func() {
		resp, err := a.eng.GetWorkflowWithWait(context.Background(), iwfapi.WorkflowGetRequest{WorkflowId: "wf-feed"})
		got <- answer{resp, err}
	}()
	a.eventually("node A's long poll to wait", func() bool { return gauge(t, a, "iwf_long_polls_waiting") == "1" })

	if err := b.eng.SignalWorkflow(context.Background(), iwfapi.WorkflowSignalRequest{WorkflowId: "wf-feed", SignalChannelName: "go"}); err != nil {
		t.Fatal(err)
	}
	r := <-got // MaxWait is 20 s: a lost wake-up fails with a long-poll timeout
	if r.err != nil {
		t.Fatalf("getWithWait on node A: %v", r.err)
	}
	if r.resp.WorkflowStatus != iwfapi.WorkflowStatusCompleted {
		t.Fatalf("status %s", r.resp.WorkflowStatus)
	}
	if n := w.count("S1.execute"); n != 1 {
		t.Fatalf("execute called %d times", n)
	}
}

// TestChangeFeedHandsWorkOver: a node shutting down hands its tasks back
// and says so through the change feed; the other node claims them at once
// (it would otherwise wait for its next poll, an hour here) and runs the
// workflow to its end.
func TestChangeFeedHandsWorkOver(t *testing.T) {
	a, b, w := twoNodes(t)
	w.state("S1", stateHandlers{
		WaitUntil: func(req iwfapi.WorkflowStateStartRequest) (iwfapi.WorkflowStateStartResponse, int) {
			return iwfapi.WorkflowStateStartResponse{CommandRequest: &iwfapi.CommandRequest{
				CommandWaitingType: ptr(iwfapi.CommandWaitingTypeAllCompleted),
				TimerCommands:      &[]iwfapi.TimerCommand{{CommandId: ptr("t"), DurationSeconds: ptr(int64(1))}},
			}}, 200
		},
		Execute: func(req iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
			return decide(next(engine.GracefulCompletingState, obj(`"done"`))), 200
		},
	})
	b.start("wf-handover", "S1", nil)
	b.idle() // node B holds the timer task in memory
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := b.eng.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := a.result("wf-handover"); got.WorkflowStatus != iwfapi.WorkflowStatusCompleted {
		t.Fatalf("status %s", got.WorkflowStatus)
	}
	a.eventually("node A to count the hand-over notice", func() bool {
		return gauge(t, a, `iwf_change_notices_received_total{kind="tasks"}`) == "1"
	})
}

// silentStore is a PostgreSQL store whose node tells the other nodes
// nothing: its announcements are lost, as they are for a node whose
// notices never reach a listener.
type silentStore struct{ *postgres.Store }

// PublishChanges drops c.
func (silentStore) PublishChanges(engine.Changes) {}

// TestLongPollFollowsTheCurrentRunPastAStaleMark: node A's own commits
// leave the workflow's run marked open on A; node B then resets the
// workflow and completes the new run, and A hears nothing of it. A
// getWithWait on A that names no run answers its first turn from the
// stale mark, but re-reads the workflow's current run at its re-check, and
// answers the new run's completion, not the reset run's termination.
func TestLongPollFollowsTheCurrentRunPastAStaleMark(t *testing.T) {
	stores := pgtest.NewStores(t, 2)
	w := newTestWorker(t)
	a := newHarnessOn(t, stores[0], w, func(c *engine.Config) { c.LongPollRecheck = 20 * time.Millisecond })
	b := newHarnessOn(t, silentStore{stores[1]}, w, noFallback)
	w.state("S1", waitsForGo())
	ctx := context.Background()
	base := a.start("wf-stale", "S1", nil)
	a.idle() // node A committed the waitUntil answer: its mark says the run is open

	reset, err := b.eng.ResetWorkflow(ctx, iwfapi.WorkflowResetRequest{WorkflowId: "wf-stale", ResetType: iwfapi.WorkflowResetTypeBeginning})
	if err != nil {
		t.Fatal(err)
	}
	b.idle() // the new run waits for the signal, on node B
	if err := b.eng.SignalWorkflow(ctx, iwfapi.WorkflowSignalRequest{WorkflowId: "wf-stale", SignalChannelName: "go"}); err != nil {
		t.Fatal(err)
	}
	b.idle()

	got, err := a.eng.GetWorkflowWithWait(ctx, iwfapi.WorkflowGetRequest{WorkflowId: "wf-stale"})
	if err != nil {
		t.Fatal(err)
	}
	if got.WorkflowRunId != reset.WorkflowRunId || got.WorkflowStatus != iwfapi.WorkflowStatusCompleted {
		t.Fatalf("getWithWait on node A: run %s %s; want the reset run %s COMPLETED (the base run was %s)",
			got.WorkflowRunId, got.WorkflowStatus, reset.WorkflowRunId, base)
	}
}
