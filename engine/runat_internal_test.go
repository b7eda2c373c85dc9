package engine

import (
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/engine/internal/record"
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

// TestTimerFireAtNeverEarly checks that a duration timer's stored firing
// time (whole milliseconds) is never before now plus its duration.
func TestTimerFireAtNeverEarly(t *testing.T) {
	d := int64(60)
	for _, now := range []time.Time{
		time.UnixMilli(1_700_000_000_123),                             // on a millisecond
		time.UnixMilli(1_700_000_000_123).Add(400 * time.Microsecond), // within one
		time.UnixMilli(1_700_000_000_123).Add(999_999 * time.Nanosecond),
	} {
		got := timerFireAt(record.TimerCommand{DurationSeconds: &d}, now)
		want := now.Add(time.Minute)
		if time.UnixMilli(got).Before(want) {
			t.Errorf("now %s: fires at %d ms, before %s", now.Format(time.RFC3339Nano), got, want.Format(time.RFC3339Nano))
		}
		if time.UnixMilli(got).Sub(want) >= time.Millisecond {
			t.Errorf("now %s: fires at %d ms, a millisecond or more after %s", now.Format(time.RFC3339Nano), got, want.Format(time.RFC3339Nano))
		}
	}
}
