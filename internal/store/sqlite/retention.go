package sqlite

import (
	"context"
	"fmt"
	"time"

	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/store/storesql"
)

// Retention: finding and deleting expired runs. The reads run on the read
// pool; a deletion is one function of the write queue, so it commits
// between the engine's own batches and a crash leaves it whole or undone.

// expiredQuery returns the statement of RunsExpired that reads columns
// (storesql.Expired), and its arguments.
func expiredQuery(columns string, e engine.RunExpiry) (string, []any, error) {
	q, args := storesql.Expired(storesql.SQLite, columns, e)
	return q, args, nil
}

// RunsExpired implements engine.Store.
func (s *Store) RunsExpired(ctx context.Context, e engine.RunExpiry) ([]string, error) {
	if e.Limit <= 0 {
		return nil, fmt.Errorf("sqlite: RunsExpired: limit %d, want > 0", e.Limit)
	}
	q, args, err := expiredQuery("run_id", e)
	if err != nil {
		return nil, err
	}
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, classify(ctx, fmt.Errorf("sqlite: RunsExpired: %w", err))
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, classify(ctx, fmt.Errorf("sqlite: RunsExpired: %w", err))
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, classify(ctx, fmt.Errorf("sqlite: RunsExpired: %w", err))
	}
	return ids, nil
}

// RunsExpiredCount implements engine.Store.
func (s *Store) RunsExpiredCount(ctx context.Context, e engine.RunExpiry) (int, error) {
	if e.Limit <= 0 {
		return 0, fmt.Errorf("sqlite: RunsExpiredCount: limit %d, want > 0", e.Limit)
	}
	q, args := storesql.ExpiredCount(storesql.SQLite, e)
	var n int
	if err := s.r.QueryRowContext(ctx, q, args...).Scan(&n); err != nil {
		return 0, classify(ctx, fmt.Errorf("sqlite: RunsExpiredCount: %w", err))
	}
	return n, nil
}

// The statements of a deletion (storesql.RunsDelete), prepared once
// (queries). Each takes the batch's run ids as one JSON array and reads
// each table through its index on run_id.
var (
	runsDelete          = storesql.RunsDeleteStatements(storesql.SQLite)
	qRetentionDoomed    = query(runsDelete.Doomed)
	qRetentionTables    = queriesOf(runsDelete.Tables)
	qRetentionWorkflows = query(runsDelete.Workflows)
	qRetentionRuns      = query(runsDelete.Runs)
)

// RunsDelete implements engine.Store.
func (s *Store) RunsDelete(ctx context.Context, runIDs []string) (int, error) {
	n, _, err := s.RunsDeleteTimed(ctx, runIDs)
	return n, err
}

// RunsDeleteTimed implements engine.RunsDeleteTimer: held is how long the
// deletion's function ran on the writer, which no other write can use
// meanwhile; the time it waited for the writer is not part of it.
func (s *Store) RunsDeleteTimed(ctx context.Context, runIDs []string) (int, time.Duration, error) {
	if len(runIDs) == 0 {
		return 0, 0, nil
	}
	in := storesql.List(storesql.SQLite, runIDs)
	var n int
	var held time.Duration
	err := s.Update(ctx, func(ctx context.Context, tx engine.Tx) error {
		began := time.Now()
		defer func() { held = time.Since(began) }()
		t := tx.(*txn)
		n = 0
		rows, err := t.stmt(ctx, qRetentionDoomed).QueryContext(ctx, in)
		if err != nil {
			return err
		}
		var runs, workflows []string
		for rows.Next() {
			var r, w string
			if err := rows.Scan(&r, &w); err != nil {
				rows.Close()
				return err
			}
			runs, workflows = append(runs, r), append(workflows, w)
		}
		rows.Close()
		if err := rows.Err(); err != nil || len(runs) == 0 {
			return err
		}
		for _, r := range runs {
			t.changed(r) // deleted: no read of another function of the batch is known
		}
		doomed, wfs := storesql.List(storesql.SQLite, runs), storesql.List(storesql.SQLite, workflows)
		for i, q := range qRetentionTables {
			if _, err := t.stmt(ctx, q).ExecContext(ctx, doomed); err != nil {
				return fmt.Errorf("delete from %s: %w", storesql.RunTables[i], err)
			}
		}
		if _, err := t.stmt(ctx, qRetentionWorkflows).ExecContext(ctx, wfs, doomed); err != nil {
			return fmt.Errorf("delete from workflows: %w", err)
		}
		res, err := t.stmt(ctx, qRetentionRuns).ExecContext(ctx, doomed)
		if err != nil {
			return fmt.Errorf("delete from runs: %w", err)
		}
		m, err := res.RowsAffected()
		n = int(m)
		return err
	})
	if err != nil {
		return 0, held, fmt.Errorf("sqlite: RunsDelete: %w", err)
	}
	return n, held, nil
}

// RetentionLock implements engine.Store. One process owns a SQLite file,
// so a mutex of the store is the lock between its sweeps.
func (s *Store) RetentionLock(context.Context) (func(), bool, error) {
	if !s.sweep.TryLock() {
		return nil, false, nil
	}
	return s.sweep.Unlock, true, nil
}

var _ engine.RunsDeleteTimer = (*Store)(nil)

// The statements of RetentionStart (storesql.RetentionStart).
var qRetentionStartInsert, qRetentionStartSelect = func() (int, int) {
	insert, read := storesql.RetentionStart(storesql.SQLite)
	return query(insert), query(read)
}()

// RetentionStart implements engine.Store.
func (s *Store) RetentionStart(ctx context.Context, now time.Time) (time.Time, error) {
	var since int64
	err := s.Update(ctx, func(ctx context.Context, tx engine.Tx) error {
		t := tx.(*txn)
		if _, err := t.stmt(ctx, qRetentionStartInsert).ExecContext(ctx, now.UnixMilli()); err != nil {
			return err
		}
		return t.stmt(ctx, qRetentionStartSelect).QueryRowContext(ctx).Scan(&since)
	})
	if err != nil {
		return time.Time{}, fmt.Errorf("sqlite: RetentionStart: %w", err)
	}
	return time.UnixMilli(since).UTC(), nil
}
