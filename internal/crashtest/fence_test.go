//go:build unix

package crashtest

import (
	"testing"
	"time"
)

// TestPausedNodeAnswerIsFenced runs two nodes on one PostgreSQL schema and
// freezes node b (SIGSTOP) while the worker holds b's execute call for S1.
// Node a takes the execution over when b's lease expires, calls execute
// again with a higher attempt and applies that answer; S2 then waits for a
// signal. Then b is thawed and the worker answers b's old call: b's answer
// is for an execution that has moved on and must change nothing (design
// property 3; the lease owner fences it). Finally the signal completes the
// workflow, which must end exactly as with a single node.
func TestPausedNodeAnswerIsFenced(t *testing.T) {
	db := PostgresDB(t)
	w := NewWorker(t)
	chain(w, nil, signalCommand("go"))
	a, b := startNodes(t, db)
	hold := w.Hold(1, Match("wf", "S1", Execute))
	startWorkflow(t, b, w, "wf", "S1", "in", nil)
	if c := hold.Wait(t, 1, 60*time.Second)[0]; c.Node != "b" {
		t.Fatalf("S1.execute was called by node %q; want b, which started the workflow and leased its tasks", c.Node)
	}
	b.Pause()
	paused := time.Now()
	t.Cleanup(b.Resume) // so that the cleanup's SIGKILL meets a running process

	eventually(t, leaseDuration+15*time.Second, "node a to take S1-1 over and S2-1 to wait for its signal", func() bool {
		d, err := dump(a, "wf")
		return err == nil && d.execStatus("S2-1") == "WAITING"
	})
	calls := w.Calls(Match("wf", "S1", Execute))
	if len(calls) != 2 || calls[1].Node != "a" || calls[1].Attempt <= calls[0].Attempt {
		t.Fatalf("S1.execute calls = %s, want b's attempt 1, then a's with a higher attempt", mustJSON(calls))
	}
	t.Logf("node a called S1.execute again %s after b froze (lease %s)", calls[1].At.Sub(paused).Round(time.Millisecond), leaseDuration)

	before := mustDump(t, a, "wf")
	b.Resume()
	hold.Release()
	// b now holds an answer for S1-1, which has moved on. Wait until b has
	// dropped it (its stale-result counter says so), then check that
	// nothing changed.
	eventually(t, 60*time.Second, "node b to drop its stale answer", func() bool {
		return metric(b, "iwf_stale_results_total") >= 1
	})
	if d := mustDump(t, a, "wf"); len(d.History) != len(before.History) || !equal(d.Counters, before.Counters) ||
		!equal(d.Executions, before.Executions) || !equal(d.DataAttributes, before.DataAttributes) {
		t.Fatalf("b's stale answer changed the workflow:\nbefore %s\nafter  %s", mustJSON(before), mustJSON(d))
	}

	signal(t, a, "wf", "go", "sig")
	checkChain(t, a, "wf", "in//sig")
	checkCalls(t, w, "wf", map[string]int{"S1.waitUntil": 1, "S1.execute": 2, "S2.waitUntil": 1, "S2.execute": 1})
}
