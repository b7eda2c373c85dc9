package postgres

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/iwf-server/iwf-server/engine"
	"github.com/jackc/pgx/v5"
)

// Retention: the statements that find and delete expired runs. They run
// outside the engine's transactions, on the pool, and each is one
// statement: a sweep adds few round trips, and a batch is deleted whole or
// not at all.

// expiredWhere is the condition of RunsExpired and RunsExpiredCount but
// for the retention of one type (expiredQuery): $1 the close time bound, $2
// the types (NULL: every type not in $3). The partial index runs_closed_at
// (closed_at) WHERE closed_at <> 0 serves it in close order.
const expiredWhere = `closed_at <> 0 AND closed_at < $1
	AND (CASE WHEN $2::text[] IS NULL THEN workflow_type <> ALL ($3::text[]) ELSE workflow_type = ANY ($2::text[]) END)`

// sqlRunsDelete deletes the closed runs among $1 that no other transaction
// holds, with every row that belongs to them, in one statement. A workflow
// row goes with its current run; the row lock a start takes on it makes
// the DELETE re-check current_run_id, so a run started meanwhile keeps it.
// search_attribute_words has no delete trigger on PostgreSQL: its rows are
// deleted here.
//
// Each table is reached through its index on run_id: the runs locked are
// handed to the DELETEs as one array (ARRAY(SELECT ...) is computed once,
// before the scan), so each DELETE is an index scan for the batch's run
// ids. Written as run_id IN (SELECT run_id FROM doomed), the planner cannot
// size the CTE and picked a hash semi-join over a sequential scan of every
// table, for every batch: a sweep then cost the square of the store's size
// (TestRunsDeletePlan).
const sqlRunsDelete = `WITH doomed AS (
		SELECT run_id, workflow_id FROM runs WHERE run_id = ANY ($1::text[]) AND closed_at <> 0
		FOR UPDATE SKIP LOCKED
	),
	d_exec AS (DELETE FROM executions WHERE run_id = ANY (ARRAY(SELECT run_id FROM doomed))),
	d_hist AS (DELETE FROM history WHERE run_id = ANY (ARRAY(SELECT run_id FROM doomed))),
	d_msg AS (DELETE FROM messages WHERE run_id = ANY (ARRAY(SELECT run_id FROM doomed))),
	d_data AS (DELETE FROM data_attributes WHERE run_id = ANY (ARRAY(SELECT run_id FROM doomed))),
	d_sa AS (DELETE FROM search_attributes WHERE run_id = ANY (ARRAY(SELECT run_id FROM doomed))),
	d_str AS (DELETE FROM search_attribute_strings WHERE run_id = ANY (ARRAY(SELECT run_id FROM doomed))),
	d_words AS (DELETE FROM search_attribute_words WHERE run_id = ANY (ARRAY(SELECT run_id FROM doomed))),
	d_tasks AS (DELETE FROM tasks WHERE run_id = ANY (ARRAY(SELECT run_id FROM doomed))),
	d_wf AS (DELETE FROM workflows w USING doomed d WHERE w.workflow_id = ANY (ARRAY(SELECT workflow_id FROM doomed))
		AND w.workflow_id = d.workflow_id AND w.current_run_id = d.run_id),
	d_runs AS (DELETE FROM runs WHERE run_id = ANY (ARRAY(SELECT run_id FROM doomed)) RETURNING 1)
	SELECT count(*) FROM d_runs`

// closeOrder is the expression of the search-order indexes (0002): the
// close time, with open runs last. It must stay identical to theirs.
const closeOrder = `(CASE WHEN closed_at = 0 THEN 9223372036854775807 ELSE closed_at END)`

// expiredQuery returns the statement that reads columns of the oldest
// expired runs of e, and its arguments. The retention of one workflow type
// (what the engine asks for with --retention-for) reads
// runs_search_type_order, whose prefix is the type and then the close time,
// so the oldest runs of the type come first and the LIMIT ends the read;
// the condition on closed_at instead walks runs_closed_at over the runs of
// every other type closed before the bound, for every batch. The rest reads
// runs_closed_at in close order.
func expiredQuery(columns string, e engine.RunExpiry) (string, []any) {
	if len(e.Types) == 1 {
		// closeOrder < ClosedBefore also excludes open runs (their
		// closeOrder is the largest integer).
		return `SELECT ` + columns + ` FROM runs WHERE workflow_type = $1 AND ` + closeOrder + ` < $2 ORDER BY ` + closeOrder + ` LIMIT $3`,
			[]any{e.Types[0], e.ClosedBefore, e.Limit}
	}
	var types any // NULL
	if e.Types != nil {
		types = e.Types
	}
	except := e.ExceptTypes
	if except == nil {
		except = []string{}
	}
	return `SELECT ` + columns + ` FROM runs WHERE ` + expiredWhere + ` ORDER BY closed_at LIMIT $4`,
		[]any{e.ClosedBefore, types, except, e.Limit}
}

// RunsExpired implements engine.Store.
func (s *Store) RunsExpired(ctx context.Context, e engine.RunExpiry) ([]string, error) {
	if e.Limit <= 0 {
		return nil, fmt.Errorf("postgres: RunsExpired: limit %d, want > 0", e.Limit)
	}
	q, args := expiredQuery("run_id", e)
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
	q, args := expiredQuery("1", e)
	var n int
	err := s.pool.QueryRow(ctx, `SELECT count(*) FROM (`+q+`) AS e`, args...).Scan(&n)
	return n, classify(ctx, wrap("RunsExpiredCount", err))
}

// RunsDelete implements engine.Store.
func (s *Store) RunsDelete(ctx context.Context, runIDs []string) (int, error) {
	if len(runIDs) == 0 {
		return 0, nil
	}
	var n int
	err := retry(ctx, func() error { return s.pool.QueryRow(ctx, sqlRunsDelete, runIDs).Scan(&n) })
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

// sqlRetentionStart records $1 as the start of retention unless one is
// recorded, and returns the one that is. The SELECT of a statement sees the
// table as it was before the statement's INSERT: the UNION reads the row
// inserted, or else the one found. A row another process committed while
// the statement waited on it is in neither: no row, and the statement runs
// again on a fresh snapshot.
const sqlRetentionStart = `WITH ins AS (
		INSERT INTO retention_start (id, since_ms) VALUES (1, $1) ON CONFLICT (id) DO NOTHING RETURNING since_ms
	)
	SELECT since_ms FROM ins UNION ALL SELECT since_ms FROM retention_start WHERE id = 1`

// RetentionStart implements engine.Store.
func (s *Store) RetentionStart(ctx context.Context, now time.Time) (time.Time, error) {
	var since int64
	err := s.pool.QueryRow(ctx, sqlRetentionStart, now.UnixMilli()).Scan(&since)
	if errors.Is(err, pgx.ErrNoRows) {
		err = s.pool.QueryRow(ctx, sqlRetentionStart, now.UnixMilli()).Scan(&since)
	}
	if err != nil {
		return time.Time{}, classify(ctx, wrap("RetentionStart", err))
	}
	return time.UnixMilli(since).UTC(), nil
}
