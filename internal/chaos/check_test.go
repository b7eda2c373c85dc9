package chaos

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/internal/crashtest"
)

// findings are the checker's results.
type findings struct {
	lost, double []string // what was lost or applied twice
	wrong        []string // outcomes that differ from the script otherwise
}

func (f *findings) add(list *[]string, wf *workflow, format string, args ...any) {
	*list = append(*list, wf.id+" ("+wf.kind+"): "+fmt.Sprintf(format, args...))
}

// check compares one workflow's final run (its get answer r and dump dd)
// with what its script implies.
func (f *findings) check(wf *workflow, r iwfapi.WorkflowGetResponse, dd *crashtest.Dump, runsSeen int) {
	if !wf.started {
		f.add(&f.wrong, wf, "never started: %v", wf.err)
		return
	}
	// Each history event of an execution at most once.
	ev := dd.Events()
	for _, x := range dd.Executions {
		for _, typ := range []string{"StateExecutionStarted", "WaitUntilCompleted", "ExecuteCompleted"} {
			if n := ev[typ+" "+x.ExecutionID]; n > 1 {
				f.add(&f.double, wf, "%s %s recorded %d times", typ, x.ExecutionID, n)
			}
		}
	}
	if n := ev["WorkflowClosed "]; n != 1 {
		f.add(&f.double, wf, "WorkflowClosed recorded %d times", n)
	}
	// Counters: every state effect exactly once.
	want := map[string]string{}
	var status iwfapi.WorkflowStatus
	var results []iwfapi.StateCompletionOutput
	counters := map[string]int{}
	switch wf.kind {
	case kindMixed:
		status = iwfapi.WorkflowStatusCompleted
		var msgs []string
		for _, x := range []string{"S-1", "P-1", "P-2", "P-3", "J-1"} {
			want["exec-"+x] = "1"
		}
		for _, x := range []string{"P-1", "P-2", "P-3"} {
			msgs = append(msgs, message(wf.id, x))
		}
		want["wu-S-1"], want["wu-J-1"] = "1", "1"
		counters = map[string]int{"S": 1, "P": 3, "J": 1}
		results = []iwfapi.StateCompletionOutput{{CompletedStateId: "J", CompletedStateExecutionId: "J-1", CompletedStateOutput: crashtest.Object(strings.Join(msgs, ","))}}
		for _, id := range wf.rpcAcked {
			want["rpc-"+id] = "1"
		}
		for _, id := range wf.rpcLost {
			if v := dd.Attr("rpc-" + id); v != "" && v != "1" {
				f.add(&f.double, wf, "rpc-%s = %q (an RPC whose answer was lost) applied twice", id, v)
			}
		}
		f.checkSignals(wf, dd, dd.Attr("sig"))
		for name, c := range dd.Internal {
			if n := deref(c.Size); n != 0 {
				f.add(&f.double, wf, "internal channel %s holds %d messages after J consumed three: a publish applied twice", name, n)
			}
		}
	case kindReset:
		status = iwfapi.WorkflowStatusCompleted
		want["exec-S-1"], want["exec-W-1"], want["wu-S-1"] = "1", "1", "1"
		want["wu-W-1"] = "2" // once in the base run, once in the reset run
		counters = map[string]int{"S": 1, "W": 1}
		if r.WorkflowRunId == wf.baseRun {
			f.add(&f.lost, wf, "the reset (acknowledged: %v) did not take effect: the run is still %s", wf.resetAcked, wf.baseRun)
		}
		sigs := signalsIn(dd)
		var out string
		if len(sigs) > 0 {
			out = sigs[0]
		}
		f.checkSignals(wf, dd, out)
		results = []iwfapi.StateCompletionOutput{{CompletedStateId: "W", CompletedStateExecutionId: "W-1", CompletedStateOutput: crashtest.Object(out)}}
	case kindStop:
		status = iwfapi.WorkflowStatusCanceled
		want["exec-S-1"], want["wu-S-1"], want["wu-W-1"] = "1", "1", "1"
		counters = map[string]int{"S": 1, "W": 1}
	case kindRetry:
		status = iwfapi.WorkflowStatusCompleted
		want["exec-S-1"], want["wu-S-1"] = "1", "1"
		counters = map[string]int{"S": 1}
		results = []iwfapi.StateCompletionOutput{{CompletedStateId: "S", CompletedStateExecutionId: "S-1", CompletedStateOutput: crashtest.Object("retried")}}
		if runsSeen != 2 {
			f.add(&f.wrong, wf, "the worker saw %d runs, want 2 (one failed, one retried)", runsSeen)
		}
	}
	if r.WorkflowStatus != status {
		f.add(&f.lost, wf, "status %s, want %s (script error: %v)", r.WorkflowStatus, status, wf.err)
	}
	if results != nil && !equalJSON(inlineOnly(deref(r.Results)), results) {
		f.add(&f.lost, wf, "results %s, want %s", mustJSON(r.Results), mustJSON(results))
	}
	if !equalJSON(dd.Counters, counters) {
		f.add(&f.wrong, wf, "state execution counters %v, want %v", dd.Counters, counters)
	}
	for _, k := range sortedKeys(want) {
		got := dd.Attr(k)
		switch {
		case got == want[k]:
		case got == "" || got < want[k]:
			f.add(&f.lost, wf, "data attribute %s = %q, want %s", k, got, want[k])
		default:
			f.add(&f.double, wf, "data attribute %s = %q, want %s", k, got, want[k])
		}
	}
	// No counter beyond those the script implies.
	for _, kv := range dd.DataAttributes {
		k := deref(kv.Key)
		if (strings.HasPrefix(k, "exec-") || strings.HasPrefix(k, "wu-")) && want[k] == "" {
			f.add(&f.double, wf, "unexpected data attribute %s = %s", k, dataOf(kv.Value))
		}
	}
}

// checkSignals checks the signals of a run: the acknowledged one arrived,
// none arrived twice, and the one the workflow consumed (consumed) is the
// first that arrived.
func (f *findings) checkSignals(wf *workflow, dd *crashtest.Dump, consumed string) {
	sigs := signalsIn(dd)
	seen := map[string]bool{}
	for _, s := range sigs {
		if seen[s] {
			f.add(&f.double, wf, "signal %s recorded twice", s)
		}
		seen[s] = true
	}
	if wf.signalAcked != "" && !seen[wf.signalAcked] {
		f.add(&f.lost, wf, "acknowledged signal %s not in the history (%v)", wf.signalAcked, sigs)
	}
	if len(sigs) == 0 {
		f.add(&f.lost, wf, "no signal arrived (sent %v)", wf.signals)
		return
	}
	if consumed != sigs[0] {
		f.add(&f.lost, wf, "the workflow consumed %q, want the first signal %q", consumed, sigs[0])
	}
	buffered := 0
	for _, c := range dd.Signals {
		buffered += int(deref(c.Size))
	}
	if buffered != len(sigs)-1 {
		f.add(&f.double, wf, "%d signals buffered, want %d (%d arrived, one consumed)", buffered, len(sigs)-1, len(sigs))
	}
}

// repeats counts the worker calls that repeat an earlier call of the same
// run, execution and API, and lists those that no fault explains: the
// earlier call arrived, and the repeat came, with no fault in between.
func repeats(c *cluster, calls []crashtest.Call) (n int, unexplained []string) {
	prev := map[string]crashtest.Call{}
	for _, call := range calls {
		if call.API == crashtest.RPC {
			continue
		}
		key := call.RunID + "/" + call.ExecutionID + "/" + call.API
		p, ok := prev[key]
		prev[key] = call
		if !ok {
			continue
		}
		n++
		if !c.faultBetween(p.At, call.At) {
			unexplained = append(unexplained, fmt.Sprintf("%s %s %s attempt %d at %s (previous attempt %d at %s, answered %s)",
				call.WorkflowID, call.ExecutionID, call.API, call.Attempt, call.At.Format("15:04:05.000"),
				p.Attempt, p.At.Format("15:04:05.000"), p.Answered.Format("15:04:05.000")))
		}
	}
	return n, unexplained
}

func equalJSON(a, b any) bool { return mustJSON(a) == mustJSON(b) }

// inlineOnly returns rs without the external-storage references beside
// the outputs' data: with external storage on, an answer carries both, and
// the check is about the data.
func inlineOnly(rs []iwfapi.StateCompletionOutput) []iwfapi.StateCompletionOutput {
	out := make([]iwfapi.StateCompletionOutput, len(rs))
	for i, r := range rs {
		if o := r.CompletedStateOutput; o != nil {
			c := *o
			c.ExtStoreId, c.ExtPath = nil, nil
			r.CompletedStateOutput = &c
		}
		out[i] = r
	}
	return out
}

func mustJSON(v any) string {
	s := fmt.Sprintf("%v", v)
	if b, err := jsonMarshal(v); err == nil {
		s = string(b)
	}
	return s
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// TestRepeatsAfterPostgresRestart runs the repeat check on the calls of a
// PostgreSQL restart as a chaos run saw them (times relative to the
// restart): node a could not commit the answer of its first call, b took
// the task over once its lease ran out, after the server was back, and a
// called again at its next try. The restart's linger explains both
// repeats; without it the second is unexplained, as is a repeat past it.
func TestRepeatsAfterPostgresRestart(t *testing.T) {
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	call := func(node string, attempt, ms int) crashtest.Call {
		return crashtest.Call{API: crashtest.Execute, WorkflowID: "w", RunID: "r", ExecutionID: "S-1", Node: node, Attempt: attempt, At: at(ms), Answered: at(ms + 1)}
	}
	restart := fault{start: at(0), end: at(1455).Add(restartLinger), kind: "postgres_restart"} // back at 1455 ms
	calls := []crashtest.Call{
		call("a", 1, -74),  // before the restart; its answer's commit failed
		call("a", 1, 2186), // a's next try, 731 ms after the server was back
		call("b", 2, 2420), // b's, after its claim of the expired lease
	}
	c := newCluster()
	c.faults = []fault{restart}
	if n, unexplained := repeats(c, calls); n != 2 || len(unexplained) != 0 {
		t.Fatalf("%d repeats, unexplained %q; want 2, none", n, unexplained)
	}
	past := 1455 + int(restartLinger/time.Millisecond)
	late := append(calls, call("b", 3, past+100), call("b", 4, past+200))
	if n, unexplained := repeats(c, late); n != 4 || len(unexplained) != 1 {
		t.Fatalf("%d repeats, unexplained %q; want 4, one (the last: past the linger)", n, unexplained)
	}
	c.faults = []fault{{start: restart.start, end: at(1455), kind: restart.kind}} // the restart without its linger
	if _, unexplained := repeats(c, calls); len(unexplained) != 1 {
		t.Fatalf("without the linger: unexplained %q, want one (b's call after a's next try)", unexplained)
	}
}
