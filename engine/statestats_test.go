package engine_test

import (
	"context"
	"fmt"
	"reflect"
	"regexp"
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
