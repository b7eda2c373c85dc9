package crashtest

import (
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine"
)

// parallel runs fn(0..n-1) on k goroutines and reports every error.
func parallel(t *testing.T, n, k int, fn func(i int) error) {
	t.Helper()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
		next = make(chan int)
	)
	for range k {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := fn(i); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	for i, err := range errs {
		if i == 10 {
			t.Errorf("... and %d more errors", len(errs)-10)
			break
		}
		t.Error(err)
	}
}

// loadWorkflow registers the workflow of the scale-out test:
//
//	L1: waitUntil waits for a durable timer of `timer`; execute counts
//	    "count" and moves to L2.
//	L2: waitUntil waits for one signal on "go"; execute counts "count" and
//	    moves to L3 (without waitUntil) with the signal's value as input.
//	L3: execute counts "count" and completes with its input as output.
//
// Done once, it ends COMPLETED with the single output (L3, L3-1, signal
// value) and count=3.
func loadWorkflow(w *Worker, timer time.Duration) {
	w.State("L1", State{
		WaitUntil: func(req *iwfapi.WorkflowStateStartRequest) *iwfapi.WorkflowStateStartResponse {
			return &iwfapi.WorkflowStateStartResponse{CommandRequest: timerCommand(timer)(req)}
		},
		Execute: func(req *iwfapi.WorkflowStateDecideRequest) *iwfapi.WorkflowStateDecideResponse {
			return decide([]iwfapi.KeyValue{Incr(req.DataObjects, "count")}, iwfapi.StateMovement{StateId: "L2"})
		},
	})
	w.State("L2", State{
		WaitUntil: func(req *iwfapi.WorkflowStateStartRequest) *iwfapi.WorkflowStateStartResponse {
			return &iwfapi.WorkflowStateStartResponse{CommandRequest: signalCommand("go")(req)}
		},
		Execute: func(req *iwfapi.WorkflowStateDecideRequest) *iwfapi.WorkflowStateDecideResponse {
			var value *iwfapi.EncodedObject
			for _, s := range deref(req.CommandResults.SignalResults) {
				value = s.SignalValue
			}
			return decide([]iwfapi.KeyValue{Incr(req.DataObjects, "count")}, iwfapi.StateMovement{StateId: "L3", StateInput: value,
				StateOptions: &iwfapi.WorkflowStateOptions{SkipWaitUntil: ptr(true)}})
		},
	})
	w.State("L3", State{
		Execute: func(req *iwfapi.WorkflowStateDecideRequest) *iwfapi.WorkflowStateDecideResponse {
			return decide([]iwfapi.KeyValue{Incr(req.DataObjects, "count")},
				iwfapi.StateMovement{StateId: engine.GracefulCompletingState, StateInput: req.StateInput})
		},
	})
}

// checkLoadWorkflow checks that a load workflow ended exactly as without a
// crash.
func checkLoadWorkflow(srv *Server, id string, r iwfapi.WorkflowGetResponse) []string {
	var problems []string
	want := iwfapi.WorkflowGetResponse{
		WorkflowRunId: r.WorkflowRunId, WorkflowStatus: iwfapi.WorkflowStatusCompleted,
		Results: &[]iwfapi.StateCompletionOutput{{CompletedStateId: "L3", CompletedStateExecutionId: "L3-1", CompletedStateOutput: Object("sig-" + id)}},
	}
	if !equal(r, want) {
		problems = append(problems, fmt.Sprintf("%s: result %s, want %s", id, mustJSON(r), mustJSON(want)))
	}
	d, err := dump(srv, id)
	if err != nil {
		return append(problems, err.Error())
	}
	if want := map[string]int{"L1": 1, "L2": 1, "L3": 1}; !equal(d.Counters, want) {
		problems = append(problems, fmt.Sprintf("%s: state execution counters %v, want %v", id, d.Counters, want))
	}
	if got := d.attr("count"); got != "3" {
		problems = append(problems, fmt.Sprintf("%s: data attribute count = %q, want 3 (one applied execute answer per state)", id, got))
	}
	for _, p := range checkOnce(d) {
		problems = append(problems, id+": "+p)
	}
	if n := d.buffered(); n != 0 {
		problems = append(problems, fmt.Sprintf("%s: %d signals left unconsumed", id, n))
	}
	if len(problems) > 0 {
		problems = append(problems, fmt.Sprintf("%s: history %s", id, mustJSON(d.History)))
	}
	return problems
}

// TestTwoNodesKillOne runs two server processes on one PostgreSQL schema
// (they migrate it together at start-up), starts and signals workflows
// through both APIs, and kills node b with SIGKILL while it has execute
// calls in flight (held by the worker) and holds the leases of their tasks
// (of the timer, for a call b made as it fired a timer). Node a keeps
// serving the API and takes b's work over when b's leases expire. Every
// workflow must complete, with its single correct output, each state
// executed once and each execute answer applied once; b's calls that were
// in flight at the kill are repeated by a with a higher attempt. How long
// the takeover took is logged; the test's only time limit is a failure
// deadline far above it (on a loaded machine a renewal can come late, so a
// may even take a call over before the kill: fencing makes that safe too).
//
// Which node makes an execute call is the engine's choice, not the test's
// (see holdExecutesOnB), so b is made to call execute by signals sent
// through it: the test holds b's first inFlight execute calls whichever
// way they come.
func TestTwoNodesKillOne(t *testing.T) {
	const (
		before   = 100 // workflows started before the kill, half on each node
		after    = 20  // workflows started on the survivor after the kill
		inFlight = 5   // b's execute calls held by the worker at the kill
		timer    = time.Second
		// failAfter is when the test gives up waiting for the workflows.
		failAfter = 90 * time.Second
	)
	db := PostgresDB(t)
	w := NewWorker(t)
	loadWorkflow(w, timer)
	a, b := startNodes(t, db)
	nodes := []*Server{a, b}
	id := func(i int) string {
		if i < before {
			return fmt.Sprintf("load-%03d", i)
		}
		return fmt.Sprintf("late-%03d", i-before)
	}

	// b's first execute calls are held: they are in flight when b dies.
	held := w.Hold(inFlight, func(c Call) bool { return c.Node == "b" && c.API == Execute })
	began := time.Now()
	parallel(t, before, 8, func(i int) error { return tryStart(nodes[i%2], w, id(i), "L1", "", nil) })
	parallel(t, before/2, 8, func(i int) error { return trySignal(nodes[i%2], id(i), "go", "sig-"+id(i)) })
	if t.Failed() {
		t.FailNow()
	}
	// The second half waits for its signal in L2: those signalled through b
	// now give b execute calls to make.
	var unsignalled []string
	for i := before / 2; i < before; i++ {
		unsignalled = append(unsignalled, id(i))
	}
	heldCalls, viaB := holdExecutesOnB(t, w, held, b, unsignalled, inFlight, 60*time.Second)
	for _, n := range []string{"a", "b"} {
		if c := w.Calls(func(c Call) bool { return c.Node == n }); len(c) == 0 {
			t.Fatalf("node %s made no worker calls before the kill", n)
		}
	}
	b.Kill()
	killed := time.Now()
	t.Logf("killed node b %s after the first start; %d worker calls so far; %d workflows signalled through b for its held calls",
		killed.Sub(began).Round(time.Millisecond), len(w.Calls(nil)), len(viaB))

	// The survivor takes the rest of the load.
	parallel(t, before-before/2, 8, func(i int) error {
		i += before / 2
		if viaB[id(i)] {
			return nil
		}
		return trySignal(a, id(i), "go", "sig-"+id(i))
	})
	parallel(t, after, 8, func(i int) error {
		i += before
		if err := tryStart(a, w, id(i), "L1", "", nil); err != nil {
			return err
		}
		return trySignal(a, id(i), "go", "sig-"+id(i))
	})
	held.Release()

	deadline := killed.Add(failAfter)
	var (
		mu       sync.Mutex
		problems []string
		closedAt = map[string]time.Time{}
	)
	parallel(t, before+after, 24, func(i int) error {
		r, err := awaitResult(a, id(i), time.Until(deadline))
		if err != nil {
			return err
		}
		mu.Lock()
		closedAt[id(i)] = time.Now()
		mu.Unlock()
		p := checkLoadWorkflow(a, id(i), r)
		mu.Lock()
		problems = append(problems, p...)
		mu.Unlock()
		return nil
	})
	sort.Strings(problems)
	for i, p := range problems {
		if i == 20 {
			t.Errorf("... and %d more problems", len(problems)-20)
			break
		}
		t.Error(p)
	}
	var last time.Time
	for _, at := range closedAt {
		if at.After(last) {
			last = at
		}
	}
	t.Logf("%d of %d workflows completed; the last %s after the kill (lease %s, timer %s)",
		len(closedAt), before+after, last.Sub(killed).Round(time.Millisecond), leaseDuration, timer)

	// b's in-flight calls were taken over: the same execution was called
	// again by a, with a higher attempt.
	for _, c := range heldCalls {
		again := w.Calls(func(o Call) bool {
			return o.WorkflowID == c.WorkflowID && o.ExecutionID == c.ExecutionID && o.API == c.API && o.At.After(c.At)
		})
		if len(again) == 0 || again[len(again)-1].Node != "a" || again[len(again)-1].Attempt <= c.Attempt {
			t.Errorf("%s %s.%s held on b (attempt %d): later calls %s, want one from a with a higher attempt",
				c.WorkflowID, c.ExecutionID, c.API, c.Attempt, mustJSON(again))
		}
	}
	var fromB, repeated int
	for _, c := range w.Calls(nil) {
		if c.Node == "b" {
			fromB++
		}
		if c.Attempt > 1 {
			repeated++
		}
	}
	t.Logf("worker calls: %d in all, %d from b, %d repeated attempts", len(w.Calls(nil)), fromB, repeated)
}

// holdExecutesOnB returns the first n execute calls of node b, which held
// (matching b's execute calls) keeps in flight, and the workflows it
// signalled through b to get them.
//
// Which node calls execute is up to the engine, so b cannot simply be
// waited for. L1's execute is called by the node that fires L1's timer
// (engine/eager.go), and L2's and L3's follow on that node. A timer created
// a second ahead is stored unleased, being due beyond the local horizon
// (LeaseDuration/2; engine/tasks.go leaseLocally), and is claimed by the
// poller of either node (engine/dispatch.go claim): on a loaded machine a
// may claim nearly all of them. A signal, though, is applied by the node
// that receives it, and when it completes the commands of an execution
// waiting for it, that node's transaction creates the execute task leased
// to itself and calls execute right after the commit (engine/commands.go
// evaluate). So while fewer than n calls are held or sure to come, one more
// of candidates (workflows not signalled yet) whose L2-1 is known to wait
// for its signal is signalled through b; each brings one execute call of
// b's. The test fails when the n calls do not arrive within timeout.
func holdExecutesOnB(t *testing.T, w *Worker, held *Hold, b *Server, candidates []string, n int, timeout time.Duration) (calls []Call, viaB map[string]bool) {
	t.Helper()
	viaB = map[string]bool{}
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for len(calls) < n {
		select {
		case c := <-held.Arrived:
			calls = append(calls, c)
			continue
		default:
		}
		// A workflow signalled through b brings one held call of b's,
		// unless that call is here already, or a called instead (having
		// taken b's task over; another workflow is signalled then).
		here := map[string]bool{}
		for _, c := range calls {
			if c.StateID == "L2" {
				here[c.WorkflowID] = true
			}
		}
		coming := 0
		for id := range viaB {
			byA := w.Calls(func(c Call) bool { return c.WorkflowID == id && c.StateID == "L2" && c.API == Execute && c.Node != "b" })
			if !here[id] && len(byA) == 0 {
				coming++
			}
		}
		if len(calls)+coming < n {
			if id := waitingForSignal(w, b, candidates, viaB); id != "" {
				if err := trySignal(b, id, "go", "sig-"+id); err != nil {
					t.Fatal(err)
				}
				viaB[id] = true
				continue
			}
		}
		select {
		case c := <-held.Arrived:
			calls = append(calls, c)
		case <-tick.C:
			if time.Now().After(deadline) {
				t.Fatalf("only %d of %d held calls arrived within %s (%d workflows signalled through b: %v): %+v",
					len(calls), n, timeout, len(viaB), sortedKeys(viaB), calls)
			}
		}
	}
	return calls, viaB
}

// waitingForSignal returns one of candidates, not in skip, whose L2-1 waits
// for its signal as srv's dump shows (its waitUntil answer is committed, so
// a signal now completes its commands), or "" when it finds none. It reads
// the dumps of a few workflows whose L2 waitUntil the worker has answered.
func waitingForSignal(w *Worker, srv *Server, candidates []string, skip map[string]bool) string {
	answered := map[string]bool{}
	for _, c := range w.Calls(func(c Call) bool { return c.StateID == "L2" && c.API == WaitUntil && !c.Answered.IsZero() }) {
		answered[c.WorkflowID] = true
	}
	dumps := 0
	for _, id := range candidates {
		if skip[id] || !answered[id] {
			continue
		}
		if dumps++; dumps > 4 {
			return ""
		}
		if d, err := dump(srv, id); err == nil && d.execStatus("L2-1") == "WAITING" {
			return id
		}
	}
	return ""
}
