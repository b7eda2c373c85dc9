package sqlite

// The permits of concurrency and rate limits (engine.PermitStore). One
// process uses a SQLite file, so the rows could live in its memory; they
// live in the file all the same, so that the engine and the conformance
// suite see one implementation of the rule on both stores (see
// docs/architecture.md). SQLite's single writer serialises acquisitions.

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/store/rowfmt"
)

var _ engine.PermitStore = (*Store)(nil)

// permitTx runs fn in a write transaction on the raw SQL transaction.
func (s *Store) permitTx(ctx context.Context, op string, fn func(tx *sql.Tx) error) error {
	err := s.Update(ctx, func(ctx context.Context, tx engine.Tx) error { return fn(tx.(*txn).tx) })
	if err != nil {
		return classify(ctx, fmt.Errorf("sqlite: %s: %w", op, err))
	}
	return nil
}

// PermitAcquire takes, or queues for, a permit of r.Key: it deletes the
// key's expired rows, queues the waiter, counts the held permits and the
// waiters ahead, and applies engine.PermitRequest.Decide.
func (s *Store) PermitAcquire(ctx context.Context, r engine.PermitRequest) (engine.PermitGrant, error) {
	var g engine.PermitGrant
	now := rowfmt.ToMs(r.Now)
	err := s.permitTx(ctx, "PermitAcquire", func(tx *sql.Tx) error {
		g = engine.PermitGrant{}
		var tokens float64
		var updated int64
		if err := tx.QueryRowContext(ctx, `INSERT INTO limit_buckets (limit_key, tokens, updated_at) VALUES (?1, ?2, ?3)
			ON CONFLICT (limit_key) DO UPDATE SET limit_key = excluded.limit_key
			RETURNING tokens, updated_at`, r.Key, max(r.Burst, 1), now).Scan(&tokens, &updated); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM limit_permits WHERE limit_key = ?1 AND expires_at <= ?2 AND waiter <> ?3`,
			r.Key, now, r.Waiter); err != nil {
			return err
		}
		var since int64
		var mine bool
		if err := tx.QueryRowContext(ctx, `INSERT INTO limit_permits AS p (limit_key, waiter, owner, waiting_since, held, expires_at)
			VALUES (?1, ?2, ?3, ?5, 0, ?4 + ?6)
			ON CONFLICT (limit_key, waiter) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at,
				held = p.held AND p.owner = excluded.owner AND p.expires_at > ?4
				WHERE p.owner = excluded.owner OR p.expires_at <= ?4
			RETURNING waiting_since, held`, r.Key, r.Waiter, r.Owner, now, rowfmt.ToMs(r.WaitingSince), r.LeaseDuration.Milliseconds()).
			Scan(&since, &mine); errors.Is(err, sql.ErrNoRows) {
			return nil // another owner's live row of this waiter: wait, never count it twice
		} else if err != nil {
			return err
		}
		if mine {
			g = engine.PermitGrant{Granted: true}
			return nil
		}
		var nHeld, ahead int
		if err := tx.QueryRowContext(ctx, `SELECT
				coalesce(sum(held), 0),
				coalesce(sum(NOT held AND (waiting_since < ?3 OR (waiting_since = ?3 AND waiter < ?2))), 0)
			FROM limit_permits WHERE limit_key = ?1 AND waiter <> ?2 AND expires_at > ?4`, r.Key, r.Waiter, since, now).
			Scan(&nHeld, &ahead); err != nil {
			return err
		}
		var newTokens float64
		var newUpdated time.Time
		g, newTokens, newUpdated = r.Decide(nHeld, ahead, tokens, rowfmt.FromMs(updated))
		if r.Concurrency <= 0 && (newTokens != tokens || rowfmt.ToMs(newUpdated) != updated) {
			if _, err := tx.ExecContext(ctx, `UPDATE limit_buckets SET tokens = ?2, updated_at = ?3 WHERE limit_key = ?1`,
				r.Key, newTokens, rowfmt.ToMs(newUpdated)); err != nil {
				return err
			}
		}
		switch {
		case !g.Granted:
		case r.Concurrency > 0:
			_, err := tx.ExecContext(ctx, `UPDATE limit_permits SET held = 1 WHERE limit_key = ?1 AND waiter = ?2`, r.Key, r.Waiter)
			return err
		default:
			_, err := tx.ExecContext(ctx, `DELETE FROM limit_permits WHERE limit_key = ?1 AND waiter = ?2`, r.Key, r.Waiter)
			return err
		}
		return nil
	})
	return g, err
}

// PermitRenew extends owner's unexpired rows of waiters.
func (s *Store) PermitRenew(ctx context.Context, owner string, waiters []int64, now time.Time, duration time.Duration) ([]int64, error) {
	if len(waiters) == 0 {
		return nil, nil
	}
	list, _ := json.Marshal(waiters)
	var held []int64
	err := s.permitTx(ctx, "PermitRenew", func(tx *sql.Tx) error {
		held = held[:0]
		rows, err := tx.QueryContext(ctx, `UPDATE limit_permits SET expires_at = ?3 + ?4
			WHERE owner = ?1 AND waiter IN (SELECT value FROM json_each(?2)) AND expires_at > ?3
			RETURNING waiter, held`, owner, string(list), rowfmt.ToMs(now), duration.Milliseconds())
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
	return held, err
}

// PermitRelease deletes owner's rows of waiters (all of owner's when nil).
func (s *Store) PermitRelease(ctx context.Context, owner string, waiters []int64) ([]string, error) {
	if owner == "" {
		return nil, errors.New("sqlite: PermitRelease: empty owner")
	}
	var list any // NULL: every row of owner
	if waiters != nil {
		b, _ := json.Marshal(waiters)
		list = string(b)
	}
	var keys []string
	err := s.permitTx(ctx, "PermitRelease", func(tx *sql.Tx) error {
		keys = keys[:0]
		rows, err := tx.QueryContext(ctx, `DELETE FROM limit_permits
			WHERE owner = ?1 AND (?2 IS NULL OR waiter IN (SELECT value FROM json_each(?2))) RETURNING limit_key`, owner, list)
		if err != nil {
			return err
		}
		defer rows.Close()
		seen := map[string]bool{}
		for rows.Next() {
			var k string
			if err := rows.Scan(&k); err != nil {
				return err
			}
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
		return rows.Err()
	})
	slices.Sort(keys)
	return keys, err
}

// PermitReleaseOthers deletes every row not owned by keepOwner.
func (s *Store) PermitReleaseOthers(ctx context.Context, keepOwner string) (int64, error) {
	var n int64
	err := s.permitTx(ctx, "PermitReleaseOthers", func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM limit_permits WHERE owner <> ?`, keepOwner)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return n, err
}

// PermitWaiting returns the queue each waiter listed waits in.
func (s *Store) PermitWaiting(ctx context.Context, waiters []int64) (map[int64]engine.PermitWait, error) {
	out := map[int64]engine.PermitWait{}
	if len(waiters) == 0 {
		return out, nil
	}
	list, _ := json.Marshal(waiters)
	err := s.View(ctx, func(ctx context.Context, rtx engine.ReadTx) error {
		rows, err := rtx.(*txn).tx.QueryContext(ctx, `SELECT waiter, limit_key, waiting_since FROM limit_permits
			WHERE waiter IN (SELECT value FROM json_each(?)) AND NOT held ORDER BY waiter, limit_key`, string(list))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var w, since int64
			var key string
			if err := rows.Scan(&w, &key, &since); err != nil {
				return err
			}
			if _, ok := out[w]; !ok {
				out[w] = engine.PermitWait{Key: key, Since: rowfmt.FromMs(since)}
			}
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite: PermitWaiting: %w", err)
	}
	return out, nil
}
