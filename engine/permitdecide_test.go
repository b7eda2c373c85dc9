package engine_test

import (
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/engine"
)

// TestDecideWholeMilliseconds: a rate limit's bucket is refilled in whole
// milliseconds, the precision the stores keep its time in, so that the part
// of a millisecond after the time stored is not counted twice; RetryAfter is
// whole milliseconds too.
func TestDecideWholeMilliseconds(t *testing.T) {
	stored := time.UnixMilli(1_700_000_000_000).UTC()
	r := engine.PermitRequest{Rate: 1000, Burst: 1} // a token per millisecond
	r.Now = stored.Add(900 * time.Microsecond)
	g, tokens, updated := r.Decide(0, 0, 0, stored)
	if g.Granted || tokens != 0 || !updated.Equal(stored) || g.RetryAfter != time.Millisecond {
		t.Errorf("0.9 ms after: %+v, tokens %g, updated %v; want no refill, RetryAfter 1ms", g, tokens, updated)
	}
	r.Now = stored.Add(1900 * time.Microsecond)
	g, tokens, updated = r.Decide(0, 0, 0, stored)
	if !g.Granted || tokens != 0 || !updated.Equal(stored.Add(time.Millisecond)) {
		t.Errorf("1.9 ms after: %+v, tokens %g, updated %v; want granted, updated 1 ms after", g, tokens, updated)
	}
}

// TestDecidePaused: a limit of 0 grants nothing, to a concurrency limit
// with every permit free or to a rate limit with a full bucket, and leaves
// the bucket as it was (its refill resumes when the limit rises).
func TestDecidePaused(t *testing.T) {
	stored := time.UnixMilli(1_700_000_000_000).UTC()
	now := stored.Add(time.Hour)
	for _, r := range []engine.PermitRequest{
		{Now: now, Paused: true},
		{Now: now, Paused: true, Rate: 0, Burst: 1},
	} {
		g, tokens, updated := r.Decide(0, 2, 1, stored)
		if g.Granted || g.Ahead != 2 || g.RetryAfter != 0 || tokens != 1 || !updated.Equal(stored) {
			t.Errorf("%+v: %+v, tokens %g, updated %v; want nothing granted, the bucket unchanged", r, g, tokens, updated)
		}
	}
	// Raised: the bucket refills from the time stored.
	g, _, _ := engine.PermitRequest{Now: now, Rate: 1, Burst: 1}.Decide(0, 0, 0, stored)
	if !g.Granted {
		t.Errorf("raised after a pause: %+v", g)
	}
}
