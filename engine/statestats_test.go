package engine_test

import (
	"context"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine"
)

// phases is a StateUse's phases as "PHASE=count".
func phases(u engine.StateUse) []string {
	var out []string
	for _, p := range u.Phases {
		out = append(out, fmt.Sprintf("%s=%d", p.Phase, p.Count))
	}
	return out
}

// TestStateStats: for a workflow type, the live executions of its open
// runs by state and phase — waiting for commands (and for what), a call
// pending, a call retrying after a failure — with the oldest of each; a
// closed run counts for nothing, another type neither, and a bound on the
// runs read says the answer is for the oldest.
func TestStateStats(t *testing.T) {
	forEachStoreWith(t, func(c *engine.Config) { c.StateMetricsRuns = 100 }, func(t *testing.T, h *harness) {
		h.worker.state("Wait", stateHandlers{WaitUntil: func(iwfapi.WorkflowStateStartRequest) (iwfapi.WorkflowStateStartResponse, int) {
			return iwfapi.WorkflowStateStartResponse{CommandRequest: &iwfapi.CommandRequest{
				CommandWaitingType:        ptr(iwfapi.CommandWaitingTypeAnyCompleted),
				SignalCommands:            &[]iwfapi.SignalCommand{{SignalChannelName: "go"}},
				InterStateChannelCommands: &[]iwfapi.InterStateChannelCommand{{ChannelName: "ready"}},
			}}, 200
		}})
		h.worker.state("Fail", stateHandlers{WaitUntil: func(iwfapi.WorkflowStateStartRequest) (iwfapi.WorkflowStateStartResponse, int) {
			return iwfapi.WorkflowStateStartResponse{}, 500
		}})
		release := make(chan struct{})
		arrived := make(chan string, 1)
		h.worker.state("Block", stateHandlers{Execute: func(req iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
			arrived <- req.Context.WorkflowId
			<-release
			return decide(next("_SYS_GRACEFUL_COMPLETING_WORKFLOW", nil)), 200
		}})
		h.worker.state("Done", completes(make(chan string, 1)))
		typed := func(r *iwfapi.WorkflowStartRequest) { r.IwfWorkflowType = "Stats" }
		var waitRuns []string
		for i := range 3 {
			waitRuns = append(waitRuns, h.start(fmt.Sprint("wait-", i), "Wait", nil, typed))
			h.idle() // one after the other: wait-0 is the oldest
		}
		h.start("fail", "Fail", nil, typed, func(r *iwfapi.WorkflowStartRequest) {
			r.WorkflowTimeoutSeconds = 0 // a deadline would end the retries before the hour
			r.StateOptions = &iwfapi.WorkflowStateOptions{WaitUntilApiRetryPolicy: &iwfapi.RetryPolicy{
				InitialIntervalSeconds: ptr(int32(3600)), MaximumIntervalSeconds: ptr(int32(3600))}}
		})
		h.start("done", "Done", nil, typed, skipStart)
		h.start("other-type", "Wait", nil)
		h.idle() // fail's second attempt is an hour away; done completed
		h.start("block", "Block", nil, typed, skipStart)
		<-arrived
		defer close(release)

		ans, err := h.eng.StateStats(context.Background(), engine.StateStatsRequest{WorkflowType: "Stats"})
		if err != nil {
			t.Fatal(err)
		}
		if ans.Runs != 5 || ans.Truncated || ans.WaitingRead != 3 || ans.WaitingTruncated {
			t.Fatalf("answer: %+v", ans)
		}
		got := map[string][]string{}
		for _, u := range ans.States {
			got[u.StateID] = phases(u)
		}
		want := map[string][]string{"Block": {"EXECUTE=1"}, "Fail": {"RETRYING=1"}, "Wait": {"WAITING_COMMANDS=3"}}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("states: %v, want %v", got, want)
		}
		wait := ans.States[2]
		if wait.Executions != 3 || wait.Runs != 3 {
			t.Fatalf("Wait: %+v", wait)
		}
		if o := wait.Phases[0].Oldest; o.WorkflowID != "wait-0" || o.RunID != waitRuns[0] || o.ExecutionID != "Wait-1" || o.Since.IsZero() {
			t.Fatalf("the oldest waiting: %+v", o)
		}
		wantWaits := []engine.CommandWait{{Kind: "INTERNAL_CHANNEL", Name: "ready", Executions: 3}, {Kind: "SIGNAL", Name: "go", Executions: 3}}
		if !reflect.DeepEqual(wait.Waits, wantWaits) {
			t.Fatalf("what Wait waits for: %+v", wait.Waits)
		}

		// The bound: the two oldest runs.
		ans, err = h.eng.StateStats(context.Background(), engine.StateStatsRequest{WorkflowType: "Stats", MaxRuns: 2})
		if err != nil {
			t.Fatal(err)
		}
		if ans.Runs != 2 || !ans.Truncated {
			t.Fatalf("bounded answer: %+v", ans)
		}

		for _, bad := range []engine.StateStatsRequest{{}, {WorkflowType: "T", MaxRuns: -1}, {WorkflowType: "T\x00"}} {
			if _, err := h.eng.StateStats(context.Background(), bad); engine.CodeOf(err) != engine.CodeInvalidArgument {
				t.Errorf("StateStats %+v: %v, want an invalid argument", bad, err)
			}
		}

		// The gauge, across types.
		m := h.metrics()
		for _, line := range []string{
			`iwf_state_executions{type="Stats",state="Block",phase="EXECUTE"} 1`,
			`iwf_state_executions{type="Stats",state="Fail",phase="RETRYING"} 1`,
			`iwf_state_executions{type="TestWorkflow",state="Wait",phase="WAITING_COMMANDS"} 1`,
			`iwf_state_executions_truncated 0`,
		} {
			if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(line) + `$`).MatchString(m) {
				t.Errorf("metrics lack %s:\n%s", line, m)
			}
		}
		if !regexp.MustCompile(`(?m)^iwf_state_executions_runs [67]$`).MatchString(m) {
			t.Errorf("iwf_state_executions_runs:\n%s", m)
		}
	})
}

// TestStateStatsPaused: an execution whose waitUntil or execute call a
// pause holds counts as PAUSED, whether its run, its workflow type or its
// worker host is paused, and is back in EXECUTE once the pause ends;
// executions waiting for commands stay WAITING_COMMANDS however paused.
// A call is held when the engine parks it (a StateCallHeld event), which
// is what the test waits for.
func TestStateStatsPaused(t *testing.T) {
	forEachStoreOpen(t, func(t *testing.T, st engine.Store) {
		ctx := context.Background()
		log := newEventLog()
		h := newHarness(t, st, log.config, func(c *engine.Config) { c.StateMetricsRuns = 100 })
		release := make(chan struct{})
		defer close(release)
		arrived := make(chan string, 8)
		// Wait waits for a signal "go"; its execute call stays at the
		// worker until the test ends.
		wait := stateHandlers{
			WaitUntil: func(iwfapi.WorkflowStateStartRequest) (iwfapi.WorkflowStateStartResponse, int) {
				return iwfapi.WorkflowStateStartResponse{CommandRequest: &iwfapi.CommandRequest{
					CommandWaitingType: ptr(iwfapi.CommandWaitingTypeAllCompleted),
					SignalCommands:     &[]iwfapi.SignalCommand{{SignalChannelName: "go"}},
				}}, 200
			},
			Execute: func(req iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
				arrived <- req.Context.WorkflowId
				<-release
				return decide(next(engine.GracefulCompletingState, nil)), 200
			},
		}
		h.worker.state("Wait", wait)
		green := newTestWorker(t)
		green.state("Wait", wait)

		start := func(id, typ string, mod ...func(*iwfapi.WorkflowStartRequest)) string {
			t.Helper()
			runID := h.start(id, "Wait", nil, append(mod, func(r *iwfapi.WorkflowStartRequest) { r.IwfWorkflowType = typ })...)
			log.wait(t, runID, "WaitUntilCompleted", "Wait-1")
			return runID
		}
		signal := func(id string) {
			t.Helper()
			if err := h.eng.SignalWorkflow(ctx, iwfapi.WorkflowSignalRequest{WorkflowId: id, SignalChannelName: "go"}); err != nil {
				t.Fatal(err)
			}
		}
		stats := func(typ string) engine.StateStatsAnswer {
			t.Helper()
			ans, err := h.eng.StateStats(ctx, engine.StateStatsRequest{WorkflowType: typ})
			if err != nil {
				t.Fatal(err)
			}
			return ans
		}
		check := func(typ string, want ...string) {
			t.Helper()
			ans := stats(typ)
			if len(ans.States) != 1 || ans.States[0].StateID != "Wait" || !reflect.DeepEqual(phases(ans.States[0]), want) {
				t.Fatalf("%s: %+v, want Wait %v", typ, ans.States, want)
			}
		}
		arrive := func(ids ...string) {
			t.Helper()
			got := map[string]bool{}
			for range ids {
				got[<-arrived] = true
			}
			for _, id := range ids {
				if !got[id] {
					t.Fatalf("the execute calls of %v reached the worker, want %v", got, ids)
				}
			}
		}

		var runs []string
		for i := range 3 {
			runs = append(runs, start(fmt.Sprint("p-", i), "Paused"))
		}
		check("Paused", "WAITING_COMMANDS=3")

		// A run paused while it waits for its signal still waits; its
		// execute call, due once signalled, is held.
		if err := h.eng.PauseWorkflow(ctx, engine.PauseRequest{WorkflowID: "p-0"}); err != nil {
			t.Fatal(err)
		}
		check("Paused", "WAITING_COMMANDS=3")
		signal("p-0")
		log.wait(t, runs[0], "StateCallHeld", "Wait-1")
		check("Paused", "WAITING_COMMANDS=2", "PAUSED=1")
		if o := stats("Paused").States[0].Phases[1].Oldest; o.WorkflowID != "p-0" || o.RunID != runs[0] || o.ExecutionID != "Wait-1" || o.Since.IsZero() {
			t.Fatalf("the oldest paused: %+v", o)
		}

		// The type paused: the others' calls are held as they come due.
		if _, err := h.eng.SetPause(ctx, engine.ScopePauseRequest{Scope: engine.PauseScope{WorkflowType: "Paused"}}); err != nil {
			t.Fatal(err)
		}
		check("Paused", "WAITING_COMMANDS=2", "PAUSED=1")
		signal("p-1")
		signal("p-2")
		log.wait(t, runs[1], "StateCallHeld", "Wait-1")
		log.wait(t, runs[2], "StateCallHeld", "Wait-1")
		check("Paused", "PAUSED=3")
		m := h.metrics()
		if line := `iwf_state_executions{type="Paused",state="Wait",phase="PAUSED"} 3`; !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(line) + `$`).MatchString(m) {
			t.Errorf("metrics lack %s:\n%s", line, m)
		}

		// The type resumed: its held calls are made (and stay at the
		// worker: EXECUTE); the run paused by itself is still held.
		if _, err := h.eng.DeletePause(ctx, engine.ScopeResumeRequest{Scope: engine.PauseScope{WorkflowType: "Paused"}, RPS: 1000}); err != nil {
			t.Fatal(err)
		}
		arrive("p-1", "p-2")
		check("Paused", "EXECUTE=2", "PAUSED=1")
		if err := h.eng.ResumeWorkflow(ctx, engine.ResumeRequest{WorkflowID: "p-0"}); err != nil {
			t.Fatal(err)
		}
		arrive("p-0")
		check("Paused", "EXECUTE=3")

		// A worker host paused: the same, for the runs that call it.
		onGreen := func(r *iwfapi.WorkflowStartRequest) { r.IwfWorkerUrl = green.srv.URL }
		q0 := start("q-0", "Hosted", onGreen)
		start("q-1", "Hosted", onGreen)
		host := strings.TrimPrefix(green.srv.URL, "http://")
		if _, err := h.eng.SetPause(ctx, engine.ScopePauseRequest{Scope: engine.PauseScope{WorkerHost: host}}); err != nil {
			t.Fatal(err)
		}
		check("Hosted", "WAITING_COMMANDS=2")
		signal("q-0")
		log.wait(t, q0, "StateCallHeld", "Wait-1")
		check("Hosted", "WAITING_COMMANDS=1", "PAUSED=1")
		check("Paused", "EXECUTE=3") // another host
		if _, err := h.eng.DeletePause(ctx, engine.ScopeResumeRequest{Scope: engine.PauseScope{WorkerHost: host}, RPS: 1000}); err != nil {
			t.Fatal(err)
		}
		arrive("q-0")
		check("Hosted", "WAITING_COMMANDS=1", "EXECUTE=1")
	})
}
