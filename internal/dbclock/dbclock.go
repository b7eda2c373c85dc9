// Package dbclock gives the engine of a node the database server's clock.
//
// Several nodes on one PostgreSQL database agree on time through the
// database: task due times, timer due times, lease expiries and claims are
// all compared in SQL with times the nodes wrote. When each node wrote its
// own clock's reading, a node whose clock is ahead would claim timers before
// they are due (by every other clock) and take over leases that have not
// expired; one behind would fire timers late. A Clock reads the node's
// clock plus an offset measured against the database's clock_timestamp()
// every second, so that every node writes and compares times of one clock:
// the database's.
//
// The offset is measured as NTP does, from the sample with the shortest
// round trip in a sliding window: offset = db − (sent + rtt/2), exact to
// within rtt/2 of that sample (on one host or one LAN, well under a
// millisecond; through a link with 200 ms of latency each way, under 200
// ms). Until the first sample, and while the database does not answer, the
// last offset (0 at first) stays in force: a node cut off from its database
// can commit nothing anyway.
package dbclock

import (
	"context"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/iwf-server/iwf-server/engine"
)

// Source reads the database's clock.
type Source func(ctx context.Context) (time.Time, error)

// DefaultInterval is how often a Clock samples the database's clock.
const DefaultInterval = time.Second

// window is how many samples the offset is chosen from.
const window = 30

// Clock is an engine.Clock that reads the node's clock corrected by the
// measured offset to the database's clock.
type Clock struct {
	base   engine.Clock
	source Source

	mu      sync.Mutex
	samples []sample // the last window samples
	offset  time.Duration
	bound   time.Duration // half the round trip of the sample in force; -1: none yet

	stop chan struct{}
	done chan struct{}
}

type sample struct {
	offset, rtt time.Duration
}

// New returns a Clock on base (the node's clock) that samples source. Call
// Sync before the engine starts and Start to keep the offset current.
func New(base engine.Clock, source Source) *Clock {
	return &Clock{base: base, source: source, bound: -1, stop: make(chan struct{}), done: make(chan struct{})}
}

// Now is the node's time plus the offset to the database's clock.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	off := c.offset
	c.mu.Unlock()
	return c.base.Now().Add(off)
}

// NewTimer is the base clock's timer: durations need no correction.
func (c *Clock) NewTimer(d time.Duration) engine.Timer { return c.base.NewTimer(d) }

// Offset returns the offset in force (database minus node) and its error
// bound (half the round trip of its sample; negative before any sample).
func (c *Clock) Offset() (offset, bound time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.offset, c.bound
}

// sampleOnce takes one sample and updates the offset; it reports the error
// of the read.
func (c *Clock) sampleOnce(ctx context.Context) error {
	sent := c.base.Now()
	db, err := c.source(ctx)
	if err != nil {
		return err
	}
	recv := c.base.Now()
	rtt := recv.Sub(sent)
	s := sample{offset: db.Sub(sent.Add(rtt / 2)), rtt: rtt}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.samples = append(c.samples, s)
	if len(c.samples) > window {
		c.samples = c.samples[len(c.samples)-window:]
	}
	best := c.samples[0]
	for _, x := range c.samples[1:] {
		if x.rtt < best.rtt {
			best = x
		}
	}
	c.offset, c.bound = best.offset, best.rtt/2
	return nil
}

// Sync takes a few samples at once (until one succeeds or ctx ends, at most
// five), so that the engine starts on the database's clock.
func (c *Clock) Sync(ctx context.Context) error {
	var last error
	for range 5 {
		if err := c.sampleOnce(ctx); err != nil {
			last = err
			if ctx.Err() != nil {
				return last
			}
			continue
		}
		last = nil
	}
	return last
}

// Start samples the database's clock every interval (DefaultInterval when
// 0) until Stop. A failed sample keeps the offset in force.
func (c *Clock) Start(interval time.Duration) {
	if interval <= 0 {
		interval = DefaultInterval
	}
	go func() {
		defer close(c.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-c.stop:
				return
			case <-t.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), interval*5)
			_ = c.sampleOnce(ctx)
			cancel()
		}
	}()
}

// Stop ends the sampling that Start began.
func (c *Clock) Stop() {
	select {
	case <-c.stop:
		return
	default:
	}
	close(c.stop)
	<-c.done
}

// NodeClock is the node's own clock: the system clock, shifted as
// libfaketime would shift it when the process runs under libfaketime with
// a relative offset (FAKETIME="+90s", "-1.5m", ...). Go reads the time
// through the vDSO, not through the C library, so libfaketime's LD_PRELOAD
// does not reach it (a cgo build included); reading FAKETIME here lets
// `faketime -f +90s iwf-server ...` skew the node as it would a C program,
// which is how the clock-skew tests run a node with a wrong clock. Without
// libfaketime preloaded it is engine.SystemClock.
func NodeClock() engine.Clock {
	if d, ok := fakeTimeOffset(os.Getenv("LD_PRELOAD"), os.Getenv("FAKETIME")); ok {
		return shifted{d}
	}
	return engine.SystemClock{}
}

// fakeTimeOffset parses libfaketime's relative form: "+90", "-90s",
// "+1.5m", "+2h", "+1d" (seconds without a unit). Absolute times ("@2020-01-01
// ...") and rates are not supported: ok is false.
func fakeTimeOffset(preload, spec string) (time.Duration, bool) {
	if !strings.Contains(preload, "libfaketime") || spec == "" {
		return 0, false
	}
	spec = strings.TrimSpace(spec)
	if spec[0] != '+' && spec[0] != '-' {
		return 0, false
	}
	unit := time.Second
	switch spec[len(spec)-1] {
	case 's':
		spec = spec[:len(spec)-1]
	case 'm':
		unit, spec = time.Minute, spec[:len(spec)-1]
	case 'h':
		unit, spec = time.Hour, spec[:len(spec)-1]
	case 'd':
		unit, spec = 24*time.Hour, spec[:len(spec)-1]
	}
	v, err := strconv.ParseFloat(spec[1:], 64)
	if err != nil || v < 0 {
		return 0, false
	}
	d := time.Duration(v * float64(unit))
	if spec[0] == '-' {
		d = -d
	}
	return d, true
}

// shifted is the system clock plus a fixed offset.
type shifted struct{ d time.Duration }

func (s shifted) Now() time.Time                        { return time.Now().Add(s.d) }
func (s shifted) NewTimer(d time.Duration) engine.Timer { return engine.SystemClock{}.NewTimer(d) }
