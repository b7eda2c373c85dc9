package iwftest

import (
	"sync"
	"testing"
	"time"
)

var start = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func fired(t *testing.T, tm interface{ C() <-chan time.Time }) (time.Time, bool) {
	t.Helper()
	select {
	case at := <-tm.C():
		return at, true
	default:
		return time.Time{}, false
	}
}

func TestFakeClockTimerFiresAtDeadline(t *testing.T) {
	c := NewFakeClock(start)
	tm := c.NewTimer(time.Hour)
	c.Advance(59 * time.Minute)
	if _, ok := fired(t, tm); ok {
		t.Fatal("timer fired before its deadline")
	}
	c.Advance(time.Minute)
	at, ok := fired(t, tm)
	if !ok {
		t.Fatal("timer did not fire at its deadline")
	}
	if want := start.Add(time.Hour); !at.Equal(want) || !c.Now().Equal(want) {
		t.Fatalf("fired at %s, clock %s; want %s", at, c.Now(), want)
	}
	c.Advance(time.Hour)
	if _, ok := fired(t, tm); ok {
		t.Fatal("timer fired twice")
	}
}

func TestFakeClockStopAndZeroDuration(t *testing.T) {
	c := NewFakeClock(start)
	tm := c.NewTimer(time.Second)
	if !tm.Stop() {
		t.Fatal("Stop of a pending timer reported false")
	}
	if tm.Stop() {
		t.Fatal("second Stop reported true")
	}
	c.Advance(time.Minute)
	if _, ok := fired(t, tm); ok {
		t.Fatal("a stopped timer fired")
	}
	if _, ok := fired(t, c.NewTimer(0)); !ok {
		t.Fatal("a zero-duration timer did not fire at once")
	}
	now := c.Now()
	c.AdvanceTo(now.Add(-time.Hour))
	c.Advance(-time.Hour)
	if !c.Now().Equal(now) {
		t.Fatalf("the clock went backwards to %s", c.Now())
	}
}

func TestFakeClockWakeEngineOnlyWakesEngineTimers(t *testing.T) {
	c := NewFakeClock(start)
	user := c.NewTimer(time.Hour)
	eng := engineClock{c}.NewTimer(time.Hour)
	c.wakeEngine()
	if _, ok := fired(t, eng); !ok {
		t.Fatal("engine timer not woken")
	}
	if _, ok := fired(t, user); ok {
		t.Fatal("a user's timer fired early")
	}
}

func TestFakeClockConcurrentUse(t *testing.T) {
	c := NewFakeClock(start)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				tm := c.NewTimer(time.Millisecond)
				c.Advance(time.Millisecond)
				<-tm.C() // fired by this Advance or an earlier one of another goroutine
			}
		})
	}
	wg.Wait()
	if got, want := c.Now(), start.Add(800*time.Millisecond); !got.Equal(want) {
		t.Fatalf("clock at %s, want %s", got, want)
	}
}
