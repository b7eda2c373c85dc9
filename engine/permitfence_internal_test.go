package engine

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/engine/internal/record"
)

// grantingPermits is a PermitStore that grants every permit, fails every
// renewal while failRenew is set, and records the waiters it was asked to
// release.
type grantingPermits struct {
	mu        sync.Mutex
	failRenew bool
	released  []int64
}

func (p *grantingPermits) PermitAcquire(context.Context, PermitRequest) (PermitGrant, error) {
	return PermitGrant{Granted: true, Free: 1}, nil
}
func (p *grantingPermits) PermitRenew(_ context.Context, _ string, ids []int64, _ time.Time, _ time.Duration) ([]int64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.failRenew {
		return nil, errors.New("renewal failed")
	}
	return ids, nil
}
func (p *grantingPermits) PermitRelease(_ context.Context, _ string, ids []int64) ([]string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.released = append(p.released, ids...)
	return nil, nil
}
func (p *grantingPermits) PermitReleaseOthers(context.Context, string) (int64, error) { return 0, nil }
func (p *grantingPermits) PermitWaiting(context.Context, []int64) (map[int64]PermitWait, error) {
	return nil, nil
}

// TestFencedCallKeepsItsPermits: a call cancelled by its fence (its
// permit's lease could not be renewed in time) does not give its permit
// back when it ends: the worker may still be running the request that was
// cut off, and a permit released at once would let another call of the
// limit in beside it (make test-stress saw a worker limited to 5 get 6
// calls at once). The rows expire with their lease instead. A call that
// ends normally releases at once.
func TestFencedCallKeepsItsPermits(t *testing.T) {
	ps := &grantingPermits{}
	lease := 2 * time.Second
	e := &Engine{cfg: Config{Clock: &steppingClock{times: []time.Time{time.UnixMilli(1_795_843_077_112)}}, NodeID: "n",
		LeaseDuration: lease}, metrics: newMetrics()}
	l := &limiter{e: e, ps: ps, queues: map[string]*permitQueue{}, held: map[int64]*heldPermits{},
		waitSince: map[int64]map[string]time.Time{}, stats: map[string]*limitStats{}}
	l.cur.Store(&Limits{WorkerConcurrency: map[string]int{"w.example:80": 5}})
	s := &apiSnapshot{run: &Run{WorkflowType: "T"}, rd: &record.Run{WorkerURL: "http://w.example/"}}
	call := func(id int64) (context.Context, func()) {
		t.Helper()
		fence, release, err := l.acquire(context.Background(), &Task{ID: id}, s)
		if err != nil || fence == nil {
			t.Fatalf("task %d: acquire: fence %v, err %v", id, fence != nil, err)
		}
		ctx, cancel := fence(context.Background())
		t.Cleanup(cancel)
		return ctx, release
	}

	// Task 1 ends normally: its permit goes back.
	_, release1 := call(1)
	release1()
	if !slices.Equal(ps.released, []int64{1}) {
		t.Fatalf("after a normal end, released %v, want [1]", ps.released)
	}

	// Task 2's renewals fail until its lease would run out before the
	// next one: the fence cancels it.
	ctx2, release2 := call(2)
	now := time.UnixMilli(1_795_843_077_112)
	l.lastRenew = now
	ps.failRenew = true
	every := lease / 4
	l.renew(context.Background(), now.Add(every), every)
	if ctx2.Err() != nil {
		t.Fatalf("cancelled after one failed renewal with most of the lease left: %v", context.Cause(ctx2))
	}
	l.renew(context.Background(), now.Add(lease-every), every)
	if !errors.Is(context.Cause(ctx2), errPermitLost) {
		t.Fatalf("call's context: err %v, cause %v; want cancelled with errPermitLost", ctx2.Err(), context.Cause(ctx2))
	}
	release2()
	if !slices.Equal(ps.released, []int64{1}) {
		t.Fatalf("the fenced call's permit was released (released %v): another call could run beside the one cut off", ps.released)
	}
	if n := l.heldCounts()["worker:w.example:80"]; n != 0 {
		t.Fatalf("permits held here after the fenced call ended: %d, want 0 (no longer renewed)", n)
	}
	// Task 3 ends normally again: released at once.
	ps.failRenew = false
	_, release3 := call(3)
	release3()
	if !slices.Equal(ps.released, []int64{1, 3}) {
		t.Fatalf("released %v, want [1 3]", ps.released)
	}
}
