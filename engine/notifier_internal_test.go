package engine

import (
	"strconv"
	"testing"
)

// signalled reports whether w's channel holds a signal, and empties it.
func signalled(w *waiter) bool {
	select {
	case <-w.C:
		return true
	default:
		return false
	}
}

// TestNotifierWakesCloseWaitersOnClosesOnly: a waiter for closes sleeps
// through this process's commits that leave the run open, wakes at one that
// closes it with the run as committed, and wakes at every change told by
// the change feed, with no run; a plain waiter wakes at every change.
func TestNotifierWakesCloseWaitersOnClosesOnly(t *testing.T) {
	n := newNotifier()
	key := workflowKey("wf")
	closes, unsubscribeCloses := n.subscribeCloses(key)
	defer unsubscribeCloses()
	all, unsubscribeAll := n.subscribe(key)
	defer unsubscribeAll()

	n.notifyCommit(key, nil)
	if signalled(closes) {
		t.Error("a commit that closed no run woke the waiter for closes")
	}
	if !signalled(all) || n.take(all) != nil {
		t.Error("a commit that closed no run did not wake the plain waiter, or handed it a run")
	}

	run := &Run{RunID: "r1", WorkflowID: "wf", Status: RunCompleted}
	n.notifyCommit(key, run)
	if !signalled(closes) || n.take(closes) != run {
		t.Error("the closing commit did not wake the waiter for closes with its run")
	}
	if n.take(closes) != nil {
		t.Error("take handed the closed run over twice")
	}
	if !signalled(all) || n.take(all) != run {
		t.Error("the closing commit did not wake the plain waiter with its run")
	}

	// A close handed over, then a change told by the feed before the
	// waiter ran: the feed's change replaces the run, so the waiter reads.
	n.notifyCommit(key, run)
	n.notify(key)
	if !signalled(closes) || n.take(closes) != nil {
		t.Error("a change told by the feed did not wake the waiter for closes, or left it a run")
	}
	if !signalled(all) || n.take(all) != nil {
		t.Error("a change told by the feed did not wake the plain waiter, or left it a run")
	}

	n.notifyCommit(workflowKey("other"), run)
	if signalled(closes) || signalled(all) {
		t.Error("a commit of another workflow woke the waiters")
	}
	if got := n.count(); got != 2 {
		t.Errorf("count = %d, want 2", got)
	}
}

// TestNotifierOpenMarks: a workflow's mark names the run its last commit by
// this process that settled left open, also while a transaction of the
// workflow is pending; commits that settle out of order, a failed commit, a
// change told by the change feed and a missed notification all leave it
// unknown.
func TestNotifierOpenMarks(t *testing.T) {
	n := newNotifier()
	k := workflowKey("wf")
	want := func(step, runID string) {
		t.Helper()
		if got := n.knownOpen(k); got != runID {
			t.Fatalf("%s: knownOpen = %q, want %q", step, got, runID)
		}
	}
	want("no commit", "")
	n.pend([]string{k})
	want("a start pending", "")
	n.settle(k, "r1")
	want("after the start", "r1")
	n.pend([]string{k})
	want("an answer pending", "r1")
	n.settle(k, "r1")
	want("after an answer that left it open", "r1")
	n.pend([]string{k})
	n.settle(k, "")
	want("after the close", "")
	if len(n.marks) != 0 {
		t.Fatalf("a closed run left %d marks", len(n.marks))
	}

	// T1 leaves r2 open and T2 closes it after, but T2 settles first: the
	// late settle of T1 must not mark the closed run open.
	n.pend([]string{k})
	n.pend([]string{k})
	n.settle(k, "")
	want("T2 settled, T1 pending", "")
	n.settle(k, "r2")
	want("T1 settled late", "")

	// The same two settling in commit order end unknown too: neither can
	// tell which committed last.
	n.pend([]string{k})
	n.pend([]string{k})
	n.settle(k, "r3")
	n.settle(k, "r3")
	want("two commits settled together", "")
	n.pend([]string{k})
	n.settle(k, "r3")
	want("a commit alone", "r3")

	// A long poll that looks while the closing transaction is pending
	// waits on the mark, and that transaction's commit wakes it with the
	// run it closed: it settles before it wakes the waiters.
	closes, unsubscribe := n.subscribeCloses(k)
	n.pend([]string{k})
	want("the close pending", "r3")
	n.settle(k, "")
	closed := &Run{RunID: "r3", WorkflowID: "wf", Status: RunCompleted}
	n.notifyCommit(k, closed)
	if !signalled(closes) || n.take(closes) != closed {
		t.Fatal("the pending close did not wake the long poll that waited on the mark with its run")
	}
	unsubscribe()
	want("after the close", "")
	n.pend([]string{k})
	n.settle(k, "r3")

	// A failed commit may have committed: the mark is forgotten.
	n.pend([]string{k})
	n.abandon([]string{k})
	want("after a failed commit", "")

	// A change told by the feed, with or without a commit pending.
	n.pend([]string{k})
	n.settle(k, "r4")
	n.notify(k)
	want("after the feed told a change", "")
	n.pend([]string{k})
	n.notify(k)
	n.settle(k, "r4")
	want("feed during a pending commit", "")
	n.pend([]string{k})
	n.settle(k, "r4")
	n.notifyAll()
	want("after a missed notification", "")
	if len(n.marks) != 0 {
		t.Fatalf("%d marks left behind", len(n.marks))
	}

	// At the bound, new workflows are not counted (their long polls read),
	// while a workflow marked already still is.
	n.pend([]string{k})
	n.settle(k, "r5")
	for i := 1; i < maxOpenMarks; i++ {
		n.pend([]string{workflowKey(strconv.Itoa(i))})
	}
	if got := n.pend([]string{workflowKey("one too many")}); len(got) != 0 {
		t.Fatalf("pend beyond the bound counted %v", got)
	}
	if got := n.pend([]string{k}); len(got) != 1 {
		t.Fatalf("pend of a marked workflow at the bound counted %v", got)
	}
	n.settle(k, "r5")
	want("a marked workflow at the bound", "r5")
	if len(n.marks) != maxOpenMarks {
		t.Fatalf("%d marks, want the bound %d", len(n.marks), maxOpenMarks)
	}
}
