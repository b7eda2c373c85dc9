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
