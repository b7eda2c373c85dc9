package postgres

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/engine"
)

// waitGate waits until count(g), read under the gate's lock, is n: it
// re-reads whenever the gate changes, and fails after 10 s.
func waitGate(t *testing.T, g *gate, what string, n int, count func(g *gate) int) {
	t.Helper()
	timedOut := false
	watchdog := time.AfterFunc(10*time.Second, func() {
		g.mu.Lock()
		timedOut = true
		g.changed.Broadcast()
		g.mu.Unlock()
	})
	defer watchdog.Stop()
	g.mu.Lock()
	defer g.mu.Unlock()
	for got := count(g); got != n; got = count(g) {
		if timedOut {
			t.Fatalf("%s: %d, want %d", what, got, n)
		}
		g.changed.Wait()
	}
}

// waitQueued waits until n callers wait at the gate.
func waitQueued(t *testing.T, g *gate, n int) {
	t.Helper()
	waitGate(t, g, "callers waiting at the gate", n, func(g *gate) int {
		got := 0
		for _, q := range g.waiting {
			got += len(q)
		}
		return got
	})
}

// waitFree waits until n slots are free.
func waitFree(t *testing.T, g *gate, n int) {
	t.Helper()
	waitGate(t, g, "free slots", n, func(g *gate) int { return g.free })
}

// TestGateServesUrgentFirst fills the gate, queues callers of every
// priority (the least urgent first), and checks that slots given back go
// to the most urgent priority first and in arrival order within one.
func TestGateServesUrgentFirst(t *testing.T) {
	g := newGate(1)
	if err := g.enter(context.Background()); err != nil {
		t.Fatal(err)
	}
	order := make(chan string, 8)
	queue := []struct {
		name string
		p    engine.Priority
	}{
		{"start-1", engine.PriorityStart},
		{"low", engine.PriorityLow},
		{"start-2", engine.PriorityStart},
		{"normal", engine.PriorityNormal},
		{"urgent-1", engine.PriorityUrgent},
		{"urgent-2", engine.PriorityUrgent},
	}
	for i, c := range queue {
		go func() {
			if err := g.enter(engine.WithPriority(context.Background(), c.p)); err != nil {
				t.Error(err)
				return
			}
			order <- c.name
			g.leave()
		}()
		waitQueued(t, g, i+1) // fixes the arrival order
	}
	g.leave()
	want := []string{"urgent-1", "urgent-2", "normal", "low", "start-1", "start-2"}
	for i, w := range want {
		if got := <-order; got != w {
			t.Fatalf("slot %d went to %s, want %s (order %v)", i, got, w, want)
		}
	}
	waitFree(t, g, 1)
}

// TestGateCancelledWaiter checks that a waiter whose context ends leaves
// the queue with the context's error and that the slot then goes to the
// next waiter.
func TestGateCancelledWaiter(t *testing.T) {
	g := newGate(1)
	if err := g.enter(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(engine.WithPriority(context.Background(), engine.PriorityUrgent))
	cancelled := make(chan error, 1)
	go func() { cancelled <- g.enter(ctx) }()
	waitQueued(t, g, 1)
	entered := make(chan struct{})
	go func() {
		if err := g.enter(engine.WithPriority(context.Background(), engine.PriorityStart)); err != nil {
			t.Error(err)
		}
		close(entered)
	}()
	waitQueued(t, g, 2)
	cancel()
	if err := <-cancelled; !errors.Is(err, context.Canceled) {
		t.Fatalf("enter of a cancelled waiter = %v, want context.Canceled", err)
	}
	waitQueued(t, g, 1)
	g.leave()
	<-entered
	g.leave()
	waitFree(t, g, 1)
}

// TestGateGrantedAsCancelled checks the race of a slot handed to a waiter
// whose context ends at that moment: the slot is passed on, not lost.
func TestGateGrantedAsCancelled(t *testing.T) {
	for i := 0; i < 200; i++ {
		g := newGate(1)
		if err := g.enter(context.Background()); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- g.enter(ctx) }()
		waitQueued(t, g, 1)
		go cancel()
		g.leave()
		if err := <-done; err == nil {
			g.leave()
		}
		waitFree(t, g, 1)
	}
}
