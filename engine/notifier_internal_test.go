package engine

import "testing"

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
