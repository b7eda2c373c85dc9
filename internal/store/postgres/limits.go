package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/store/storesql"
)

// The limit table (migration 0015) and the reads of live executions of
// open runs, with storesql's statements.
var (
	limitSQL = storesql.LimitSettingStatements(storesql.PostgreSQL)
	statsSQL = storesql.StateStatsStatements(storesql.PostgreSQL)
)

func scanLimitSetting(r pgx.Rows) (*engine.LimitSetting, error) { return storesql.ScanLimitSetting(r) }
func scanLiveExecution(r pgx.Rows) (*engine.LiveExecution, error) {
	return storesql.ScanLiveExecution(r)
}
func scanWaitingExecution(r pgx.Rows) (*engine.Execution, error) {
	return storesql.ScanWaitingExecution(r)
}

// LimitSettingList implements engine.ReadTx.
func (t *txn) LimitSettingList(ctx context.Context, limit int) ([]*engine.LimitSetting, error) {
	rows, err := t.tx.Query(ctx, limitSQL.List, storesql.PostgreSQL.Limit(limit))
	out, err := collect(rows, err, scanLimitSetting)
	return out, wrap("LimitSettingList", err)
}

// LimitSettingPut implements engine.Tx.
func (t *txn) LimitSettingPut(ctx context.Context, s *engine.LimitSetting) error {
	_, err := t.tx.Exec(ctx, limitSQL.Put, storesql.LimitSettingArgs(s)...)
	return wrap("LimitSettingPut", err)
}

// LimitSettingSeed implements engine.Tx.
func (t *txn) LimitSettingSeed(ctx context.Context, s *engine.LimitSetting) (bool, error) {
	var key string
	err := t.tx.QueryRow(ctx, limitSQL.Seed, storesql.LimitSettingArgs(s)...).Scan(&key)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return err == nil, wrap("LimitSettingSeed", err)
}

// LiveExecutions implements engine.ReadTx.
func (t *txn) LiveExecutions(ctx context.Context, workflowType string, maxRuns int) ([]*engine.LiveExecution, error) {
	var (
		rows pgx.Rows
		err  error
	)
	if workflowType == "" {
		rows, err = t.tx.Query(ctx, statsSQL.All, maxRuns)
	} else {
		rows, err = t.tx.Query(ctx, statsSQL.OfType, workflowType, maxRuns)
	}
	out, err := collect(rows, err, scanLiveExecution)
	return out, wrap("LiveExecutions", err)
}

// WaitingExecutions implements engine.ReadTx.
func (t *txn) WaitingExecutions(ctx context.Context, workflowType string, maxRuns, limit int) ([]*engine.Execution, error) {
	rows, err := t.tx.Query(ctx, statsSQL.WaitingOfType, workflowType, maxRuns, limit)
	out, err := collect(rows, err, scanWaitingExecution)
	return out, wrap("WaitingExecutions", err)
}
