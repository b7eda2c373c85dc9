package sqlite

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/iwf-server/iwf-server/engine"
)

// Retention: finding and deleting expired runs. The reads run on the read
// pool; a deletion is one function of the write queue, so it commits
// between the engine's own batches and a crash leaves it whole or undone.

// closeOrder is the expression of the search-order indexes (0002): the
// close time, with open runs last. It must stay identical to theirs.
const closeOrder = `(CASE WHEN closed_at = 0 THEN 9223372036854775807 ELSE closed_at END)`

// expiredQuery returns the SELECT list's statement of RunsExpired (or
// its count) and its arguments. The index runs_closed_at serves the range
// on closed_at (open runs have 0) in close order. The retention of one
// workflow type (what the engine asks for) reads runs_search_type_order,
// whose prefix is the type and then the close time: the oldest runs of
// the type come first and the LIMIT ends the read. With closed_at and an
// IN list instead, SQLite reads every run of the type and sorts them, for
// every batch: a sweep of N runs of one type then costs N squared.
func expiredQuery(columns string, e engine.RunExpiry) (string, []any, error) {
	if len(e.Types) == 1 {
		// closeOrder < ClosedBefore also excludes open runs (their
		// closeOrder is the largest integer).
		return `SELECT ` + columns + ` FROM runs WHERE workflow_type = ? AND ` + closeOrder + ` < ? ORDER BY ` + closeOrder + ` LIMIT ?`,
			[]any{e.Types[0], e.ClosedBefore, e.Limit}, nil
	}
	list := e.ExceptTypes
	cond := `workflow_type NOT IN (SELECT value FROM json_each(?))`
	if e.Types != nil {
		list, cond = e.Types, `workflow_type IN (SELECT value FROM json_each(?))`
	}
	if list == nil {
		list = []string{}
	}
	types, err := json.Marshal(list)
	if err != nil {
		return "", nil, err
	}
	q := `SELECT ` + columns + ` FROM runs WHERE closed_at > 0 AND closed_at < ? AND ` + cond + ` ORDER BY closed_at LIMIT ?`
	return q, []any{e.ClosedBefore, string(types), e.Limit}, nil
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
	q, args, err := expiredQuery("1", e)
	if err != nil {
		return 0, err
	}
	var n int
	if err := s.r.QueryRowContext(ctx, `SELECT count(*) FROM (`+q+`)`, args...).Scan(&n); err != nil {
		return 0, classify(ctx, fmt.Errorf("sqlite: RunsExpiredCount: %w", err))
	}
	return n, nil
}

// runTables are the tables whose rows belong to one run, by run_id.
// search_attribute_words comes before search_attributes, whose delete
// trigger would otherwise delete the words one attribute at a time.
var runTables = []string{"executions", "history", "messages", "data_attributes", "search_attribute_words",
	"search_attribute_strings", "search_attributes", "tasks"}

// The statements of a deletion, prepared once (queries). Each takes the
// batch's run ids as one JSON array and reads each table through its index
// on run_id.
var (
	qRetentionDoomed = query(`SELECT run_id, workflow_id FROM runs WHERE run_id` + inJSON + ` AND closed_at > 0`)
	qRetentionTables = func() []int {
		q := make([]int, len(runTables))
		for i, t := range runTables {
			q[i] = query(`DELETE FROM ` + t + ` WHERE run_id` + inJSON)
		}
		return q
	}()
	// A workflow id goes with its current run: its next start finds it
	// unused.
	qRetentionWorkflows = query(`DELETE FROM workflows WHERE workflow_id` + inJSON + ` AND current_run_id` + inJSON)
	qRetentionRuns      = query(`DELETE FROM runs WHERE run_id` + inJSON)
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
	in, err := json.Marshal(runIDs)
	if err != nil {
		return 0, 0, err
	}
	var n int
	var held time.Duration
	err = s.Update(ctx, func(ctx context.Context, tx engine.Tx) error {
		began := time.Now()
		defer func() { held = time.Since(began) }()
		t := tx.(*txn)
		n = 0
		rows, err := t.stmt(ctx, qRetentionDoomed).QueryContext(ctx, string(in))
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
		doomed, _ := json.Marshal(runs)
		wfs, _ := json.Marshal(workflows)
		for i, q := range qRetentionTables {
			if _, err := t.stmt(ctx, q).ExecContext(ctx, string(doomed)); err != nil {
				return fmt.Errorf("delete from %s: %w", runTables[i], err)
			}
		}
		if _, err := t.stmt(ctx, qRetentionWorkflows).ExecContext(ctx, string(wfs), string(doomed)); err != nil {
			return fmt.Errorf("delete from workflows: %w", err)
		}
		res, err := t.stmt(ctx, qRetentionRuns).ExecContext(ctx, string(doomed))
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

// The statements of RetentionStart.
var (
	qRetentionStartInsert = query(`INSERT INTO retention_start (id, since_ms) VALUES (1, ?) ON CONFLICT (id) DO NOTHING`)
	qRetentionStartSelect = query(`SELECT since_ms FROM retention_start WHERE id = 1`)
)

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
