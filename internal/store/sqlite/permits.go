package sqlite

// The permits of concurrency and rate limits (engine.PermitStore). One
// process uses a SQLite file, so the rows could live in its memory; they
// live in the file all the same, so that the engine and the conformance
// suite see one implementation of the rule on both stores (see
// docs/architecture.md). SQLite's single writer serialises acquisitions.
// The statements are storesql's; the rule is engine.PermitRequest.Decide.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/store/rowfmt"
	"github.com/iwf-server/iwf-server/internal/store/storesql"
)

var _ engine.PermitStore = (*Store)(nil)

// The statements of the permits, prepared once (queries).
var (
	permitSQL           = storesql.PermitStatements(storesql.SQLite)
	qPermitLock         = query(permitSQL.Lock)
	qPermitExpire       = query(permitSQL.Expire)
	qPermitQueue        = query(permitSQL.Queue)
	qPermitCount        = query(permitSQL.Count)
	qPermitRenew        = query(permitSQL.Renew)
	qPermitRelease      = query(permitSQL.Release)
	qPermitReleaseOther = query(permitSQL.ReleaseOthers)
	qPermitWaiting      = query(permitSQL.Waiting)
	// qPermitWrites are the writes of an acquisition, by their text.
	qPermitWrites = map[string]int{
		permitSQL.Hold:   query(permitSQL.Hold),
		permitSQL.Leave:  query(permitSQL.Leave),
		permitSQL.Refill: query(permitSQL.Refill),
	}
)

// permitTx runs fn in a write transaction.
func (s *Store) permitTx(ctx context.Context, op string, fn func(t *txn) error) error {
	err := s.Update(ctx, func(ctx context.Context, tx engine.Tx) error { return fn(tx.(*txn)) })
	if err != nil {
		return classify(ctx, fmt.Errorf("sqlite: %s: %w", op, err))
	}
	return nil
}

// PermitAcquire takes, or queues for, a permit of r.Key: storesql's reads,
// one after the other, then the writes of storesql.Permits.PermitDecision.
func (s *Store) PermitAcquire(ctx context.Context, r engine.PermitRequest) (engine.PermitGrant, error) {
	var g engine.PermitGrant
	err := s.permitTx(ctx, "PermitAcquire", func(t *txn) error {
		var f storesql.PermitFound
		if err := t.queryRow(ctx, qPermitLock, permitSQL.LockArgs(r)...).Scan(&f.Tokens, &f.Updated); err != nil {
			return err
		}
		if _, err := t.exec(ctx, qPermitExpire, permitSQL.ExpireArgs(r)...); err != nil {
			return err
		}
		var since int64
		err := t.queryRow(ctx, qPermitQueue, permitSQL.QueueArgs(r)...).Scan(&since, &f.Held)
		f.Queued = err == nil
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if f.Queued && !f.Held {
			if err := t.queryRow(ctx, qPermitCount, permitSQL.CountArgs(r)...).Scan(&f.HeldCount, &f.Ahead); err != nil {
				return err
			}
		}
		var writes []storesql.Write
		g, writes = permitSQL.PermitDecision(r, f)
		for _, w := range writes {
			if _, err := t.exec(ctx, qPermitWrites[w.SQL], w.Args...); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return engine.PermitGrant{}, err
	}
	return g, nil
}

// PermitRenew extends owner's unexpired rows of waiters.
func (s *Store) PermitRenew(ctx context.Context, owner string, waiters []int64, now time.Time, duration time.Duration) ([]int64, error) {
	if len(waiters) == 0 {
		return nil, nil
	}
	var held []int64
	err := s.permitTx(ctx, "PermitRenew", func(t *txn) error {
		held = held[:0]
		rows, err := t.query(ctx, qPermitRenew, owner, storesql.List(storesql.SQLite, waiters), rowfmt.ToMs(now), duration.Milliseconds())
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
	var keys []string
	err := s.permitTx(ctx, "PermitRelease", func(t *txn) error {
		keys = keys[:0]
		rows, err := t.query(ctx, qPermitRelease, owner, storesql.List(storesql.SQLite, waiters))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var k string
			if err := rows.Scan(&k); err != nil {
				return err
			}
			keys = append(keys, k)
		}
		return rows.Err()
	})
	slices.Sort(keys)
	return slices.Compact(keys), err
}

// PermitReleaseOthers deletes every row not owned by keepOwner.
func (s *Store) PermitReleaseOthers(ctx context.Context, keepOwner string) (int64, error) {
	var n int64
	err := s.permitTx(ctx, "PermitReleaseOthers", func(t *txn) error {
		res, err := t.exec(ctx, qPermitReleaseOther, keepOwner)
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
	err := s.View(ctx, func(ctx context.Context, rtx engine.ReadTx) error {
		rows, err := rtx.(*txn).query(ctx, qPermitWaiting, storesql.List(storesql.SQLite, waiters))
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
