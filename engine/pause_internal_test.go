package engine

import (
	"testing"

	"github.com/iwf-server/iwf-server/engine/internal/record"
)

// TestPauseCacheHoldsOwnPause: a scope a node paused is in its cache from
// the commit on, whatever its reads of the scopes do: one that began
// before the commit (the refresh loop's) and ends after the node's own
// re-read cannot take it out, nor can one that ends before it, nor a
// re-read that failed (none applied).
func TestPauseCacheHoldsOwnPause(t *testing.T) {
	scope := pauseTypePrefix + "T"
	paused := func(p *pauses) bool {
		e := &Engine{pauses: p}
		return e.pausedBy("T", &record.Run{}) == scope
	}
	for _, c := range []struct {
		name string
		run  func(p *pauses)
	}{
		{"stale read ends after the re-read", func(p *pauses) {
			stale := p.begin()
			p.hold(&Pause{Scope: scope})
			p.apply(p.begin(), pauseSet{scope: {Scope: scope}})
			p.apply(stale, pauseSet{})
		}},
		{"stale read ends before the re-read", func(p *pauses) {
			stale := p.begin()
			p.hold(&Pause{Scope: scope})
			p.apply(stale, pauseSet{})
			p.apply(p.begin(), pauseSet{scope: {Scope: scope}})
		}},
		{"re-read failed", func(p *pauses) {
			stale := p.begin()
			p.hold(&Pause{Scope: scope})
			p.begin() // the re-read, which fails: nothing applied
			p.apply(stale, pauseSet{})
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := newPauses()
			p.apply(p.begin(), pauseSet{})
			c.run(p)
			if !paused(p) {
				t.Fatalf("the node's cache lost the scope it paused: %v", *p.set.Load())
			}
		})
	}
	// A read that began after the change is applied: another node resumed
	// the scope meanwhile.
	p := newPauses()
	p.hold(&Pause{Scope: scope})
	if p.apply(p.begin(), pauseSet{}); paused(p) {
		t.Fatalf("a read that began after the pause did not apply")
	}
}
