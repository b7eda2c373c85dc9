package crashtest

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine"
)

// TestRollingDeploy sends SIGTERM to one of two PostgreSQL nodes while 100
// workflows are in flight, as a rolling deploy does. The node finishes its
// in-flight worker calls, hands the rest of its work back and exits 0; the
// other node takes the work over at once, not after the lease expires.
// Every workflow completes, and no worker call is made twice: none was
// cut off, so none needed repeating.
func TestRollingDeploy(t *testing.T) {
	db := PostgresDB(t)
	const (
		workflows = 100
		lease     = 30 * time.Second // a hand-over that waited for expiry would show as a gap this long
	)
	w := NewWorker(t)
	w.State("D1", State{
		Execute: func(req *iwfapi.WorkflowStateDecideRequest) *iwfapi.WorkflowStateDecideResponse {
			time.Sleep(100 * time.Millisecond) // a worker that takes a moment: calls are in flight at the signal
			return decide(nil, iwfapi.StateMovement{StateId: "D2"})
		},
	})
	w.State("D2", State{
		WaitUntil: func(req *iwfapi.WorkflowStateStartRequest) *iwfapi.WorkflowStateStartResponse {
			return &iwfapi.WorkflowStateStartResponse{CommandRequest: timerCommand(time.Second)(req)}
		},
		Execute: func(req *iwfapi.WorkflowStateDecideRequest) *iwfapi.WorkflowStateDecideResponse {
			return decide(nil, iwfapi.StateMovement{StateId: engine.GracefulCompletingState})
		},
	})
	node := func(name string) *Server {
		return NewServer(t, Options{Bin: serverBin, DB: db, Name: "node-" + name,
			LeaseDuration: lease, PollInterval: pollInterval,
			Args: []string{"--worker-header", NodeHeader + ": " + name, "--shutdown-grace", "60s"}})
	}
	a, b := node("a"), node("b")
	StartAll(t, a, b)

	ids := make([]string, workflows)
	parallel(t, workflows, 8, func(i int) error {
		ids[i] = fmt.Sprintf("deploy-%03d", i)
		srv := a
		if i%2 == 1 {
			srv = b
		}
		return tryStart(srv, w, ids[i], "D1", "", nil)
	})
	// SIGTERM node a while it has execute calls in flight and work queued.
	eventually(t, time.Minute, "node a calling execute", func() bool {
		return len(w.Calls(func(c Call) bool { return c.Node == "a" && c.API == Execute && c.StateID == "D1" })) >= 5
	})
	signalAt := time.Now()
	ended := a.Terminate(2 * time.Minute)
	took := time.Since(signalAt)
	if !strings.HasSuffix(ended, "<nil>") {
		t.Fatalf("node a did not exit 0 after SIGTERM: %s", ended)
	}
	if !strings.Contains(a.Log(), "handed back leases") {
		t.Errorf("node a's log does not show the hand-over:\n%s", a.Log())
	}

	for _, id := range ids {
		r := result(t, b, id, 2*time.Minute)
		if r.WorkflowStatus != iwfapi.WorkflowStatusCompleted {
			t.Fatalf("%s ended %s", id, r.WorkflowStatus)
		}
	}

	// Each worker call exactly once, and the largest wait between two
	// calls of one workflow.
	calls := w.Calls(func(Call) bool { return true })
	byWorkflow := map[string][]Call{}
	seen := map[string]int{}
	for _, c := range calls {
		byWorkflow[c.WorkflowID] = append(byWorkflow[c.WorkflowID], c)
		seen[c.WorkflowID+"/"+c.ExecutionID+"/"+c.API]++
	}
	var repeated []string
	for k, n := range seen {
		if n != 1 {
			repeated = append(repeated, fmt.Sprintf("%s ×%d", k, n))
		}
	}
	sort.Strings(repeated)
	if len(repeated) > 0 {
		t.Errorf("worker calls made more than once: %v", repeated)
	}
	var maxGap time.Duration
	var maxGapAt string
	for id, cs := range byWorkflow {
		sort.Slice(cs, func(i, j int) bool { return cs[i].At.Before(cs[j].At) })
		for i := 1; i < len(cs); i++ {
			prev := cs[i-1].Answered
			if prev.IsZero() {
				prev = cs[i-1].At
			}
			if gap := cs[i].At.Sub(prev); gap > maxGap {
				maxGap, maxGapAt = gap, fmt.Sprintf("%s before %s %s", id, cs[i].ExecutionID, cs[i].API)
			}
		}
	}
	// Calls node a started in the few milliseconds the signal takes to
	// arrive are in flight at the signal, like the others.
	byNodeA := len(w.Calls(func(c Call) bool { return c.Node == "a" && c.At.After(signalAt) }))
	t.Logf("node a exited %s after SIGTERM; calls it started after the signal was sent: %d; largest gap between two calls of a workflow: %s (%s; the D2 timer accounts for 1s)",
		took.Round(time.Millisecond), byNodeA, maxGap.Round(time.Millisecond), maxGapAt)
	if maxGap >= lease {
		t.Errorf("a task waited %s (>= the %s lease) before it was called again: it was not handed back", maxGap, lease)
	}
}
