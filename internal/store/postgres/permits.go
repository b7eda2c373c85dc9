package postgres

// The permits of concurrency and rate limits (engine.PermitStore): rows of
// limit_permits, counted under a row lock of the key's limit_buckets row,
// so that every node sharing the database sees one count. The statements
// are storesql's; the rule is engine.PermitRequest.Decide.
//
// Until the previous release, PermitAcquire called iwf_permit_acquire
// (migration 0009), the same rule in PL/pgSQL. The function stays in the
// schema for the nodes of that release still running on the database
// during an upgrade: it takes the same bucket row lock and reads and
// writes the same rows, so both kinds of node count one limit together.
// It may be dropped (DROP FUNCTION iwf_permit_acquire) in a migration of
// the release after this one.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/store/rowfmt"
	"github.com/iwf-server/iwf-server/internal/store/storesql"
)

var _ engine.PermitStore = (*Store)(nil)

// permitSQL are the statements of the permits.
var permitSQL = storesql.PermitStatements(storesql.PostgreSQL)

// PermitAcquire takes, or queues for, a permit of r.Key in a transaction of
// two round trips: BEGIN and storesql's four reads (the first takes the
// key's lock), then the writes of storesql.Permits.PermitDecision and
// COMMIT. The key's lock is held for one round trip between them.
func (s *Store) PermitAcquire(ctx context.Context, r engine.PermitRequest) (engine.PermitGrant, error) {
	var g engine.PermitGrant
	err := retry(ctx, func() error {
		var err error
		g, err = s.permitAcquire(ctx, r)
		return err
	})
	if err != nil {
		return engine.PermitGrant{}, classify(ctx, fmt.Errorf("postgres: PermitAcquire: %w", err))
	}
	return g, nil
}

func (s *Store) permitAcquire(ctx context.Context, r engine.PermitRequest) (g engine.PermitGrant, err error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return g, err
	}
	open := false
	defer func() {
		if open {
			// Failed before COMMIT: roll back, or close a connection
			// whose state is unknown.
			if _, rerr := conn.Exec(context.WithoutCancel(ctx), "rollback"); rerr != nil {
				conn.Conn().Close(context.WithoutCancel(ctx))
			}
		}
		conn.Release()
	}()
	b := &pgx.Batch{}
	b.Queue("begin")
	b.Queue(permitSQL.Lock, permitSQL.LockArgs(r)...)
	b.Queue(permitSQL.Expire, permitSQL.ExpireArgs(r)...)
	b.Queue(permitSQL.Queue, permitSQL.QueueArgs(r)...)
	b.Queue(permitSQL.Count, permitSQL.CountArgs(r)...)
	open = true
	br := conn.SendBatch(ctx, b)
	f, err := readPermitFound(br)
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return g, err
	}
	g, writes := permitSQL.PermitDecision(r, f)
	b = &pgx.Batch{}
	for _, w := range writes {
		b.Queue(w.SQL, w.Args...)
	}
	b.Queue("commit")
	br = conn.SendBatch(ctx, b)
	for range len(writes) + 1 {
		if _, err = br.Exec(); err != nil {
			break
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return engine.PermitGrant{}, err
	}
	open = false
	return g, nil
}

// readPermitFound reads the answers of BEGIN and the four reads of an
// acquisition.
func readPermitFound(br pgx.BatchResults) (storesql.PermitFound, error) {
	var f storesql.PermitFound
	if _, err := br.Exec(); err != nil {
		return f, err
	}
	if err := br.QueryRow().Scan(&f.Tokens, &f.Updated); err != nil {
		return f, err
	}
	if _, err := br.Exec(); err != nil {
		return f, err
	}
	var since int64
	err := br.QueryRow().Scan(&since, &f.Held)
	f.Queued = err == nil
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return f, err
	}
	err = br.QueryRow().Scan(&f.HeldCount, &f.Ahead)
	return f, err
}

// PermitRenew extends owner's unexpired rows of waiters.
func (s *Store) PermitRenew(ctx context.Context, owner string, waiters []int64, now time.Time, duration time.Duration) ([]int64, error) {
	if len(waiters) == 0 {
		return nil, nil
	}
	var held []int64
	err := retry(ctx, func() error {
		held = held[:0]
		rows, err := s.pool.Query(ctx, permitSQL.Renew, owner, storesql.List(storesql.PostgreSQL, waiters),
			rowfmt.ToMs(now), duration.Milliseconds())
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
		rows, err := s.pool.Query(ctx, permitSQL.Release, owner, storesql.List(storesql.PostgreSQL, waiters))
		if err != nil {
			return err
		}
		keys, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	if err != nil {
		return nil, classify(ctx, fmt.Errorf("postgres: PermitRelease: %w", err))
	}
	slices.Sort(keys)
	return slices.Compact(keys), nil
}

// PermitReleaseOthers deletes every row not owned by keepOwner.
func (s *Store) PermitReleaseOthers(ctx context.Context, keepOwner string) (int64, error) {
	var n int64
	err := retry(ctx, func() error {
		tag, err := s.pool.Exec(ctx, permitSQL.ReleaseOthers, keepOwner)
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
	rows, err := s.pool.Query(ctx, permitSQL.Waiting, storesql.List(storesql.PostgreSQL, waiters))
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
