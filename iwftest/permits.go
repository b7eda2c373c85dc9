package iwftest

import (
	"context"
	"errors"
	"time"

	"github.com/iwf-server/iwf-server/engine"
)

// observedStore keeps the permits of the limits on worker calls as the
// store it observes does (engine.PermitStore): an Env applies limits set
// at run time (engine.SetLimit, POST /api/v1/limit/set) as a server does.
var _ engine.PermitStore = (*observedStore)(nil)

var errNoPermits = errors.New("iwftest: the store keeps no permits")

func (s *observedStore) permits() (engine.PermitStore, error) {
	ps, ok := s.Store.(engine.PermitStore)
	if !ok {
		return nil, errNoPermits
	}
	return ps, nil
}

// PermitAcquire implements engine.PermitStore.
func (s *observedStore) PermitAcquire(ctx context.Context, r engine.PermitRequest) (engine.PermitGrant, error) {
	ps, err := s.permits()
	if err != nil {
		return engine.PermitGrant{}, err
	}
	return ps.PermitAcquire(ctx, r)
}

// PermitRenew implements engine.PermitStore.
func (s *observedStore) PermitRenew(ctx context.Context, owner string, waiters []int64, now time.Time, d time.Duration) ([]int64, error) {
	ps, err := s.permits()
	if err != nil {
		return nil, err
	}
	return ps.PermitRenew(ctx, owner, waiters, now, d)
}

// PermitRelease implements engine.PermitStore.
func (s *observedStore) PermitRelease(ctx context.Context, owner string, waiters []int64) ([]string, error) {
	ps, err := s.permits()
	if err != nil {
		return nil, err
	}
	return ps.PermitRelease(ctx, owner, waiters)
}

// PermitReleaseOthers implements engine.PermitStore.
func (s *observedStore) PermitReleaseOthers(ctx context.Context, keepOwner string) (int64, error) {
	ps, err := s.permits()
	if err != nil {
		return 0, err
	}
	return ps.PermitReleaseOthers(ctx, keepOwner)
}

// PermitWaiting implements engine.PermitStore.
func (s *observedStore) PermitWaiting(ctx context.Context, waiters []int64) (map[int64]engine.PermitWait, error) {
	ps, err := s.permits()
	if err != nil {
		return nil, err
	}
	return ps.PermitWaiting(ctx, waiters)
}
