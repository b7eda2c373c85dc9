package dbclock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/engine"
)

func TestFakeTimeOffset(t *testing.T) {
	lib := "/usr/$LIB/faketime/libfaketime.so.1"
	for _, c := range []struct {
		preload, spec string
		want          time.Duration
		ok            bool
	}{
		{lib, "+90s", 90 * time.Second, true},
		{lib, "-90", -90 * time.Second, true},
		{lib, "+1.5m", 90 * time.Second, true},
		{lib, "-2h", -2 * time.Hour, true},
		{lib, "@2020-01-01 00:00:00", 0, false},
		{lib, "+x", 0, false},
		{lib, "", 0, false},
		{"", "+90s", 0, false},
	} {
		got, ok := fakeTimeOffset(c.preload, c.spec)
		if got != c.want || ok != c.ok {
			t.Errorf("fakeTimeOffset(%q, %q) = %s, %v; want %s, %v", c.preload, c.spec, got, ok, c.want, c.ok)
		}
	}
}

// fixed is a clock that reads a settable time.
type fixed struct{ now time.Time }

func (f *fixed) Now() time.Time                        { return f.now }
func (f *fixed) NewTimer(d time.Duration) engine.Timer { return engine.SystemClock{}.NewTimer(d) }

// TestOffsetFromShortestRoundTrip: the offset comes from the sample with
// the shortest round trip, corrected by half of it.
func TestOffsetFromShortestRoundTrip(t *testing.T) {
	node := &fixed{now: time.Unix(1000, 0)}
	rtts := []time.Duration{400 * time.Millisecond, 10 * time.Millisecond, 100 * time.Millisecond}
	i := 0
	// The database is 90 s behind the node; a read takes rtt, the
	// database reads its clock half-way.
	src := func(context.Context) (time.Time, error) {
		rtt := rtts[i%len(rtts)]
		i++
		db := node.now.Add(rtt / 2).Add(-90 * time.Second)
		node.now = node.now.Add(rtt)
		return db, nil
	}
	c := New(node, src)
	if err := c.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	off, bound := c.Offset()
	if off != -90*time.Second || bound != 5*time.Millisecond {
		t.Fatalf("offset %s ± %s, want -90s ± 5ms", off, bound)
	}
	if got, want := c.Now(), node.now.Add(-90*time.Second); !got.Equal(want) {
		t.Fatalf("Now() = %s, want %s", got, want)
	}
	// A failing source keeps the offset in force.
	c.source = func(context.Context) (time.Time, error) { return time.Time{}, errors.New("down") }
	if err := c.sampleOnce(context.Background()); err == nil {
		t.Fatal("want the source's error")
	}
	if off2, _ := c.Offset(); off2 != off {
		t.Fatalf("offset moved to %s after a failed sample", off2)
	}
}
