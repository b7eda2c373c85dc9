package engine

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/engine/internal/record"
)

// refusingPermits is a PermitStore that queues every waiter and grants
// nothing, recording the moment each began to wait as it was asked to
// keep it.
type refusingPermits struct{ since map[int64]time.Time }

func (p *refusingPermits) PermitAcquire(_ context.Context, r PermitRequest) (PermitGrant, error) {
	p.since[r.Waiter] = r.WaitingSince
	return PermitGrant{Ahead: 5}, nil
}
func (p *refusingPermits) PermitRenew(context.Context, string, []int64, time.Time, time.Duration) ([]int64, error) {
	return nil, nil
}
func (p *refusingPermits) PermitRelease(context.Context, string, []int64) ([]string, error) {
	return nil, nil
}
func (p *refusingPermits) PermitReleaseOthers(context.Context, string) (int64, error) { return 0, nil }
func (p *refusingPermits) PermitWaiting(context.Context, []int64) (map[int64]PermitWait, error) {
	return nil, nil
}

// steppingClock returns the times listed, one per Now; its timers never
// fire.
type steppingClock struct{ times []time.Time }

func (c *steppingClock) Now() time.Time {
	t := c.times[0]
	if len(c.times) > 1 {
		c.times = c.times[1:]
	}
	return t
}
func (c *steppingClock) NewTimer(time.Duration) Timer { return stoppedTimer{} }

type stoppedTimer struct{}

func (stoppedTimer) C() <-chan time.Time { return nil }
func (stoppedTimer) Stop() bool          { return true }

// TestParkedCallsInStoreOrder: calls that begin to wait for a limit within
// one millisecond are queued in this process in the store's FIFO order
// (the moment in whole milliseconds, then the task id), whatever order
// their sub-millisecond times give, and the store is asked to keep that
// same moment. Queued by the finer time, the head of this process's
// queue was a call the store refused for ever (five waiters ahead of it
// under a limit of five), and the five, behind it here, were never woken:
// every call of the limit stalled.
func TestParkedCallsInStoreOrder(t *testing.T) {
	base := time.UnixMilli(1_795_843_077_112)
	// Tasks 6, 5, …, 1 begin to wait in this order, 1 µs apart, all
	// within one millisecond.
	var times []time.Time
	for i := range 6 {
		times = append(times, base.Add(time.Duration(i+1)*time.Microsecond))
	}
	ps := &refusingPermits{since: map[int64]time.Time{}}
	e := &Engine{cfg: Config{Clock: &steppingClock{times: times}, NodeID: "n", LeaseDuration: time.Minute}}
	l := &limiter{e: e, ps: ps, queues: map[string]*permitQueue{}, held: map[int64]*heldPermits{},
		waitSince: map[int64]map[string]time.Time{}, stats: map[string]*limitStats{}}
	l.cur.Store(&Limits{WorkerConcurrency: map[string]int{"w.example:80": 5}})
	s := &apiSnapshot{run: &Run{WorkflowType: "T"}, rd: &record.Run{WorkerURL: "http://w.example/"}}
	for id := int64(6); id >= 1; id-- {
		if _, _, err := l.acquire(context.Background(), &Task{ID: id}, s); err != errLimitWait {
			t.Fatalf("task %d: %v, want errLimitWait", id, err)
		}
	}
	var order []int64
	for _, task := range l.queues["worker:w.example:80"].tasks {
		order = append(order, task.ID)
	}
	if want := []int64{1, 2, 3, 4, 5, 6}; !slices.Equal(order, want) {
		t.Errorf("queued here as %v, the store's order is %v", order, want)
	}
	for id, since := range ps.since {
		if !since.Equal(base) {
			t.Errorf("task %d: the store was asked to keep %s, want %s", id, since.Format(time.RFC3339Nano), base.Format(time.RFC3339Nano))
		}
	}
}
