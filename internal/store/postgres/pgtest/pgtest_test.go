package pgtest

import (
	"testing"
	"time"
)

// TestReachableFailsFast checks that an unreachable server is reported
// within a bounded time (the probe's budget is 2 s; the bound below leaves
// room for a loaded machine and is still far below a TCP connect timeout),
// so that URL skips quickly.
func TestReachableFailsFast(t *testing.T) {
	start := time.Now()
	if err := reachable("postgres://postgres@127.0.0.1:1/test?sslmode=disable"); err == nil {
		t.Fatal("reachable reported a closed port as reachable")
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Fatalf("probe took %v", d)
	}
}
