package engine

import (
	"math"
	"testing"
	"time"
)

// TestBatchInterval: the pause between two runs of a batch is 1/rps, and
// stays within [1/MaxBatchRPS, 1/MinBatchRPS] whatever rate a stored batch
// carries: a tiny rate (1e-300 made +Inf, then a negative Duration: every
// run at once), zero, a negative one or NaN never makes it overflow.
func TestBatchInterval(t *testing.T) {
	slowest := time.Duration(float64(time.Second) / MinBatchRPS)
	fastest := time.Duration(float64(time.Second) / MaxBatchRPS)
	if slowest != 100*time.Second || fastest != 100*time.Microsecond {
		t.Fatalf("bounds %s and %s", slowest, fastest)
	}
	cases := []struct {
		rps  float64
		want time.Duration
	}{
		{50, 20 * time.Millisecond}, {1, time.Second}, {0.01, slowest}, {MaxBatchRPS, fastest},
		{1e-300, slowest}, {math.SmallestNonzeroFloat64, slowest}, {0.001, slowest}, {0, slowest}, {-1, slowest},
		{math.NaN(), slowest}, {math.Inf(1), fastest}, {1e300, fastest}, {math.Inf(-1), slowest},
	}
	for _, c := range cases {
		if got := batchInterval(c.rps); got != c.want {
			t.Errorf("batchInterval(%v) = %s, want %s", c.rps, got, c.want)
		}
	}
}
