package main

import (
	"testing"
	"time"
)

// TestLargeRatiosCompareMedians checks that W5's ratios compare the
// medians of the rounds, so that one window slowed by the machine does not
// decide a target.
func TestLargeRatiosCompareMedians(t *testing.T) {
	w1 := func(completed int64) *result {
		return &result{completed: completed, cpu: cpuUse{wall: time.Second}}
	}
	at1 := func(p50 time.Duration) *result { return &result{latWait: &dist{p50: p50}} }
	l := &largeResult{
		emptyAt64: []*result{w1(1000), w1(600), w1(1100)},
		largeAt64: []*result{w1(950), w1(1000), w1(500)},
		emptyAt1:  []*result{at1(2 * time.Millisecond), at1(9 * time.Millisecond), at1(2 * time.Millisecond)},
		largeAt1:  []*result{at1(2200 * time.Microsecond), at1(2 * time.Millisecond), at1(2100 * time.Microsecond)},
		sweepAt64: w1(855),
	}
	if got, want := l.w1Ratio(), 950.0/1000; got != want {
		t.Errorf("w1Ratio = %v, want %v (median 950 of the large rounds over median 1000 of the empty ones)", got, want)
	}
	if got, want := l.p50Ratio(), 2.1/2; got < want-1e-9 || got > want+1e-9 {
		t.Errorf("p50Ratio = %v, want %v", got, want)
	}
	if got, want := l.sweepW1(), 855.0/950; got != want {
		t.Errorf("sweepW1 = %v, want %v (against the large rounds' median)", got, want)
	}
	if got := medianOf([]*result{w1(1), w1(3)}, throughputOf); got != 2 {
		t.Errorf("median of two = %v, want their mean 2", got)
	}
	if got := (&largeResult{largeAt64: []*result{w1(1)}}).w1Ratio(); got != 0 {
		t.Errorf("w1Ratio without an empty-store run = %v, want 0 (unmeasured)", got)
	}
}
