package postgres

// The permits of concurrency and rate limits (engine.PermitStore): rows of
// limit_permits, counted under a row lock of the key's limit_buckets row,
// so that every node sharing the database sees one count.

import (
	"context"
	"fmt"
	"time"

	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/store/rowfmt"

	"github.com/jackc/pgx/v5"
)

var _ engine.PermitStore = (*Store)(nil)

// PermitAcquire takes, or queues for, a permit of r.Key in one round
// trip: iwf_permit_acquire (migration 0009) applies
// engine.PermitRequest.Decide's rule under a row lock of the key's bucket.
func (s *Store) PermitAcquire(ctx context.Context, r engine.PermitRequest) (engine.PermitGrant, error) {
	var g engine.PermitGrant
	err := retry(ctx, func() error {
		var retryMs int64
		err := s.pool.QueryRow(ctx, `SELECT granted, free, ahead, retry_ms FROM iwf_permit_acquire($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
			r.Key, r.Waiter, r.Owner, rowfmt.ToMs(r.WaitingSince), rowfmt.ToMs(r.Now), r.LeaseDuration.Milliseconds(),
			r.Concurrency, r.Rate, r.Burst).Scan(&g.Granted, &g.Free, &g.Ahead, &retryMs)
		g.RetryAfter = time.Duration(retryMs) * time.Millisecond
		return err
	})
	if err != nil {
		return engine.PermitGrant{}, classify(ctx, fmt.Errorf("postgres: PermitAcquire: %w", err))
	}
	return g, nil
}

// PermitRenew extends owner's unexpired rows of waiters.
func (s *Store) PermitRenew(ctx context.Context, owner string, waiters []int64, now time.Time, duration time.Duration) ([]int64, error) {
	if len(waiters) == 0 {
		return nil, nil
	}
	var held []int64
	err := retry(ctx, func() error {
		held = held[:0]
		rows, err := s.pool.Query(ctx, `UPDATE limit_permits SET expires_at = $3::bigint + $4::bigint
			WHERE owner = $1 AND waiter = ANY($2::bigint[]) AND expires_at > $3::bigint
			RETURNING waiter, held`, owner, waiters, rowfmt.ToMs(now), duration.Milliseconds())
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var w int64
			var h bool
			if err := rows.Scan(&w, &h); err != nil {
				return err
			}
			if h {
				held = append(held, w)
			}
		}
		return rows.Err()
	})
	if err != nil {
		return nil, classify(ctx, fmt.Errorf("postgres: PermitRenew: %w", err))
	}
	return held, nil
}

// PermitRelease deletes owner's rows of waiters (all of owner's when nil).
func (s *Store) PermitRelease(ctx context.Context, owner string, waiters []int64) ([]string, error) {
	var keys []string
	err := retry(ctx, func() error {
		keys = keys[:0]
		rows, err := s.pool.Query(ctx, `WITH d AS (DELETE FROM limit_permits
				WHERE owner = $1 AND ($2::bigint[] IS NULL OR waiter = ANY($2::bigint[])) RETURNING limit_key)
			SELECT DISTINCT limit_key FROM d ORDER BY limit_key`, owner, waiters)
		if err != nil {
			return err
		}
		keys, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	if err != nil {
		return nil, classify(ctx, fmt.Errorf("postgres: PermitRelease: %w", err))
	}
	return keys, nil
}

// PermitReleaseOthers deletes every row not owned by keepOwner.
func (s *Store) PermitReleaseOthers(ctx context.Context, keepOwner string) (int64, error) {
	var n int64
	err := retry(ctx, func() error {
		tag, err := s.pool.Exec(ctx, `DELETE FROM limit_permits WHERE owner <> $1`, keepOwner)
		n = tag.RowsAffected()
		return err
	})
	if err != nil {
		return 0, classify(ctx, fmt.Errorf("postgres: PermitReleaseOthers: %w", err))
	}
	return n, nil
}

// PermitWaiting returns the queue each waiter listed waits in.
func (s *Store) PermitWaiting(ctx context.Context, waiters []int64) (map[int64]engine.PermitWait, error) {
	out := map[int64]engine.PermitWait{}
	if len(waiters) == 0 {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT waiter, limit_key, waiting_since FROM limit_permits
		WHERE waiter = ANY($1::bigint[]) AND NOT held ORDER BY waiter, limit_key`, waiters)
	if err != nil {
		return nil, classify(ctx, fmt.Errorf("postgres: PermitWaiting: %w", err))
	}
	defer rows.Close()
	for rows.Next() {
		var w, since int64
		var key string
		if err := rows.Scan(&w, &key, &since); err != nil {
			return nil, classify(ctx, fmt.Errorf("postgres: PermitWaiting: %w", err))
		}
		if _, ok := out[w]; !ok {
			out[w] = engine.PermitWait{Key: key, Since: rowfmt.FromMs(since)}
		}
	}
	if err := rows.Err(); err != nil {
		return nil, classify(ctx, fmt.Errorf("postgres: PermitWaiting: %w", err))
	}
	return out, nil
}
