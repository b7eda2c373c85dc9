package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/store/rowfmt"
	"github.com/iwf-server/iwf-server/internal/store/storesql"
)

// The paused scopes and the parked tasks (migration 0014), with
// storesql's statements.

var pauseSQL = storesql.PauseStatements(storesql.PostgreSQL)

func scanPause(r pgx.Rows) (*engine.Pause, error) { return storesql.ScanPause(r) }

// PauseList implements engine.ReadTx.
func (t *txn) PauseList(ctx context.Context) ([]*engine.Pause, error) {
	rows, err := t.tx.Query(ctx, pauseSQL.List)
	out, err := collect(rows, err, scanPause)
	return out, wrap("PauseList", err)
}

// TaskParkedCount implements engine.ReadTx.
func (t *txn) TaskParkedCount(ctx context.Context) (map[string]int, error) {
	rows, err := t.tx.Query(ctx, pauseSQL.ParkedCount)
	if err != nil {
		return nil, wrap("TaskParkedCount", err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var k string
		var n int64
		if err := rows.Scan(&k, &n); err != nil {
			return nil, wrap("TaskParkedCount", err)
		}
		out[k] = int(n)
	}
	return out, wrap("TaskParkedCount", rows.Err())
}

// PauseHold implements engine.Tx: the rows are read FOR SHARE, so that a
// resume that deletes one waits for this transaction, or this one for it.
func (t *txn) PauseHold(ctx context.Context, scopes []string) ([]*engine.Pause, error) {
	if len(scopes) == 0 {
		return nil, nil
	}
	rows, err := t.tx.Query(ctx, pauseSQL.Hold, scopes)
	out, err := collect(rows, err, scanPause)
	return out, wrap("PauseHold", err)
}

// PauseInsert implements engine.Tx.
func (t *txn) PauseInsert(ctx context.Context, p *engine.Pause) (bool, error) {
	tag, err := t.tx.Exec(ctx, pauseSQL.Insert, p.Scope, p.Reason, p.By, rowfmt.ToMs(p.At))
	return err == nil && tag.RowsAffected() > 0, wrap("PauseInsert", err)
}

// PauseDelete implements engine.Tx.
func (t *txn) PauseDelete(ctx context.Context, scope string) (bool, error) {
	tag, err := t.tx.Exec(ctx, pauseSQL.Delete, scope)
	return err == nil && tag.RowsAffected() > 0, wrap("PauseDelete", err)
}

// TaskPark implements engine.Tx.
func (t *txn) TaskPark(ctx context.Context, id int64, owner, parked string, due time.Time) (bool, error) {
	tag, err := t.tx.Exec(ctx, pauseSQL.Park, rowfmt.ToMs(due), parked, id, owner)
	return err == nil && tag.RowsAffected() > 0, wrap("TaskPark", err)
}

// TaskUnpark implements engine.Tx.
func (t *txn) TaskUnpark(ctx context.Context, p engine.TaskUnparkParams) ([]*engine.Task, error) {
	rows, err := t.tx.Query(ctx, pauseSQL.Unpark, storesql.UnparkArgs(storesql.PostgreSQL, p)...)
	out, err := collect(rows, err, scanTask)
	if err != nil {
		return nil, wrap("TaskUnpark", err)
	}
	rowfmt.SortTasks(out)
	return out, nil
}
