package postgres

import (
	"context"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/store/storesql"
)

// Retention: finding and deleting expired runs (the statements are
// storesql's). They run outside the engine's transactions, on the pool,
// and each is one statement: a sweep adds few round trips, and a batch is
// deleted whole or not at all.

// sqlRunsDelete deletes the closed runs among $1 that no other transaction
// holds, with every row that belongs to them, in one statement (see
// storesql.RunsDelete.One). search_attribute_words has no delete trigger on
// PostgreSQL: its rows are deleted with the others.
var sqlRunsDelete = storesql.RunsDeleteStatements(storesql.PostgreSQL).One

// RunsExpired implements engine.Store.
func (s *Store) RunsExpired(ctx context.Context, e engine.RunExpiry) ([]string, error) {
	if e.Limit <= 0 {
		return nil, fmt.Errorf("postgres: RunsExpired: limit %d, want > 0", e.Limit)
	}
	q, args := storesql.Expired(storesql.PostgreSQL, "run_id", e)
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, classify(ctx, wrap("RunsExpired", err))
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, classify(ctx, wrap("RunsExpired", err))
		}
		ids = append(ids, id)
	}
	return ids, classify(ctx, wrap("RunsExpired", rows.Err()))
}

// RunsExpiredCount implements engine.Store.
func (s *Store) RunsExpiredCount(ctx context.Context, e engine.RunExpiry) (int, error) {
	if e.Limit <= 0 {
		return 0, fmt.Errorf("postgres: RunsExpiredCount: limit %d, want > 0", e.Limit)
	}
	q, args := storesql.ExpiredCount(storesql.PostgreSQL, e)
	var n int
	err := s.pool.QueryRow(ctx, q, args...).Scan(&n)
	return n, classify(ctx, wrap("RunsExpiredCount", err))
}

// RunsDelete implements engine.Store.
func (s *Store) RunsDelete(ctx context.Context, runIDs []string) (int, error) {
	if len(runIDs) == 0 {
		return 0, nil
	}
	var n int
	err := retry(ctx, func() error {
		return s.pool.QueryRow(ctx, sqlRunsDelete, storesql.List(storesql.PostgreSQL, runIDs)).Scan(&n)
	})
	return n, classify(ctx, wrap("RunsDelete", err))
}

// retentionLockKey is the key of the advisory lock that one process of
// those sharing a schema holds while it deletes expired runs.
func (s *Store) retentionLockKey() int64 {
	h := fnv.New64a()
	h.Write([]byte("iwf-server/retention/" + s.schema))
	return int64(h.Sum64())
}

// RetentionLock implements engine.Store with a session advisory lock on a
// connection the holder keeps until release; a process that dies closes
// the connection, which releases the lock.
func (s *Store) RetentionLock(ctx context.Context) (func(), bool, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, false, classify(ctx, wrap("RetentionLock", err))
	}
	key := s.retentionLockKey()
	var ok bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, key).Scan(&ok); err != nil || !ok {
		conn.Release()
		return nil, false, classify(ctx, wrap("RetentionLock", err))
	}
	release := func() {
		uctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := conn.Exec(uctx, `SELECT pg_advisory_unlock($1)`, key); err != nil {
			// Closing the session is the other way to release its lock.
			conn.Conn().Close(uctx)
		}
		conn.Release()
	}
	return release, true, nil
}

// RetentionStart implements engine.Store: storesql.RetentionStart's two
// statements in one round trip, which is one implicit transaction.
func (s *Store) RetentionStart(ctx context.Context, now time.Time) (time.Time, error) {
	insert, read := storesql.RetentionStart(storesql.PostgreSQL)
	var since int64
	err := retry(ctx, func() error {
		b := &pgx.Batch{}
		b.Queue(insert, now.UnixMilli())
		b.Queue(read)
		br := s.pool.SendBatch(ctx, b)
		_, err := br.Exec()
		if err == nil {
			err = br.QueryRow().Scan(&since)
		}
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		return err
	})
	if err != nil {
		return time.Time{}, classify(ctx, wrap("RetentionStart", err))
	}
	return time.UnixMilli(since).UTC(), nil
}
