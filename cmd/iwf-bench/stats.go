package main

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"
)

// percentile returns the p-th percentile (0 < p <= 100) of sorted values by
// the nearest-rank method: the smallest value such that at least p percent
// of the values are less than or equal to it. It returns 0 for no values.
func percentile(sorted []time.Duration, p float64) time.Duration {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(n)))
	rank = min(max(rank, 1), n)
	return sorted[rank-1]
}

// dist summarises a set of durations.
type dist struct {
	n                       int
	p50, p95, p99, max, min time.Duration
}

// summarize sorts values in place and returns their distribution.
func summarize(values []time.Duration) dist {
	slices.Sort(values)
	d := dist{n: len(values)}
	if d.n == 0 {
		return d
	}
	d.p50 = percentile(values, 50)
	d.p95 = percentile(values, 95)
	d.p99 = percentile(values, 99)
	d.min, d.max = values[0], values[d.n-1]
	return d
}

// fmtDur prints a latency in milliseconds with a precision that suits its
// size: "0.84 ms", "12.3 ms", "1204 ms".
func fmtDur(d time.Duration) string {
	ms := float64(d) / float64(time.Millisecond)
	switch a := math.Abs(ms); {
	case a < 10:
		return fmt.Sprintf("%.2f ms", ms)
	case a < 100:
		return fmt.Sprintf("%.1f ms", ms)
	default:
		return fmt.Sprintf("%.0f ms", ms)
	}
}

// fmtInt prints n with thousands separators.
func fmtInt(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := n < 0
	if neg {
		s = s[1:]
	}
	var out []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}

// fmtRate prints a rate per second: one decimal below 100, none above.
func fmtRate(r float64) string {
	if r < 100 {
		return fmt.Sprintf("%.1f", r)
	}
	return fmtInt(int64(math.Round(r)))
}

// fmtMB prints a byte count in MiB.
func fmtMB(b int64) string {
	return fmt.Sprintf("%.0f MB", float64(b)/(1<<20))
}
