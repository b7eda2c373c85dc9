package storesql

import (
	"strings"

	"github.com/iwf-server/iwf-server/engine"
)

// Retention: the statements that find expired runs, delete them with
// every row that belongs to them, and record when retention began.

// CloseOrder is the expression of the search-order indexes (migration
// 0002 of both stores): the close time, with open runs last. It must stay
// identical to theirs.
const CloseOrder = `(CASE WHEN closed_at = 0 THEN 9223372036854775807 ELSE closed_at END)`

// Expired returns the statement that reads columns of the oldest expired
// runs of e (at most e.Limit), and its arguments.
//
// The retention of one workflow type (what the engine asks for with
// --retention-for) reads runs_search_type_order, whose prefix is the type
// and then the close time: the oldest runs of the type come first and the
// LIMIT ends the read. With a condition on closed_at and a list of types
// instead, the database reads every run of the type (SQLite, then sorts
// them) or walks runs_closed_at over the runs of every other type closed
// before the bound (PostgreSQL), for every batch: a sweep of N runs of one
// type then costs N squared. The rest reads runs_closed_at in close order
// (closed_at > 0 bounds the range from below on SQLite, whose index holds
// the open runs too, and implies the partial index's closed_at <> 0 on
// PostgreSQL).
func Expired(d Dialect, columns string, e engine.RunExpiry) (string, []any) {
	if len(e.Types) == 1 {
		// CloseOrder < ClosedBefore also excludes open runs (their
		// CloseOrder is the largest integer).
		return d.Render(`SELECT ` + columns + ` FROM runs WHERE workflow_type = $1 AND ` + CloseOrder +
				` < $2 ORDER BY ` + CloseOrder + ` LIMIT $3`),
			[]any{e.Types[0], e.ClosedBefore, e.Limit}
	}
	list, cond := e.ExceptTypes, d.NotIn(2, "text")
	if e.Types != nil {
		list, cond = e.Types, d.In(2, "text")
	}
	if list == nil {
		list = []string{}
	}
	return d.Render(`SELECT ` + columns + ` FROM runs WHERE closed_at > 0 AND closed_at < $1 AND workflow_type` + cond +
			` ORDER BY closed_at LIMIT $3`),
		[]any{e.ClosedBefore, List(d, list), e.Limit}
}

// ExpiredCount is Expired's statement counting the runs it reads.
func ExpiredCount(d Dialect, e engine.RunExpiry) (string, []any) {
	q, args := Expired(d, "1", e)
	return `SELECT count(*) FROM (` + q + `) AS e`, args
}

// RunTables are the tables whose rows belong to one run, by run_id,
// besides runs and workflows. search_attribute_words comes before
// search_attributes, whose delete trigger on SQLite would otherwise
// delete the words one attribute at a time. A table added here is
// deleted by both stores.
var RunTables = []string{"executions", "history", "messages", "data_attributes", "search_attribute_words",
	"search_attribute_strings", "search_attributes", "tasks"}

// RunsDelete are the statements that delete closed runs, given their ids,
// with every row that belongs to them (RunTables). A workflow row goes
// with its current run: its next start finds the id unused.
type RunsDelete struct {
	// One is the whole deletion in one statement, for a dialect that
	// WritesInOneStatement: $1 the run ids; it returns the number of runs
	// deleted. The closed runs among $1 that no other transaction holds
	// are locked (SKIP LOCKED); the row lock a start takes on a workflow
	// makes the DELETE re-check current_run_id, so a run started
	// meanwhile keeps it.
	//
	// Each table is reached through its index on run_id: the runs locked
	// are handed to the DELETEs as one array (ARRAY(SELECT ...) is
	// computed once, before the scan), so each DELETE is an index scan for
	// the batch's run ids. Written as run_id IN (SELECT run_id FROM
	// doomed), the planner cannot size the CTE and picked a hash semi-join
	// over a sequential scan of every table, for every batch: a sweep then
	// cost the square of the store's size (TestRunsDeletePlan).
	One string

	// Otherwise the deletion is these statements in one transaction.
	// Doomed reads run_id and workflow_id of the closed runs among $1.
	Doomed string
	// Tables deletes the rows of RunTables[i] of the runs $1.
	Tables []string
	// Workflows deletes the workflows $1 whose current run is among $2.
	Workflows string
	// Runs deletes the runs $1.
	Runs string
}

// RunsDeleteStatements returns d's statements of a deletion. Each reads
// every table through its index on run_id.
func RunsDeleteStatements(d Dialect) RunsDelete {
	if d.WritesInOneStatement() {
		doomed := func(col string) string { return ` = ANY (ARRAY(SELECT ` + col + ` FROM doomed))` }
		var b strings.Builder
		b.WriteString(`WITH doomed AS (
		SELECT run_id, workflow_id FROM runs WHERE run_id` + d.In(1, "text") + ` AND closed_at <> 0` + d.SkipLocked() + `
	),`)
		for _, t := range RunTables {
			b.WriteString("\n\td_" + t + ` AS (DELETE FROM ` + t + ` WHERE run_id` + doomed("run_id") + `),`)
		}
		b.WriteString(`
	d_workflows AS (DELETE FROM workflows w USING doomed d WHERE w.workflow_id` + doomed("workflow_id") + `
		AND w.workflow_id = d.workflow_id AND w.current_run_id = d.run_id),
	d_runs AS (DELETE FROM runs WHERE run_id` + doomed("run_id") + ` RETURNING 1)
	SELECT count(*) FROM d_runs`)
		return RunsDelete{One: d.Render(b.String())}
	}
	s := RunsDelete{
		Doomed:    d.Render(`SELECT run_id, workflow_id FROM runs WHERE run_id` + d.In(1, "text") + ` AND closed_at <> 0`),
		Workflows: d.Render(`DELETE FROM workflows WHERE workflow_id` + d.In(1, "text") + ` AND current_run_id` + d.In(2, "text")),
		Runs:      d.Render(`DELETE FROM runs WHERE run_id` + d.In(1, "text")),
	}
	for _, t := range RunTables {
		s.Tables = append(s.Tables, d.Render(`DELETE FROM `+t+` WHERE run_id`+d.In(1, "text")))
	}
	return s
}

// RetentionStart returns the statements of engine.Store.RetentionStart:
// insert records $1 as the start of retention unless one is recorded, and
// read reads the one that is. They run in this order in one transaction
// (READ COMMITTED on PostgreSQL: the read, a statement of its own, sees a
// row another process committed while the insert waited for it).
func RetentionStart(d Dialect) (insert, read string) {
	return d.Render(`INSERT INTO retention_start (id, since_ms) VALUES (1, $1) ON CONFLICT (id) DO NOTHING`),
		`SELECT since_ms FROM retention_start WHERE id = 1`
}
