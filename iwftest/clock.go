package iwftest

import (
	"sync"
	"time"

	"github.com/iwf-server/iwf-server/engine"
)

// defaultStart is where the clock of WithFakeClock starts.
var defaultStart = time.Date(2025, time.January, 1, 0, 0, 0, 0, time.UTC)

// FakeClock is an engine.Clock whose time moves only when told to. A timer
// fires, once, when the clock reaches or passes its deadline; a timer of a
// duration <= 0 fires at once. It is safe for concurrent use.
//
// Moving a FakeClock by itself does not wait for anything that the fired
// timers cause; Env.Advance does, and is what tests normally use.
type FakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers map[*fakeTimer]struct{}
}

var _ engine.Clock = (*FakeClock)(nil)

// NewFakeClock returns a FakeClock reading start.
func NewFakeClock(start time.Time) *FakeClock {
	return &FakeClock{now: start, timers: map[*fakeTimer]struct{}{}}
}

// Now returns the clock's current time.
func (c *FakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// NewTimer returns a timer that fires when the clock has moved d forward.
func (c *FakeClock) NewTimer(d time.Duration) engine.Timer { return c.newTimer(d, false) }

// Advance moves the clock forward by d (nothing happens for d <= 0) and
// fires the timers whose deadline it reached.
func (c *FakeClock) Advance(d time.Duration) {
	if d > 0 {
		c.move(func(now time.Time) time.Time { return now.Add(d) })
	}
}

// AdvanceTo moves the clock forward to t (nothing happens if t is not
// later than Now) and fires the timers whose deadline it reached.
func (c *FakeClock) AdvanceTo(t time.Time) {
	c.move(func(time.Time) time.Time { return t })
}

// move sets the clock to to(now) if that is later, and fires the timers
// whose deadline it reached.
func (c *FakeClock) move(to func(now time.Time) time.Time) {
	c.mu.Lock()
	t := to(c.now)
	if !t.After(c.now) {
		c.mu.Unlock()
		return
	}
	c.now = t
	var due []*fakeTimer
	for ft := range c.timers {
		if !ft.deadline.After(t) {
			due = append(due, ft)
			delete(c.timers, ft)
		}
	}
	c.mu.Unlock()
	for _, ft := range due {
		ft.fire(t)
	}
}

func (c *FakeClock) newTimer(d time.Duration, wakeUp bool) *fakeTimer {
	ft := &fakeTimer{clock: c, ch: make(chan time.Time, 1), wakeUp: wakeUp}
	c.mu.Lock()
	now := c.now
	ft.deadline = now.Add(d)
	if d > 0 {
		c.timers[ft] = struct{}{}
	}
	c.mu.Unlock()
	if d <= 0 {
		ft.fire(now)
	}
	return ft
}

// wakeEngine fires every pending timer the engine created now, early. The
// engine's timers are only wake-ups: its scheduling loop and its poller
// read the clock again when they wake and go back to sleep if nothing is
// due, so firing them early never makes anything happen before its time.
// It closes the gap in which the engine reads Now, the clock moves, and the
// engine then starts a timer computed from the stale reading.
func (c *FakeClock) wakeEngine() {
	c.mu.Lock()
	now := c.now
	var wake []*fakeTimer
	for ft := range c.timers {
		if ft.wakeUp {
			wake = append(wake, ft)
			delete(c.timers, ft)
		}
	}
	c.mu.Unlock()
	for _, ft := range wake {
		ft.fire(now)
	}
}

// fakeTimer is a timer of a FakeClock.
type fakeTimer struct {
	clock    *FakeClock
	deadline time.Time
	ch       chan time.Time // buffered: firing never blocks
	wakeUp   bool           // created by the engine (engineClock)
}

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

// Stop prevents the timer from firing; it reports whether it did so.
func (t *fakeTimer) Stop() bool {
	t.clock.mu.Lock()
	defer t.clock.mu.Unlock()
	_, pending := t.clock.timers[t]
	delete(t.clock.timers, t)
	return pending
}

func (t *fakeTimer) fire(now time.Time) {
	select {
	case t.ch <- now:
	default:
	}
}

// engineClock is the view of a FakeClock given to the engine: its timers
// are marked as wake-ups, which Env may fire early (FakeClock.wakeEngine).
type engineClock struct{ c *FakeClock }

func (e engineClock) Now() time.Time                        { return e.c.Now() }
func (e engineClock) NewTimer(d time.Duration) engine.Timer { return e.c.newTimer(d, true) }
