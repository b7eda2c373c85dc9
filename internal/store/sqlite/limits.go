package sqlite

import (
	"context"
	"database/sql"
	"errors"

	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/store/storesql"
)

// The limit table (migration 0011) and the reads of live executions of
// open runs, with storesql's statements.
var (
	limitSQL       = storesql.LimitSettingStatements(storesql.SQLite)
	qLimitList     = query(limitSQL.List)
	qLimitPut      = query(limitSQL.Put)
	qLimitSeed     = query(limitSQL.Seed)
	statsSQL       = storesql.StateStatsStatements(storesql.SQLite)
	qLiveOfType    = query(statsSQL.OfType)
	qLiveAll       = query(statsSQL.All)
	qWaitingOfType = query(statsSQL.WaitingOfType)
)

// LimitSettingList implements engine.ReadTx.
func (t *txn) LimitSettingList(ctx context.Context, limit int) ([]*engine.LimitSetting, error) {
	rows, err := t.query(ctx, qLimitList, storesql.SQLite.Limit(limit))
	out, err := collectRows(rows, err, storesql.ScanLimitSetting)
	return out, wrap("LimitSettingList", err)
}

// LimitSettingPut implements engine.Tx.
func (t *txn) LimitSettingPut(ctx context.Context, s *engine.LimitSetting) error {
	_, err := t.exec(ctx, qLimitPut, storesql.LimitSettingArgs(s)...)
	return wrap("LimitSettingPut", err)
}

// LimitSettingSeed implements engine.Tx.
func (t *txn) LimitSettingSeed(ctx context.Context, s *engine.LimitSetting) (bool, error) {
	var key string
	err := t.queryRow(ctx, qLimitSeed, storesql.LimitSettingArgs(s)...).Scan(&key)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, wrap("LimitSettingSeed", err)
}

// LiveExecutions implements engine.ReadTx.
func (t *txn) LiveExecutions(ctx context.Context, workflowType string, maxRuns int) ([]*engine.LiveExecution, error) {
	var (
		rows *sql.Rows
		err  error
	)
	if workflowType == "" {
		rows, err = t.query(ctx, qLiveAll, maxRuns)
	} else {
		rows, err = t.query(ctx, qLiveOfType, workflowType, maxRuns)
	}
	out, err := collectRows(rows, err, storesql.ScanLiveExecution)
	return out, wrap("LiveExecutions", err)
}

// WaitingExecutions implements engine.ReadTx.
func (t *txn) WaitingExecutions(ctx context.Context, workflowType string, maxRuns, limit int) ([]*engine.Execution, error) {
	rows, err := t.query(ctx, qWaitingOfType, workflowType, maxRuns, limit)
	out, err := collectRows(rows, err, storesql.ScanWaitingExecution)
	return out, wrap("WaitingExecutions", err)
}
