package engine

import (
	"testing"
	"time"
)

// TestSweepPause: the pause after a deletion batch keeps the sweep's share
// of the store's time at SweepShare, and never drops below SweepPause.
func TestSweepPause(t *testing.T) {
	for _, c := range []struct {
		share float64
		busy  time.Duration
		want  time.Duration
	}{
		{0, 300 * time.Millisecond, 20 * time.Millisecond},      // no share: SweepPause only
		{1, 300 * time.Millisecond, 20 * time.Millisecond},      // the whole store
		{0.25, 30 * time.Millisecond, 90 * time.Millisecond},    // busy 1/4 of the time
		{0.25, 2 * time.Millisecond, 20 * time.Millisecond},     // short batch: SweepPause
		{0.5, 100 * time.Millisecond, 100 * time.Millisecond},   // half
		{0.1, 10 * time.Millisecond, 90 * time.Millisecond},     // a tenth
		{0.25, 0, 20 * time.Millisecond},                        // nothing measured
		{0.75, 300 * time.Millisecond, 100 * time.Millisecond},  // three quarters
		{0.25, 400 * time.Millisecond, 1200 * time.Millisecond}, // long batch, long pause
		{0.5, 10 * time.Millisecond, 20 * time.Millisecond},     // below SweepPause
		{0.2, 5 * time.Millisecond, 20 * time.Millisecond},      // exactly SweepPause
		{0.2, 6 * time.Millisecond, 24 * time.Millisecond},      // just above it
	} {
		cfg := Config{SweepPause: 20 * time.Millisecond, SweepShare: c.share}
		got := cfg.sweepPause(c.busy)
		if d := got - c.want; d > time.Microsecond || d < -time.Microsecond {
			t.Errorf("share %g, batch busy %s: pause %s, want %s", c.share, c.busy, got, c.want)
		}
	}
	for _, bad := range []float64{-0.1, 1.5} {
		cfg := Config{SweepShare: bad}
		if err := cfg.validateRetention(); err == nil {
			t.Errorf("SweepShare %g accepted", bad)
		}
	}
}

// TestSweepChunk: under SweepHold, the next deletion transaction takes as
// many runs as the last one's cost per run allows in SweepHold, at least
// one and at most SweepBatch.
func TestSweepChunk(t *testing.T) {
	cfg := Config{SweepHold: 3 * time.Millisecond, SweepBatch: 1000}
	for _, c := range []struct {
		n    int
		held time.Duration
		want int
	}{
		{16, 3 * time.Millisecond, 16},      // on target
		{16, 1 * time.Millisecond, 48},      // cheap: three times as many
		{100, 10 * time.Millisecond, 30},    // 0.1 ms a run
		{10, 60 * time.Millisecond, 1},      // dear: one run, never none
		{500, 100 * time.Microsecond, 1000}, // very cheap: at most SweepBatch
		{16, 0, 1000},                       // nothing measured
	} {
		if got := cfg.sweepChunk(c.n, c.held); got != c.want {
			t.Errorf("%d runs held %s: next %d, want %d", c.n, c.held, got, c.want)
		}
	}
	if err := (&Config{SweepHold: -time.Millisecond}).validateRetention(); err == nil {
		t.Error("a negative SweepHold accepted")
	}
}
