package crashtest

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine"
)

// TestKillAtRandomMoments kills the server again and again at random
// moments while several workflows step through a chain of states, so that
// the kills land anywhere: during worker calls, between a worker's answer
// and its commit, during timers' and decisions' transactions. Each kill
// comes a random 0–300 ms after the restarted server made its first worker
// call. Afterwards every workflow must have ended exactly as without the
// crashes: one output from the last step, each step executed once (Step-1
// .. Step-N), and every waitUntil and execute answer applied exactly once
// (the counters wu and count equal N; step-i equals 1 for every i).
func TestKillAtRandomMoments(t *testing.T) {
	const workflows, steps = 4, 60
	forEachStore(t, func(t *testing.T, db string) {
		kills := 8
		if strings.HasPrefix(db, "postgres") {
			kills = 3 // each restart waits for the dead process's leases to expire
		}
		seed := uint64(time.Now().UnixNano())
		t.Logf("seed %d", seed)
		rng := rand.New(rand.NewPCG(seed, seed>>7))
		jitter := func() { time.Sleep(time.Duration(5+rand.IntN(20)) * time.Millisecond) }

		w := NewWorker(t)
		w.State("Step", State{
			WaitUntil: func(req *iwfapi.WorkflowStateStartRequest) *iwfapi.WorkflowStateStartResponse {
				jitter()
				return &iwfapi.WorkflowStateStartResponse{UpsertDataObjects: &[]iwfapi.KeyValue{Incr(req.DataObjects, "wu")}}
			},
			Execute: func(req *iwfapi.WorkflowStateDecideRequest) *iwfapi.WorkflowStateDecideResponse {
				jitter()
				i, _ := strconv.Atoi(dataOf(req.StateInput))
				ups := []iwfapi.KeyValue{Incr(req.DataObjects, "count"), Incr(req.DataObjects, fmt.Sprintf("step-%d", i))}
				if i >= steps {
					return decide(ups, iwfapi.StateMovement{StateId: engine.GracefulCompletingState, StateInput: Object("done")})
				}
				return decide(ups, iwfapi.StateMovement{StateId: "Step", StateInput: Object(strconv.Itoa(i + 1))})
			},
		})
		srv := startServer(t, db, "server")
		ids := make([]string, workflows)
		for k := range ids {
			ids[k] = fmt.Sprintf("wf-%d", k)
			startWorkflow(t, srv, w, ids[k], "Step", "1", nil)
		}
		for range kills {
			seen := len(w.Calls(nil))
			eventually(t, 60*time.Second, "a worker call after the (re)start", func() bool { return len(w.Calls(nil)) > seen })
			time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond) // a random moment to kill at
			srv.Kill()
			srv.Start()
		}

		last := fmt.Sprintf("Step-%d", steps)
		for _, id := range ids {
			r := result(t, srv, id, 90*time.Second)
			want := iwfapi.WorkflowGetResponse{
				WorkflowRunId: r.WorkflowRunId, WorkflowStatus: iwfapi.WorkflowStatusCompleted,
				Results: &[]iwfapi.StateCompletionOutput{{CompletedStateId: "Step", CompletedStateExecutionId: last, CompletedStateOutput: Object("done")}},
			}
			if !equal(r, want) {
				t.Errorf("%s: result %s, want %s", id, mustJSON(r), mustJSON(want))
			}
			d := mustDump(t, srv, id)
			if want := map[string]int{"Step": steps}; !equal(d.Counters, want) {
				t.Errorf("%s: state execution counters %v, want %v", id, d.Counters, want)
			}
			for _, key := range []string{"wu", "count"} {
				if got := d.attr(key); got != strconv.Itoa(steps) {
					t.Errorf("%s: data attribute %s = %q, want %d", id, key, got, steps)
				}
			}
			for i := 1; i <= steps; i++ {
				if got := d.attr(fmt.Sprintf("step-%d", i)); got != "1" {
					t.Errorf("%s: data attribute step-%d = %q, want 1", id, i, got)
				}
			}
			for _, p := range checkOnce(d) {
				t.Errorf("%s: %s", id, p)
			}
			if t.Failed() {
				t.Fatalf("%s: history %s", id, mustJSON(d.History))
			}
		}
		repeated := w.Calls(func(c Call) bool { return c.Attempt > 1 })
		t.Logf("%d kills; %d worker calls, %d of them repeated attempts", kills, len(w.Calls(nil)), len(repeated))
		if len(repeated) == 0 {
			t.Errorf("no call was repeated: the kills hit no worker call, the test proved little")
		}
	})
}
