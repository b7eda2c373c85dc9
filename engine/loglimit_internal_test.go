package engine

import (
	"testing"
	"time"
)

// TestLogLimiter: one line per workflow per interval; the lines held back
// are counted in the next one; workflows do not share a budget.
func TestLogLimiter(t *testing.T) {
	var l logLimiter
	at := time.Unix(1000, 0)
	if n, ok := l.allow("w", at); !ok || n != 0 {
		t.Fatalf("first line: %d %v", n, ok)
	}
	for i := 1; i <= 3; i++ {
		if _, ok := l.allow("w", at.Add(time.Duration(i)*time.Second)); ok {
			t.Fatalf("line %d within the interval let through", i)
		}
	}
	if _, ok := l.allow("other", at.Add(time.Second)); !ok {
		t.Fatal("another workflow was held back")
	}
	if n, ok := l.allow("w", at.Add(failureLogInterval)); !ok || n != 3 {
		t.Fatalf("after the interval: %d %v, want the 3 held back", n, ok)
	}
}
