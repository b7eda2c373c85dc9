package storesql

import (
	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/store/rowfmt"
)

// StateStats are the statements that read the live state executions of
// open runs (engine.ReadTx.LiveExecutions and WaitingExecutions), rendered
// for one dialect.
//
// Each reads the open runs from a search-order index (migration 0002 of
// both stores), those that started first first, and stops at its limit:
// runs_search_type_order for one workflow type, runs_search_order for
// every type. Open runs are the last entries of a type's range (CloseOrder
// is the largest integer for them), so the read skips the closed runs
// however many there are. Each run's live executions come from the
// executions' primary key (run_id, execution_id), and the attempt and
// parked mark of an execution's pending call from tasks_run; nothing is
// sorted.
// TestStateStatsPlans checks the plans on both stores.
type StateStats struct {
	// OfType: $1 workflow type, $2 runs; returns LiveExecutionColumns.
	OfType string
	// All: $1 runs; returns LiveExecutionColumns.
	All string
	// WaitingOfType: $1 workflow type, $2 runs, $3 executions; returns
	// run_id, execution_id, state_id, data of up to $3 executions waiting
	// for commands among the runs OfType reads.
	WaitingOfType string
}

// LiveExecutionColumns are the columns ScanLiveExecution reads, in order:
// the run's, the execution's, and the attempt and parked mark of the
// execution's pending waitUntil or execute call (NULL when it has none, or
// when it is not parked). A run without a live execution is one row whose
// execution columns are NULL.
var LiveExecutionColumns = "r.workflow_type, r.workflow_id, r.run_id, r.started_at, x.execution_id, x.state_id, x.status, x.created_at, " +
	callOf("max(t.attempt)") + ", " + callOf("max(t.parked)")

// callOf selects col from the pending call task of the execution x.
func callOf(col string) string {
	return `(SELECT ` + col + ` FROM tasks t WHERE t.run_id = x.run_id AND t.execution_id = x.execution_id
	AND t.kind IN ('` + string(engine.TaskWaitUntil) + `', '` + string(engine.TaskExecute) + `'))`
}

// liveStatuses is the list of engine.LiveStatuses as SQL text.
var liveStatuses = "'" + string(engine.ExecWaitUntil) + "', '" + string(engine.ExecWaiting) + "', '" + string(engine.ExecExecute) + "'"

// StateStatsStatements returns the statements of the state statistics for d.
func StateStatsStatements(d Dialect) StateStats {
	open := func(typeCond, limit string) string {
		return `(SELECT workflow_type, workflow_id, run_id, started_at FROM runs
			WHERE ` + typeCond + CloseOrder + ` = 9223372036854775807
			ORDER BY started_at, run_id LIMIT ` + limit + `) AS r`
	}
	live := func(runs string) string {
		return `SELECT ` + LiveExecutionColumns + ` FROM ` + runs + `
			LEFT JOIN executions x ON x.run_id = r.run_id AND x.status IN (` + liveStatuses + `)`
	}
	r := d.Render
	return StateStats{
		OfType: r(live(open("workflow_type = $1 AND ", "$2"))),
		All:    r(live(open("", "$1"))),
		WaitingOfType: r(`SELECT x.run_id, x.execution_id, x.state_id, x.data FROM ` + open("workflow_type = $1 AND ", "$2") + `
			JOIN executions x ON x.run_id = r.run_id AND x.status = '` + string(engine.ExecWaiting) + `' LIMIT $3`),
	}
}

// ScanLiveExecution reads a row of LiveExecutionColumns.
func ScanLiveExecution(row rowfmt.Scanner) (*engine.LiveExecution, error) {
	var (
		x                       engine.LiveExecution
		started                 int64
		execID, stateID, status *string
		created, attempt        *int64
		parked                  *string
	)
	if err := row.Scan(&x.WorkflowType, &x.WorkflowID, &x.RunID, &started, &execID, &stateID, &status, &created, &attempt, &parked); err != nil {
		return nil, err
	}
	x.RunStartedAt = rowfmt.FromMs(started)
	if execID != nil {
		x.ExecutionID, x.StateID, x.Status = *execID, deref(stateID), engine.ExecutionStatus(deref(status))
	}
	if created != nil {
		x.CreatedAt = rowfmt.FromMs(*created)
	}
	if attempt != nil {
		x.Attempt = int(*attempt)
	}
	x.Parked = deref(parked)
	return &x, nil
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// ScanWaitingExecution reads a row of WaitingOfType: an execution waiting
// for commands, with its run, execution and state ids and its data.
func ScanWaitingExecution(row rowfmt.Scanner) (*engine.Execution, error) {
	x := engine.Execution{Status: engine.ExecWaiting}
	if err := row.Scan(&x.RunID, &x.ExecutionID, &x.StateID, &x.Data); err != nil {
		return nil, err
	}
	return &x, nil
}
