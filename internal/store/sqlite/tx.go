package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/store/rowfmt"
	"github.com/iwf-server/iwf-server/search"
)

// queries lists every statement of the store; each is prepared once per
// connection and addressed by its index. Lists of values (statuses, kinds,
// keys, ids) are bound as one JSON array and expanded with json_each, so that
// the text of a statement never depends on the number of values.
var queries []string

func query(q string) int {
	queries = append(queries, q)
	return len(queries) - 1
}

// queriesOf registers each of qs (query) and returns their indexes.
func queriesOf(qs []string) []int {
	out := make([]int, len(qs))
	for i, q := range qs {
		out[i] = query(q)
	}
	return out
}

const (
	runColumns  = rowfmt.RunColumns
	execColumns = rowfmt.ExecutionColumns
	msgColumns  = `id, run_id, kind, channel, value, created_at`
	taskColumns = rowfmt.TaskColumns
	histColumns = `id, run_id, at, type, execution_id, data`
	saColumns   = `key, value_type, raw, string_value, int_value, double_value, bool_value, time_value`
	inJSON      = ` IN (SELECT value FROM json_each(?))`
)

var (
	qWorkflowGet  = query(`SELECT current_run_id FROM workflows WHERE workflow_id = ?`)
	qWorkflowLock = query(`INSERT INTO workflows (workflow_id) VALUES (?)
		ON CONFLICT (workflow_id) DO UPDATE SET workflow_id = excluded.workflow_id
		RETURNING current_run_id`)
	qWorkflowSet = query(`INSERT INTO workflows (workflow_id, current_run_id) VALUES (?, ?)
		ON CONFLICT (workflow_id) DO UPDATE SET current_run_id = excluded.current_run_id`)
	qWorkflowCreate = query(`INSERT INTO workflows (workflow_id, current_run_id) VALUES (?, ?)
		ON CONFLICT (workflow_id) DO NOTHING`)

	qRunGet    = query(`SELECT ` + runColumns + ` FROM runs WHERE run_id = ?`)
	qRunInsert = query(`INSERT INTO runs (` + runColumns + `) VALUES (?, ?, ?, ?, ?, ?, ?)`)
	qRunUpdate = query(`UPDATE runs SET status = ?, closed_at = ?, data = ? WHERE run_id = ?`)
	// qRunUpdateData rewrites the record of a run whose status and close
	// time stay as they are. SQLite maintains an index on an UPDATE when
	// the statement sets one of its columns, whatever the value: setting
	// only data leaves the four indexes on status and closed_at (and their
	// pages, each written to the WAL at the commit) alone.
	qRunUpdateData = query(`UPDATE runs SET data = ? WHERE run_id = ? AND status = ? AND closed_at = ?`)

	qRunExpect = query(`SELECT count(*) FROM runs WHERE run_id = ? AND status = ? AND closed_at = ? AND data IS ?`)
	// qRunUpdateExpect and qRunUpdateDataExpect are qRunUpdate and
	// qRunUpdateData that make TaskTakeExpecting's check of the run in
	// their WHERE: no row changed is the failed check.
	qRunUpdateExpect = query(`UPDATE runs SET status = ?, closed_at = ?, data = ?
		WHERE run_id = ? AND status = ? AND closed_at = ? AND data IS ?`)
	qRunUpdateDataExpect = query(`UPDATE runs SET data = ? WHERE run_id = ? AND status = ? AND closed_at = ? AND data IS ?`)

	qExecExpect     = query(`SELECT count(*) FROM executions WHERE run_id = ? AND execution_id = ? AND status = ? AND data IS ?`)
	qExecGet        = query(`SELECT ` + execColumns + ` FROM executions WHERE run_id = ? AND execution_id = ?`)
	qExecList       = query(`SELECT ` + execColumns + ` FROM executions WHERE run_id = ? ORDER BY id`)
	qExecListStatus = query(`SELECT ` + execColumns + ` FROM executions WHERE run_id = ? AND status` + inJSON + ` ORDER BY id`)
	qExecInsert     = query(`INSERT INTO executions (` + execColumns + `) VALUES (?, ?, ?, ?, ?, ?)`)
	qExecUpdate     = query(`UPDATE executions SET status = ?, data = ? WHERE run_id = ? AND execution_id = ?`)
	// qExecUpdateExpect is qExecUpdate that makes TaskTakeExpecting's
	// check of the execution in its WHERE.
	qExecUpdateExpect = query(`UPDATE executions SET status = ?, data = ?
		WHERE run_id = ? AND execution_id = ? AND status = ? AND data IS ?`)

	qMsgPeek   = query(`SELECT ` + msgColumns + ` FROM messages WHERE run_id = ? AND kind = ? AND channel = ? ORDER BY id LIMIT ?`)
	qMsgCounts = query(`SELECT channel, count(*) FROM messages WHERE run_id = ? AND kind = ? GROUP BY channel`)
	qMsgInsert = query(`INSERT INTO messages (run_id, kind, channel, value, created_at) VALUES (?, ?, ?, ?, ?)`)
	qMsgDelete = query(`DELETE FROM messages WHERE id` + inJSON)

	qDataGetAll  = query(`SELECT key, value FROM data_attributes WHERE run_id = ? ORDER BY key`)
	qDataGetKeys = query(`SELECT key, value FROM data_attributes WHERE run_id = ? AND key` + inJSON + ` ORDER BY key`)
	qDataUpsert  = query(`INSERT INTO data_attributes (run_id, key, value) VALUES (?, ?, ?)
		ON CONFLICT (run_id, key) DO UPDATE SET value = excluded.value`)

	qSearchGetAll  = query(`SELECT ` + saColumns + ` FROM search_attributes WHERE run_id = ? ORDER BY key`)
	qSearchGetKeys = query(`SELECT ` + saColumns + ` FROM search_attributes WHERE run_id = ? AND key` + inJSON + ` ORDER BY key`)
	qSearchStrings = query(`SELECT key, value FROM search_attribute_strings WHERE run_id = ? ORDER BY key, pos`)
	qSearchUpsert  = query(`INSERT INTO search_attributes (run_id, ` + saColumns + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (run_id, key) DO UPDATE SET value_type = excluded.value_type, raw = excluded.raw,
			string_value = excluded.string_value, int_value = excluded.int_value, double_value = excluded.double_value,
			bool_value = excluded.bool_value, time_value = excluded.time_value`)
	qSearchStringsDelete = query(`DELETE FROM search_attribute_strings WHERE run_id = ? AND key = ?`)
	qSearchStringsInsert = query(`INSERT INTO search_attribute_strings (run_id, key, pos, value) VALUES (?, ?, ?, ?)`)

	qTaskList   = query(`SELECT ` + taskColumns + ` FROM tasks WHERE run_id = ? ORDER BY due_at, id`)
	qTaskInsert = query(`INSERT INTO tasks (run_id, workflow_id, execution_id, kind, due_at, attempt, first_attempt_at, lease_owner, lease_expires_at, data)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
	qTaskDelete     = query(`DELETE FROM tasks WHERE id = ? AND lease_owner IS ?`)
	qTaskReschedule = query(`UPDATE tasks SET due_at = ?, attempt = ?, lease_owner = ?, lease_expires_at = ?
		WHERE id = ? AND lease_owner IS ?`)
	qTaskDeleteRun       = query(`DELETE FROM tasks WHERE run_id = ?`)
	qTaskDeleteRunKinds  = query(`DELETE FROM tasks WHERE run_id = ? AND kind` + inJSON)
	qTaskDeleteExec      = query(`DELETE FROM tasks WHERE run_id = ? AND execution_id = ?`)
	qTaskDeleteExecKinds = query(`DELETE FROM tasks WHERE run_id = ? AND execution_id = ? AND kind` + inJSON)
	// ?1 owner, ?2 now, ?3 lease duration, ?4 due before, ?5 limit (-1: none).
	// Expired leases first, then unleased tasks, each oldest due first and
	// each from its partial index. SET expressions read the row as it was, so
	// the attempt advances exactly when the claimed task was leased.
	qTaskClaim = query(`UPDATE tasks SET
			attempt = attempt + (lease_owner IS NOT NULL),
			lease_owner = ?1,
			lease_expires_at = max(due_at, ?2) + ?3
		WHERE id IN (
			SELECT id FROM (
				SELECT id, 0 AS p, due_at FROM (
					SELECT id, due_at FROM tasks
					WHERE lease_owner IS NOT NULL AND lease_expires_at < ?2 AND due_at <= ?4
					ORDER BY due_at, id LIMIT ?5)
				UNION ALL
				SELECT id, 1 AS p, due_at FROM (
					SELECT id, due_at FROM tasks
					WHERE lease_owner IS NULL AND due_at <= ?4
					ORDER BY due_at, id LIMIT ?5))
			ORDER BY p, due_at, id LIMIT ?5)
		RETURNING ` + taskColumns)
	qTaskRenew = query(`UPDATE tasks SET lease_expires_at = max(due_at, ?1) + ?2
		WHERE id IN (SELECT value FROM json_each(?4)) AND lease_owner = ?3 AND lease_expires_at < max(due_at, ?1) + ?2`)
	qTaskRelease = query(`UPDATE tasks SET lease_owner = NULL, lease_expires_at = 0, attempt = attempt + 1
		WHERE lease_owner IS NOT NULL AND lease_owner <> ?`)
	// ?1 owner, ?2 JSON array of ids or NULL (all of owner's), ?3 attempt increment.
	qTaskReleaseOwned = query(`UPDATE tasks SET lease_owner = NULL, lease_expires_at = 0, attempt = attempt + ?3
		WHERE lease_owner = ?1 AND (?2 IS NULL OR id IN (SELECT value FROM json_each(?2)))`)

	qHistList = query(`SELECT ` + histColumns + ` FROM history WHERE run_id = ? AND id > ? ORDER BY id LIMIT ?`)
	// qHistInsert[n-1] appends n events in one statement (a transaction
	// records two or three as a rule).
	qHistInsert = queriesOf(histInserts(histInsertMax))
	// ?1 run, ?2 after id, ?3 limit, ?4 the types, each between two
	// unit separators (a string search per row costs less than a
	// json_each subquery), ?5 marked type, ?6 marker. The data of the
	// other events is not read.
	qHistOutline = query(`SELECT id, at, type, execution_id,
			CASE WHEN instr(?4, char(31) || type || char(31)) > 0 OR (type = ?5 AND instr(data, ?6) > 0) THEN data END
		FROM history WHERE run_id = ?1 AND id > ?2 ORDER BY id LIMIT ?3`)
	qHistGet = query(`SELECT ` + histColumns + ` FROM history WHERE run_id = ? AND id` + inJSON + ` ORDER BY id`)
)

// txn implements engine.Tx (and engine.ReadTx) on a database/sql transaction.
type txn struct {
	tx    *sql.Tx
	st    []*sql.Stmt // the pool's prepared statements
	bound []*sql.Stmt // st bound to tx, created on first use
	// rec is what the Update function running keeps for after the commit
	// (the rows it created and its call reads, see prefetch.go); nil in a
	// View.
	rec *fnRecord
	// expectRun and expectExec are the checks of TaskTakeExpecting not
	// made yet: the first RunUpdate or ExecutionUpdate of the same row
	// makes its check in its WHERE; the next read, or runFn when the
	// function returns, makes those left (checkExpected).
	expectRun, expectExec *expectation
	// counter, when set, counts the statements run (Store.writerStatements).
	counter *atomic.Int64
}

// expectation is a check of TaskTakeExpecting not made yet: the values the
// row must still hold. Only RunUpdate writes a run's row and only
// ExecutionUpdate an execution's (besides their inserts and retention's
// deletes), so until the transaction's first update of the row, the row is
// as it was when the transaction began: the writer runs one transaction at
// a time, and the check, made later in the same transaction, finds what it
// would have found at once.
type expectation struct {
	runID, executionID string // executionID "": the run
	status             string
	closedAt           int64 // the run's
	data               any   // as bound (text: a string, or nil for NULL)
}

var (
	_ engine.Tx             = (*txn)(nil)
	_ engine.CallPrefetcher = (*txn)(nil)
)

func (t *txn) stmt(ctx context.Context, q int) *sql.Stmt {
	if t.counter != nil {
		t.counter.Add(1)
	}
	if t.bound == nil {
		t.bound = make([]*sql.Stmt, len(queries))
	}
	if s := t.bound[q]; s != nil {
		return s
	}
	s := t.tx.StmtContext(ctx, t.st[q])
	t.bound[q] = s
	return s
}

func (t *txn) exec(ctx context.Context, q int, args ...any) (sql.Result, error) {
	return t.stmt(ctx, q).ExecContext(ctx, args...)
}

// query runs a read of the transaction. A read first makes the checks of
// TaskTakeExpecting not made yet (checkExpected): the function must not
// act on rows read after a check that would have failed.
func (t *txn) query(ctx context.Context, q int, args ...any) (*sql.Rows, error) {
	if err := t.checkExpected(ctx); err != nil {
		return nil, err
	}
	return t.stmt(ctx, q).QueryContext(ctx, args...)
}

// queryRow is query for one row; a failed check is the row's Scan error.
func (t *txn) queryRow(ctx context.Context, q int, args ...any) rowfmt.Scanner {
	if err := t.checkExpected(ctx); err != nil {
		return errRow{err}
	}
	return t.stmt(ctx, q).QueryRowContext(ctx, args...)
}

// errRow is a row whose Scan returns err.
type errRow struct{ err error }

// Scan implements rowfmt.Scanner.
func (r errRow) Scan(...any) error { return r.err }

// jsonList encodes values for a json_each parameter.
func jsonList[T any](values []T) (string, error) {
	b, err := json.Marshal(values)
	return string(b), err
}

func notFound(err error) error { return rowfmt.NotFound(err, sql.ErrNoRows) }

func wrap(op string, err error) error { return rowfmt.Wrap("sqlite", op, err) }

// mustAffect turns "no row changed" into engine.ErrNotFound.
func mustAffect(res sql.Result, err error) error {
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return engine.ErrNotFound
	}
	return nil
}

// affected reports whether a statement changed a row.
func affected(res sql.Result, err error) (bool, error) {
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n > 0, err
}

// ---------------------------------------------------------------------------
// workflows

// WorkflowGetCurrentRun implements engine.ReadTx.
func (t *txn) WorkflowGetCurrentRun(ctx context.Context, workflowID string) (string, error) {
	var runID string
	err := notFound(t.queryRow(ctx, qWorkflowGet, workflowID).Scan(&runID))
	if err == nil && runID == "" {
		err = engine.ErrNotFound
	}
	return runID, wrap("WorkflowGetCurrentRun", err)
}

// WorkflowLock implements engine.Tx. The write transaction already excludes
// every other writer, so creating the row is all there is to do.
func (t *txn) WorkflowLock(ctx context.Context, workflowID string) (string, error) {
	var runID string
	err := t.queryRow(ctx, qWorkflowLock, workflowID).Scan(&runID)
	return runID, wrap("WorkflowLock", err)
}

// WorkflowLockOrCreate implements engine.Tx. The write transaction holds
// the database, so reading the workflow's row is enough to own it (as in
// RunLock). A new workflow id, the common case, takes one statement: the
// insert of its row pointing at runID (qWorkflowCreate), which does
// nothing when the row exists; only then is the row read, and a workflow
// without a current run gets runID.
func (t *txn) WorkflowLockOrCreate(ctx context.Context, workflowID, runID string) (string, bool, error) {
	created, err := affected(t.exec(ctx, qWorkflowCreate, workflowID, runID))
	if err != nil || created {
		return "", created, wrap("WorkflowLockOrCreate", err)
	}
	var cur string
	err = t.queryRow(ctx, qWorkflowGet, workflowID).Scan(&cur)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return "", false, wrap("WorkflowLockOrCreate", err)
	}
	if cur != "" {
		return cur, false, nil
	}
	return "", true, t.WorkflowSetCurrentRun(ctx, workflowID, runID)
}

// WorkflowSetCurrentRun implements engine.Tx; it creates the workflow row
// when absent.
func (t *txn) WorkflowSetCurrentRun(ctx context.Context, workflowID, runID string) error {
	_, err := t.exec(ctx, qWorkflowSet, workflowID, runID)
	return wrap("WorkflowSetCurrentRun", err)
}

// ---------------------------------------------------------------------------
// runs

func scanRun(row rowfmt.Scanner) (*engine.Run, error) {
	r, err := rowfmt.ScanRun(row)
	return r, notFound(err)
}

// RunGet implements engine.ReadTx.
func (t *txn) RunGet(ctx context.Context, runID string) (*engine.Run, error) {
	r, err := scanRun(t.queryRow(ctx, qRunGet, runID))
	return r, wrap("RunGet", err)
}

// RunLock implements engine.Tx. SQLite has one writer at a time, so reading
// the run inside the write transaction is enough to own it.
func (t *txn) RunLock(ctx context.Context, runID string) (*engine.Run, error) {
	r, err := scanRun(t.queryRow(ctx, qRunGet, runID))
	return r, wrap("RunLock", err)
}

// RunInsert implements engine.Tx.
func (t *txn) RunInsert(ctx context.Context, r *engine.Run) error {
	_, err := t.exec(ctx, qRunInsert, r.RunID, r.WorkflowID, r.WorkflowType, string(r.Status),
		rowfmt.ToMs(r.StartedAt), rowfmt.ToMs(r.ClosedAt), text(r.Data))
	if err != nil {
		t.changed(r.RunID)
	} else if t.rec != nil {
		t.rec.born.Run(r)
	}
	return wrap("RunInsert", err)
}

// RunUpdate implements engine.Tx; it returns engine.ErrNotFound when the run
// does not exist.
//
// An open run's update (the common one: a worker's answer applied) first
// tries to rewrite its record alone (qRunUpdateData), which holds when its
// status stays as it was; only a run that changes status or closes pays
// for the index updates.
func (t *txn) RunUpdate(ctx context.Context, r *engine.Run) error {
	t.changed(r.RunID)
	status, closedAt := string(r.Status), rowfmt.ToMs(r.ClosedAt)
	if e := t.expectRun; e != nil && e.runID == r.RunID {
		t.expectRun = nil
		var res sql.Result
		var err error
		if status == e.status && closedAt == e.closedAt {
			res, err = t.exec(ctx, qRunUpdateDataExpect, text(r.Data), r.RunID, e.status, e.closedAt, e.data)
		} else {
			res, err = t.exec(ctx, qRunUpdateExpect, status, closedAt, text(r.Data), r.RunID, e.status, e.closedAt, e.data)
		}
		if ok, err := affected(res, err); err != nil || !ok {
			return expectFailed("RunUpdate", "run", r.RunID, err)
		}
		return nil
	}
	if r.ClosedAt.IsZero() {
		done, err := affected(t.exec(ctx, qRunUpdateData, text(r.Data), r.RunID, status, closedAt))
		if err != nil || done {
			return wrap("RunUpdate", err)
		}
	}
	return wrap("RunUpdate", mustAffect(t.exec(ctx, qRunUpdate, status, closedAt, text(r.Data), r.RunID)))
}

// ---------------------------------------------------------------------------
// executions

func scanExecution(row rowfmt.Scanner) (*engine.Execution, error) {
	x, err := rowfmt.ScanExecution(row)
	return x, notFound(err)
}

// ExecutionGet implements engine.ReadTx.
func (t *txn) ExecutionGet(ctx context.Context, runID, executionID string) (*engine.Execution, error) {
	e, err := scanExecution(t.queryRow(ctx, qExecGet, runID, executionID))
	return e, wrap("ExecutionGet", err)
}

// ExecutionList implements engine.ReadTx.
func (t *txn) ExecutionList(ctx context.Context, runID string, statuses ...engine.ExecutionStatus) ([]*engine.Execution, error) {
	var (
		rows *sql.Rows
		err  error
	)
	if len(statuses) == 0 {
		rows, err = t.query(ctx, qExecList, runID)
	} else {
		var list string
		if list, err = jsonList(statuses); err == nil {
			rows, err = t.query(ctx, qExecListStatus, runID, list)
		}
	}
	if err != nil {
		return nil, wrap("ExecutionList", err)
	}
	defer rows.Close()
	var out []*engine.Execution
	for rows.Next() {
		e, err := scanExecution(rows)
		if err != nil {
			return nil, wrap("ExecutionList", err)
		}
		out = append(out, e)
	}
	return out, wrap("ExecutionList", rows.Err())
}

// ExecutionInsert implements engine.Tx.
func (t *txn) ExecutionInsert(ctx context.Context, executions []*engine.Execution) error {
	for _, e := range executions {
		if _, err := t.exec(ctx, qExecInsert, e.RunID, e.ExecutionID, e.StateID, string(e.Status), rowfmt.ToMs(e.CreatedAt), text(e.Data)); err != nil {
			for _, e := range executions {
				t.changed(e.RunID)
			}
			return wrap("ExecutionInsert", err)
		}
	}
	if t.rec != nil {
		t.rec.born.Executions(executions)
	}
	return nil
}

// ExecutionUpdate implements engine.Tx; it returns engine.ErrNotFound when
// the execution does not exist.
func (t *txn) ExecutionUpdate(ctx context.Context, e *engine.Execution) error {
	t.changed(e.RunID)
	if x := t.expectExec; x != nil && x.runID == e.RunID && x.executionID == e.ExecutionID {
		t.expectExec = nil
		ok, err := affected(t.exec(ctx, qExecUpdateExpect, string(e.Status), text(e.Data), e.RunID, e.ExecutionID, x.status, x.data))
		if err != nil || !ok {
			return expectFailed("ExecutionUpdate", "execution", e.ExecutionID, err)
		}
		return nil
	}
	return wrap("ExecutionUpdate", mustAffect(t.exec(ctx, qExecUpdate, string(e.Status), text(e.Data), e.RunID, e.ExecutionID)))
}

// ---------------------------------------------------------------------------
// messages

// MessagePeek implements engine.ReadTx.
func (t *txn) MessagePeek(ctx context.Context, runID string, kind engine.ChannelKind, channel string, limit int) ([]*engine.Message, error) {
	if limit <= 0 {
		limit = -1
	}
	rows, err := t.query(ctx, qMsgPeek, runID, int(kind), channel, limit)
	if err != nil {
		return nil, wrap("MessagePeek", err)
	}
	defer rows.Close()
	var out []*engine.Message
	for rows.Next() {
		var (
			m         engine.Message
			kind      int
			createdAt int64
		)
		if err := rows.Scan(&m.ID, &m.RunID, &kind, &m.Channel, &m.Value, &createdAt); err != nil {
			return nil, wrap("MessagePeek", err)
		}
		m.Kind, m.CreatedAt = engine.ChannelKind(kind), rowfmt.FromMs(createdAt)
		out = append(out, &m)
	}
	return out, wrap("MessagePeek", rows.Err())
}

// MessageCounts implements engine.ReadTx.
func (t *txn) MessageCounts(ctx context.Context, runID string, kind engine.ChannelKind) (map[string]int, error) {
	rows, err := t.query(ctx, qMsgCounts, runID, int(kind))
	if err != nil {
		return nil, wrap("MessageCounts", err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var (
			ch string
			n  int
		)
		if err := rows.Scan(&ch, &n); err != nil {
			return nil, wrap("MessageCounts", err)
		}
		out[ch] = n
	}
	return out, wrap("MessageCounts", rows.Err())
}

// MessageAppend implements engine.Tx.
func (t *txn) MessageAppend(ctx context.Context, messages []*engine.Message) error {
	for _, m := range messages {
		res, err := t.exec(ctx, qMsgInsert, m.RunID, int(m.Kind), m.Channel, text(m.Value), rowfmt.ToMs(m.CreatedAt))
		if err != nil {
			return wrap("MessageAppend", err)
		}
		if m.ID, err = res.LastInsertId(); err != nil {
			return wrap("MessageAppend", err)
		}
	}
	return nil
}

// MessageDelete implements engine.Tx.
func (t *txn) MessageDelete(ctx context.Context, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	list, err := jsonList(ids)
	if err == nil {
		_, err = t.exec(ctx, qMsgDelete, list)
	}
	return wrap("MessageDelete", err)
}

// ---------------------------------------------------------------------------
// attributes

// DataAttributeGet implements engine.ReadTx.
func (t *txn) DataAttributeGet(ctx context.Context, runID string, keys []string) ([]*engine.Attribute, error) {
	var (
		rows *sql.Rows
		err  error
	)
	switch {
	case keys == nil:
		rows, err = t.query(ctx, qDataGetAll, runID)
	case len(keys) == 0:
		return nil, nil
	default:
		var list string
		if list, err = jsonList(keys); err == nil {
			rows, err = t.query(ctx, qDataGetKeys, runID, list)
		}
	}
	if err != nil {
		return nil, wrap("DataAttributeGet", err)
	}
	defer rows.Close()
	var out []*engine.Attribute
	for rows.Next() {
		var a engine.Attribute
		if err := rows.Scan(&a.Key, &a.Value); err != nil {
			return nil, wrap("DataAttributeGet", err)
		}
		out = append(out, &a)
	}
	return out, wrap("DataAttributeGet", rows.Err())
}

// DataAttributeUpsert implements engine.Tx. A key given twice takes its last
// value.
func (t *txn) DataAttributeUpsert(ctx context.Context, runID string, attrs []*engine.Attribute) error {
	for _, a := range attrs {
		if _, err := t.exec(ctx, qDataUpsert, runID, a.Key, text(a.Value)); err != nil {
			t.changed(runID)
			return wrap("DataAttributeUpsert", err)
		}
	}
	if t.rec != nil {
		t.rec.born.DataAttributes(runID, attrs)
	}
	return nil
}

// SearchAttributeGet implements engine.ReadTx.
func (t *txn) SearchAttributeGet(ctx context.Context, runID string, keys []string) ([]*engine.SearchAttribute, error) {
	var (
		rows *sql.Rows
		err  error
	)
	switch {
	case keys == nil:
		rows, err = t.query(ctx, qSearchGetAll, runID)
	case len(keys) == 0:
		return nil, nil
	default:
		var list string
		if list, err = jsonList(keys); err == nil {
			rows, err = t.query(ctx, qSearchGetKeys, runID, list)
		}
	}
	if err != nil {
		return nil, wrap("SearchAttributeGet", err)
	}
	out, arrays, err := scanSearchAttributes(rows)
	if err != nil || len(arrays) == 0 {
		return out, wrap("SearchAttributeGet", err)
	}
	rows, err = t.query(ctx, qSearchStrings, runID)
	if err != nil {
		return nil, wrap("SearchAttributeGet", err)
	}
	defer rows.Close()
	for rows.Next() {
		var key, value string
		if err := rows.Scan(&key, &value); err != nil {
			return nil, wrap("SearchAttributeGet", err)
		}
		if a := arrays[key]; a != nil {
			a.Strings = append(a.Strings, value)
		}
	}
	return out, wrap("SearchAttributeGet", rows.Err())
}

// scanSearchAttributes reads search attribute rows and returns the
// KEYWORD_ARRAY ones by key, their Strings still to be filled.
func scanSearchAttributes(rows *sql.Rows) ([]*engine.SearchAttribute, map[string]*engine.SearchAttribute, error) {
	defer rows.Close()
	var (
		out    []*engine.SearchAttribute
		arrays map[string]*engine.SearchAttribute
	)
	for rows.Next() {
		var (
			a  engine.SearchAttribute
			s  sql.NullString
			i  sql.NullInt64
			d  sql.NullFloat64
			b  sql.NullBool
			tm sql.NullInt64
		)
		if err := rows.Scan(&a.Key, &a.ValueType, &a.Raw, &s, &i, &d, &b, &tm); err != nil {
			return nil, nil, err
		}
		if s.Valid {
			a.String = &s.String
		}
		if i.Valid {
			a.Int = &i.Int64
		}
		if d.Valid {
			a.Double = &d.Float64
		}
		if b.Valid {
			a.Bool = &b.Bool
		}
		if tm.Valid {
			v := rowfmt.FromNs(tm.Int64)
			a.Time = &v
		}
		if a.ValueType == search.KeywordArray {
			a.Strings = []string{}
			if arrays == nil {
				arrays = map[string]*engine.SearchAttribute{}
			}
			arrays[a.Key] = &a
		}
		out = append(out, &a)
	}
	return out, arrays, rows.Err()
}

// SearchAttributeUpsert implements engine.Tx. A key given twice takes its
// last value.
func (t *txn) SearchAttributeUpsert(ctx context.Context, runID string, attrs []*engine.SearchAttribute) error {
	if err := t.searchAttributeUpsert(ctx, runID, attrs); err != nil {
		t.changed(runID)
		return wrap("SearchAttributeUpsert", err)
	}
	if t.rec != nil {
		t.rec.born.SearchAttributes(runID, attrs)
	}
	return nil
}

// searchAttributeUpsert writes attrs: each attribute's row, then its
// keyword elements.
func (t *txn) searchAttributeUpsert(ctx context.Context, runID string, attrs []*engine.SearchAttribute) error {
	for _, a := range attrs {
		var tm any
		if a.Time != nil {
			tm = rowfmt.ToNs(*a.Time)
		}
		if _, err := t.exec(ctx, qSearchUpsert, runID, a.Key, a.ValueType, text(a.Raw),
			ptrValue(a.String), ptrValue(a.Int), ptrValue(a.Double), ptrValue(a.Bool), tm); err != nil {
			return err
		}
		if _, err := t.exec(ctx, qSearchStringsDelete, runID, a.Key); err != nil {
			return err
		}
		for i, v := range rowfmt.KeywordElements(a) {
			if _, err := t.exec(ctx, qSearchStringsInsert, runID, a.Key, i, v); err != nil {
				return err
			}
		}
	}
	return nil
}

// ptrValue binds a nil pointer as NULL.
func ptrValue[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

// ---------------------------------------------------------------------------
// tasks

func scanTasks(rows *sql.Rows) ([]*engine.Task, error) {
	defer rows.Close()
	var out []*engine.Task
	for rows.Next() {
		tk, err := rowfmt.ScanTask(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, tk)
	}
	return out, rows.Err()
}

// TaskList implements engine.ReadTx.
func (t *txn) TaskList(ctx context.Context, runID string) ([]*engine.Task, error) {
	rows, err := t.query(ctx, qTaskList, runID)
	if err != nil {
		return nil, wrap("TaskList", err)
	}
	tasks, err := scanTasks(rows)
	return tasks, wrap("TaskList", err)
}

// TaskInsert implements engine.Tx. A task may be inserted leased.
func (t *txn) TaskInsert(ctx context.Context, tasks []*engine.Task) error {
	for _, tk := range tasks {
		res, err := t.exec(ctx, qTaskInsert, tk.RunID, tk.WorkflowID, tk.ExecutionID, string(tk.Kind), rowfmt.ToMs(tk.DueAt),
			tk.Attempt, rowfmt.ToMs(tk.FirstAttemptAt), nullString(tk.LeaseOwner), rowfmt.ToMs(tk.LeaseExpiresAt), text(tk.Data))
		if err != nil {
			return wrap("TaskInsert", err)
		}
		if tk.ID, err = res.LastInsertId(); err != nil {
			return wrap("TaskInsert", err)
		}
	}
	return nil
}

// TaskDelete implements engine.Tx.
func (t *txn) TaskDelete(ctx context.Context, id int64, owner string) (bool, error) {
	ok, err := affected(t.exec(ctx, qTaskDelete, id, nullString(owner)))
	return ok, wrap("TaskDelete", err)
}

// TaskTake implements engine.Tx with RunLock, TaskDelete and ExecutionGet
// in turn (the transaction holds SQLite's single write lock already).
func (t *txn) TaskTake(ctx context.Context, runID string, taskID int64, owner, executionID string) (*engine.TakenTask, error) {
	out := &engine.TakenTask{}
	r, err := t.RunLock(ctx, runID)
	switch {
	case err == nil:
		out.Run = r
	case !errors.Is(err, engine.ErrNotFound):
		return nil, err
	}
	if out.Removed, err = t.TaskDelete(ctx, taskID, owner); err != nil {
		return nil, err
	}
	if executionID != "" {
		x, err := t.ExecutionGet(ctx, runID, executionID)
		switch {
		case err == nil:
			out.Execution = x
		case !errors.Is(err, engine.ErrNotFound):
			return nil, err
		}
	}
	return out, nil
}

// TaskTakeExpecting implements engine.TaskTakeExpecter. It removes the
// task at once and keeps the checks of the run and the execution for
// later (expectation): the transaction's first RunUpdate of the run and
// ExecutionUpdate of the execution, which applying a worker's answer
// makes anyway, make them in their WHERE; those left are made with a read
// before the transaction's next read (query) or when its function
// returns (runFn), so that the function never acts on rows read after a
// check that fails. A failed check returns
// engine.ErrUnexpected, from that update or from the Update, and the
// transaction is rolled back. Against TaskTake it saves reading the run
// and the execution into records the engine would decode again; against
// checking at once, two statements per answer.
func (t *txn) TaskTakeExpecting(ctx context.Context, run *engine.Run, taskID int64, owner string, x *engine.Execution) error {
	removed, err := t.TaskDelete(ctx, taskID, owner)
	if err != nil {
		return err
	}
	if !removed {
		return fmt.Errorf("sqlite: task %d: %w", taskID, engine.ErrUnexpected)
	}
	t.expectRun = &expectation{runID: run.RunID, status: string(run.Status), closedAt: rowfmt.ToMs(run.ClosedAt), data: text(run.Data)}
	t.expectExec = &expectation{runID: x.RunID, executionID: x.ExecutionID, status: string(x.Status), data: text(x.Data)}
	return nil
}

// checkExpected makes the checks of TaskTakeExpecting that no update made
// yet: before the transaction's next read, and when its function returns.
func (t *txn) checkExpected(ctx context.Context) error {
	if e := t.expectRun; e != nil {
		t.expectRun = nil
		var n int
		if err := t.stmt(ctx, qRunExpect).QueryRowContext(ctx, e.runID, e.status, e.closedAt, e.data).Scan(&n); err != nil || n != 1 {
			return expectFailed("TaskTakeExpecting", "run", e.runID, err)
		}
	}
	if e := t.expectExec; e != nil {
		t.expectExec = nil
		var n int
		if err := t.stmt(ctx, qExecExpect).QueryRowContext(ctx, e.runID, e.executionID, e.status, e.data).Scan(&n); err != nil || n != 1 {
			return expectFailed("TaskTakeExpecting", "execution", e.executionID, err)
		}
	}
	return nil
}

// expectFailed is the error of a check of TaskTakeExpecting: err when the
// statement failed, engine.ErrUnexpected when the row was not as expected.
func expectFailed(op, what, id string, err error) error {
	if err != nil {
		return wrap(op, err)
	}
	return fmt.Errorf("sqlite: %s %s: %w", what, id, engine.ErrUnexpected)
}

// TaskReschedule implements engine.Tx.
func (t *txn) TaskReschedule(ctx context.Context, tk *engine.Task, owner string) (bool, error) {
	ok, err := affected(t.exec(ctx, qTaskReschedule, rowfmt.ToMs(tk.DueAt), tk.Attempt, nullString(tk.LeaseOwner),
		rowfmt.ToMs(tk.LeaseExpiresAt), tk.ID, nullString(owner)))
	return ok, wrap("TaskReschedule", err)
}

// TaskDeleteByRun implements engine.Tx.
func (t *txn) TaskDeleteByRun(ctx context.Context, runID string, kinds ...engine.TaskKind) error {
	var err error
	if len(kinds) == 0 {
		_, err = t.exec(ctx, qTaskDeleteRun, runID)
	} else {
		var list string
		if list, err = jsonList(kinds); err == nil {
			_, err = t.exec(ctx, qTaskDeleteRunKinds, runID, list)
		}
	}
	return wrap("TaskDeleteByRun", err)
}

// TaskDeleteByExecution implements engine.Tx.
func (t *txn) TaskDeleteByExecution(ctx context.Context, runID, executionID string, kinds ...engine.TaskKind) error {
	var err error
	if len(kinds) == 0 {
		_, err = t.exec(ctx, qTaskDeleteExec, runID, executionID)
	} else {
		var list string
		if list, err = jsonList(kinds); err == nil {
			_, err = t.exec(ctx, qTaskDeleteExecKinds, runID, executionID, list)
		}
	}
	return wrap("TaskDeleteByExecution", err)
}

// ---------------------------------------------------------------------------
// history

// HistoryList implements engine.ReadTx.
func (t *txn) HistoryList(ctx context.Context, runID string, afterID int64, limit int) ([]*engine.HistoryEvent, error) {
	if limit <= 0 {
		limit = -1
	}
	rows, err := t.query(ctx, qHistList, runID, afterID, limit)
	if err != nil {
		return nil, wrap("HistoryList", err)
	}
	out, err := scanHistory(rows)
	return out, wrap("HistoryList", err)
}

// HistoryOutline implements engine.ReadTx.
func (t *txn) HistoryOutline(ctx context.Context, runID string, afterID int64, limit int, o engine.OutlineData) ([]*engine.HistoryEvent, error) {
	if limit <= 0 {
		limit = -1
	}
	types := "\x1f"
	for _, ty := range o.Types {
		if strings.IndexByte(ty, 0x1f) < 0 {
			types += ty + "\x1f"
		}
	}
	marked, marker := o.MarkedType, o.Marker
	if marked == "" || marker == "" {
		marked, marker = "", ""
	}
	rows, err := t.query(ctx, qHistOutline, runID, afterID, limit, types, marked, marker)
	if err != nil {
		return nil, wrap("HistoryOutline", err)
	}
	defer rows.Close()
	var out []*engine.HistoryEvent
	for rows.Next() {
		var (
			e  = engine.HistoryEvent{RunID: runID}
			at int64
		)
		if err := rows.Scan(&e.ID, &at, &e.Type, &e.ExecutionID, &e.Data); err != nil {
			return nil, wrap("HistoryOutline", err)
		}
		e.At = rowfmt.FromMs(at)
		out = append(out, &e)
	}
	return out, wrap("HistoryOutline", rows.Err())
}

// HistoryGet implements engine.ReadTx.
func (t *txn) HistoryGet(ctx context.Context, runID string, ids []int64) ([]*engine.HistoryEvent, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	list, err := jsonList(ids)
	if err != nil {
		return nil, wrap("HistoryGet", err)
	}
	rows, err := t.query(ctx, qHistGet, runID, list)
	if err != nil {
		return nil, wrap("HistoryGet", err)
	}
	out, err := scanHistory(rows)
	return out, wrap("HistoryGet", err)
}

// scanHistory reads history rows (histColumns) and closes rows.
func scanHistory(rows *sql.Rows) ([]*engine.HistoryEvent, error) {
	defer rows.Close()
	var out []*engine.HistoryEvent
	for rows.Next() {
		var (
			e  engine.HistoryEvent
			at int64
		)
		if err := rows.Scan(&e.ID, &e.RunID, &at, &e.Type, &e.ExecutionID, &e.Data); err != nil {
			return nil, err
		}
		e.At = rowfmt.FromMs(at)
		out = append(out, &e)
	}
	return out, rows.Err()
}

// HistoryAppend implements engine.Tx.
//
// The events go in statements of up to histInsertMax rows. The rows of one
// statement get consecutive ids, in the order of its VALUES: the table's
// ids are AUTOINCREMENT, each the one before plus one, and the writer
// holds the database while the statement runs; so the statement's last id
// gives every id.
func (t *txn) HistoryAppend(ctx context.Context, events []*engine.HistoryEvent) error {
	args := make([]any, 0, 5*min(len(events), histInsertMax))
	for len(events) > 0 {
		chunk := events[:min(len(events), histInsertMax)]
		events = events[len(chunk):]
		args = args[:0]
		for _, e := range chunk {
			args = append(args, e.RunID, rowfmt.ToMs(e.At), e.Type, e.ExecutionID, text(e.Data))
		}
		res, err := t.exec(ctx, qHistInsert[len(chunk)-1], args...)
		if err != nil {
			return wrap("HistoryAppend", err)
		}
		last, err := res.LastInsertId()
		if err != nil {
			return wrap("HistoryAppend", err)
		}
		for i, e := range chunk {
			e.ID = last - int64(len(chunk)-1-i)
		}
	}
	return nil
}

// histInsertMax is the most events one history statement appends.
const histInsertMax = 4

// histInserts returns the statements that append 1 to most events.
func histInserts(most int) []string {
	qs := make([]string, most)
	values := ""
	for n := range most {
		if n > 0 {
			values += ", "
		}
		values += "(?, ?, ?, ?, ?)"
		qs[n] = `INSERT INTO history (run_id, at, type, execution_id, data) VALUES ` + values
	}
	return qs
}
