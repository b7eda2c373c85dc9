package postgres

import (
	"context"
	"sync"

	"github.com/iwf-server/iwf-server/engine"
)

// gate hands out the pool's connections to transactions and call reads by
// engine.Priority: when all are in use, a connection given back goes to
// the oldest waiter of the most urgent priority, where the pool itself
// would serve waiters in arrival order. Under overload, a burst of starts
// then queues behind the timers and worker answers of the workflows
// already under way instead of in front of them. Statements that bypass
// the gate (task claims, lease renewals, migrations, and the combiner's
// commits, whose transactions each hold a slot while they wait for one)
// take a connection from the pool directly; the gate admits at most the
// pool's size, so they wait for at most the transactions in flight.
type gate struct {
	mu      sync.Mutex
	free    int
	waiting [engine.NumPriorities][]*gateWaiter
	// changed is broadcast whenever free or waiting changes (tests wait on
	// it; without waiters a broadcast costs next to nothing).
	changed *sync.Cond
}

// gateWaiter is one caller waiting at the gate; ready is closed when it is
// given a slot.
type gateWaiter struct {
	ready   chan struct{}
	granted bool
}

func newGate(size int) *gate {
	g := &gate{free: size}
	g.changed = sync.NewCond(&g.mu)
	return g
}

// enter waits for a slot at ctx's priority, or until ctx ends.
func (g *gate) enter(ctx context.Context) error {
	g.mu.Lock()
	if g.free > 0 {
		// Slots are handed straight to waiters when given back, so a free
		// slot means that nobody waits.
		g.free--
		g.changed.Broadcast()
		g.mu.Unlock()
		return nil
	}
	p := engine.PriorityOf(ctx)
	w := &gateWaiter{ready: make(chan struct{})}
	g.waiting[p] = append(g.waiting[p], w)
	g.changed.Broadcast()
	g.mu.Unlock()
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
		g.mu.Lock()
		if w.granted {
			// Given a slot as ctx ended: pass it on.
			g.mu.Unlock()
			g.leave()
			return ctx.Err()
		}
		q := g.waiting[p]
		for i, x := range q {
			if x == w {
				g.waiting[p] = append(q[:i:i], q[i+1:]...)
				break
			}
		}
		g.changed.Broadcast()
		g.mu.Unlock()
		return ctx.Err()
	}
}

// leave gives a slot back: to the most urgent waiter, else to the free
// count.
func (g *gate) leave() {
	g.mu.Lock()
	defer g.mu.Unlock()
	defer g.changed.Broadcast()
	for p := range g.waiting {
		if q := g.waiting[p]; len(q) > 0 {
			w := q[0]
			q[0] = nil
			g.waiting[p] = q[1:]
			w.granted = true
			close(w.ready)
			return
		}
	}
	g.free++
}
