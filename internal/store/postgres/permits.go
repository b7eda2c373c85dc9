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

// PermitAcquire takes, or queues for, a permit of r.Key in one
// transaction: it locks the key's bucket row, deletes the key's expired
// rows, queues the waiter, counts the held permits and the waiters ahead,
// and applies engine.PermitRequest.Decide.
func (s *Store) PermitAcquire(ctx context.Context, r engine.PermitRequest) (engine.PermitGrant, error) {
	var g engine.PermitGrant
	now := rowfmt.ToMs(r.Now)
	err := retry(ctx, func() error {
		return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			var tokens float64
			var updated int64
			if err := tx.QueryRow(ctx, `INSERT INTO limit_buckets (limit_key, tokens, updated_at) VALUES ($1, $2, $3)
				ON CONFLICT (limit_key) DO UPDATE SET limit_key = EXCLUDED.limit_key
				RETURNING tokens, updated_at`, r.Key, max(r.Burst, 1), now).Scan(&tokens, &updated); err != nil {
				return err
			}
			var since int64
			var mine bool
			var nHeld, ahead int
			if err := tx.QueryRow(ctx, `WITH gone AS (
					DELETE FROM limit_permits WHERE limit_key = $1 AND expires_at <= $4 AND waiter <> $2
				), me AS (
					INSERT INTO limit_permits AS p (limit_key, waiter, owner, waiting_since, held, expires_at)
					VALUES ($1, $2, $3, $5, false, $4 + $6)
					ON CONFLICT (limit_key, waiter) DO UPDATE SET owner = EXCLUDED.owner, expires_at = EXCLUDED.expires_at,
						held = p.held AND p.owner = EXCLUDED.owner AND p.expires_at > $4
					RETURNING waiting_since, held
				)
				SELECT me.waiting_since, me.held,
					(SELECT count(*) FROM limit_permits q WHERE q.limit_key = $1 AND q.held AND q.expires_at > $4 AND q.waiter <> $2),
					(SELECT count(*) FROM limit_permits q WHERE q.limit_key = $1 AND NOT q.held AND q.expires_at > $4 AND q.waiter <> $2
						AND (q.waiting_since, q.waiter) < (me.waiting_since, $2))
				FROM me`, r.Key, r.Waiter, r.Owner, now, rowfmt.ToMs(r.WaitingSince), r.LeaseDuration.Milliseconds()).
				Scan(&since, &mine, &nHeld, &ahead); err != nil {
				return err
			}
			if mine {
				g = engine.PermitGrant{Granted: true}
				return nil
			}
			var newTokens float64
			var newUpdated time.Time
			g, newTokens, newUpdated = r.Decide(nHeld, ahead, tokens, rowfmt.FromMs(updated))
			if r.Concurrency <= 0 && (newTokens != tokens || rowfmt.ToMs(newUpdated) != updated) {
				if _, err := tx.Exec(ctx, `UPDATE limit_buckets SET tokens = $2, updated_at = $3 WHERE limit_key = $1`,
					r.Key, newTokens, rowfmt.ToMs(newUpdated)); err != nil {
					return err
				}
			}
			switch {
			case !g.Granted:
			case r.Concurrency > 0:
				_, err := tx.Exec(ctx, `UPDATE limit_permits SET held = true WHERE limit_key = $1 AND waiter = $2`, r.Key, r.Waiter)
				return err
			default:
				_, err := tx.Exec(ctx, `DELETE FROM limit_permits WHERE limit_key = $1 AND waiter = $2`, r.Key, r.Waiter)
				return err
			}
			return nil
		})
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
