package engine

import (
	"testing"
	"time"
)

// TestRunAt: a state call made due "now" runs within its due millisecond
// (its due time is rounded up to the millisecond), a timer or a timeout
// never before its due time.
func TestRunAt(t *testing.T) {
	created := time.UnixMilli(1_000_000).Add(300 * time.Microsecond) // 0.3 ms into a millisecond
	due := ceilMillisecond(created)
	if want := time.UnixMilli(1_000_001); !due.Equal(want) {
		t.Fatalf("ceilMillisecond(%v) = %v, want %v", created, due, want)
	}
	for _, kind := range []TaskKind{TaskWaitUntil, TaskExecute} {
		at := runAt(&Task{Kind: kind, DueAt: due})
		if at.After(created) {
			t.Errorf("%s created at %v, due %v: runs at %v, after its creation", kind, created, due, at)
		}
		if !at.After(due.Add(-time.Millisecond)) {
			t.Errorf("%s due %v: runs at %v, before its due millisecond began", kind, due, at)
		}
	}
	for _, kind := range []TaskKind{TaskTimer, TaskTimeout} {
		if at := runAt(&Task{Kind: kind, DueAt: due}); !at.Equal(due) {
			t.Errorf("%s due %v: runs at %v, want its due time", kind, due, at)
		}
	}
}
