package sqlite

import (
	"context"
	"time"

	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/store/rowfmt"
	"github.com/iwf-server/iwf-server/internal/store/storesql"
)

// The paused scopes and the parked tasks (migration 0010), with
// storesql's statements.
var (
	pauseSQL         = storesql.PauseStatements(storesql.SQLite)
	qPauseList       = query(pauseSQL.List)
	qPauseHold       = query(pauseSQL.Hold)
	qPauseInsert     = query(pauseSQL.Insert)
	qPauseDelete     = query(pauseSQL.Delete)
	qTaskPark        = query(pauseSQL.Park)
	qTaskUnpark      = query(pauseSQL.Unpark)
	qTaskParkedCount = query(pauseSQL.ParkedCount)
)

// PauseList implements engine.ReadTx.
func (t *txn) PauseList(ctx context.Context) ([]*engine.Pause, error) {
	rows, err := t.query(ctx, qPauseList)
	out, err := collectRows(rows, err, storesql.ScanPause)
	return out, wrap("PauseList", err)
}

// TaskParkedCount implements engine.ReadTx.
func (t *txn) TaskParkedCount(ctx context.Context) (map[string]int, error) {
	rows, err := t.query(ctx, qTaskParkedCount)
	if err != nil {
		return nil, wrap("TaskParkedCount", err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var k string
		var n int
		if err := rows.Scan(&k, &n); err != nil {
			return nil, wrap("TaskParkedCount", err)
		}
		out[k] = n
	}
	return out, wrap("TaskParkedCount", rows.Err())
}

// PauseHold implements engine.Tx: the single writer keeps the rows as
// they are until the transaction ends.
func (t *txn) PauseHold(ctx context.Context, scopes []string) ([]*engine.Pause, error) {
	if len(scopes) == 0 {
		return nil, nil
	}
	rows, err := t.query(ctx, qPauseHold, storesql.List(storesql.SQLite, scopes))
	out, err := collectRows(rows, err, storesql.ScanPause)
	return out, wrap("PauseHold", err)
}

// PauseInsert implements engine.Tx.
func (t *txn) PauseInsert(ctx context.Context, p *engine.Pause) (bool, error) {
	ok, err := affected(t.exec(ctx, qPauseInsert, p.Scope, p.Reason, p.By, rowfmt.ToMs(p.At)))
	return ok, wrap("PauseInsert", err)
}

// PauseDelete implements engine.Tx.
func (t *txn) PauseDelete(ctx context.Context, scope string) (bool, error) {
	ok, err := affected(t.exec(ctx, qPauseDelete, scope))
	return ok, wrap("PauseDelete", err)
}

// TaskPark implements engine.Tx.
func (t *txn) TaskPark(ctx context.Context, id int64, owner, parked string, due time.Time) (bool, error) {
	ok, err := affected(t.exec(ctx, qTaskPark, rowfmt.ToMs(due), parked, id, owner))
	return ok, wrap("TaskPark", err)
}

// TaskUnpark implements engine.Tx.
func (t *txn) TaskUnpark(ctx context.Context, p engine.TaskUnparkParams) ([]*engine.Task, error) {
	rows, err := t.query(ctx, qTaskUnpark, storesql.UnparkArgs(storesql.SQLite, p)...)
	out, err := collectRows(rows, err, rowfmt.ScanTask)
	if err != nil {
		return nil, wrap("TaskUnpark", err)
	}
	rowfmt.SortTasks(out)
	return out, nil
}
