package storesql

import (
	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/store/rowfmt"
)

// Pauses are the statements of the paused scopes (engine.Pause, table
// pauses) and of the parked tasks (the parked column of tasks): migration
// 0014 on PostgreSQL, 0010 on SQLite.
type Pauses struct {
	// List reads every paused scope, by scope: scope, reason, paused_by,
	// paused_at.
	List string
	// Hold reads the paused scopes among $1 (List), by scope, as List,
	// locked against deletion until the transaction ends (LockShared).
	Hold string
	// Insert: $1 scope, $2 reason, $3 paused by, $4 paused at (ms); a
	// scope paused already is left as it is.
	Insert string
	// Delete: $1 scope.
	Delete string
	// Park sets aside task $3 leased to $4: unleased, due at $1 (ms),
	// parked $2.
	Park string
	// Unpark makes parked tasks due again, at most $3 (Limit) of them in
	// id order, of parked mark $1 ("" any) and run $2 ("" any): the n-th
	// (from 0) is due at $4 + n × $5 / 1000 (ms; $5 is the step in
	// microseconds), leased to $6 until its due time plus $7 (ms), or
	// unleased when $6 is NULL. It returns the tasks (rowfmt.TaskColumns).
	Unpark string
	// ParkedCount reads the number of parked tasks per parked mark:
	// parked, count.
	ParkedCount string
}

// pauseColumns are the columns List and Hold read, in order.
const pauseColumns = "scope, reason, paused_by, paused_at"

// PauseStatements returns the statements of the pauses for d.
func PauseStatements(d Dialect) Pauses {
	r := d.Render
	due := `CAST($4 AS bigint) + (picked.n * CAST($5 AS bigint)) / 1000`
	return Pauses{
		List: r(`SELECT ` + pauseColumns + ` FROM pauses ORDER BY scope`),
		Hold: r(`SELECT ` + pauseColumns + ` FROM pauses WHERE scope` + d.In(1, "text") + ` ORDER BY scope` + d.LockShared()),
		Insert: r(`INSERT INTO pauses (` + pauseColumns + `) VALUES ($1, $2, $3, $4)
		ON CONFLICT (scope) DO NOTHING`),
		Delete: r(`DELETE FROM pauses WHERE scope = $1`),
		Park: r(`UPDATE tasks SET due_at = $1, lease_owner = NULL, lease_expires_at = 0, parked = $2
		WHERE id = $3 AND lease_owner = $4`),
		Unpark: r(`WITH picked AS (
			SELECT id AS pid, row_number() OVER (ORDER BY id) - 1 AS n FROM (
				SELECT id FROM tasks
				WHERE parked IS NOT NULL AND (CAST($1 AS text) = '' OR parked = $1) AND (CAST($2 AS text) = '' OR run_id = $2)
				ORDER BY id LIMIT $3) AS p)
		UPDATE tasks SET parked = NULL, due_at = ` + due + `,
			lease_owner = CAST($6 AS text),
			lease_expires_at = CASE WHEN CAST($6 AS text) IS NULL THEN 0 ELSE ` + due + ` + CAST($7 AS bigint) END
		FROM picked WHERE tasks.id = picked.pid AND tasks.parked IS NOT NULL
		RETURNING ` + rowfmt.TaskColumns),
		ParkedCount: r(`SELECT parked, count(*) FROM tasks WHERE parked IS NOT NULL GROUP BY parked`),
	}
}

// ScanPause reads a row of List or Hold.
func ScanPause(row rowfmt.Scanner) (*engine.Pause, error) {
	var p engine.Pause
	var at int64
	if err := row.Scan(&p.Scope, &p.Reason, &p.By, &at); err != nil {
		return nil, err
	}
	p.At = rowfmt.FromMs(at)
	return &p, nil
}

// UnparkArgs are the parameters of Unpark for p, limits bound for d.
func UnparkArgs(d Dialect, p engine.TaskUnparkParams) []any {
	var owner any
	if p.Owner != "" {
		owner = p.Owner
	}
	return []any{p.Parked, p.RunID, d.Limit(p.Limit), rowfmt.ToMs(p.Due), p.Step.Microseconds(), owner, p.LeaseDuration.Milliseconds()}
}
