package postgres

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/store/born"
	"github.com/iwf-server/iwf-server/internal/store/rowfmt"
	"github.com/iwf-server/iwf-server/search"
)

const (
	runColumns  = rowfmt.RunColumns
	execColumns = rowfmt.ExecutionColumns
	msgColumns  = `id, run_id, kind, channel, value, created_at`
	taskColumns = rowfmt.TaskColumns
	histColumns = `id, run_id, at, type, execution_id, data`
	saColumns   = `key, value_type, raw, string_value, int_value, double_value, bool_value, time_value`
)

// txn implements engine.Tx (and engine.ReadTx) on a pipelined transaction:
// reads and the writes whose outcome the caller needs run when called;
// the other writes are queued and travel with the next of those, or with
// COMMIT (see pipe).
type txn struct {
	tx *pipe
	// expectRun and expectExec are the checks of TaskTakeExpecting while
	// they wait, unsent, in the pipe's queue: the RunUpdate or
	// ExecutionUpdate of the same row replaces its check, in its place in
	// the queue, with an UPDATE that makes the check and the write in one
	// statement (see fold).
	expectRun, expectExec *queuedCheck
	// taskInserts counts the TaskInserts of the transaction, so that a
	// TaskDeleteByRun knows whether a task was queued for insertion since
	// the run's check (foldDeleteByRun).
	taskInserts int
	// born holds the rows this transaction inserted for the runs it
	// created, for ReadForCallAfterCommit (package born).
	born born.Rows
}

// queuedCheck is a check of TaskTakeExpecting queued in a pipe, which a
// later write of the same row may carry instead (fold).
type queuedCheck struct {
	// at is the check's index in the pipe's queue, valid while the pipe has
	// sent no queue since (sends).
	at    int
	sends int
	// op is the check statement's op, which the statement at at must have.
	op string
	// runID and executionID name the row checked ("" executionID: the run).
	runID, executionID string
	// The values the row must still hold: the run's status, closed_at and
	// data, or the execution's status and data.
	status   string
	closedAt int64
	data     []byte
	// taskID and owner name the task the run's check deletes, as
	// TaskTake's DELETE does; the fold keeps the delete.
	taskID int64
	owner  *string
	// deleteAll: the run's check deletes every task of the run, not only
	// the taken one (foldDeleteByRun); inserts is the transaction's
	// taskInserts when the check was queued.
	deleteAll bool
	inserts   int
}

var (
	_ engine.Tx               = (*txn)(nil)
	_ engine.CallPrefetcher   = (*txn)(nil)
	_ engine.TaskTakeExpecter = (*txn)(nil)
	_ engine.WorkflowCreator  = (*txn)(nil)
)

func notFound(err error) error { return rowfmt.NotFound(err, pgx.ErrNoRows) }

func wrap(op string, err error) error { return rowfmt.Wrap("postgres", op, err) }

// collect reads every row with scan.
func collect[T any](rows pgx.Rows, err error, scan func(pgx.Rows) (*T, error)) ([]*T, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// ---------------------------------------------------------------------------
// workflows

// WorkflowGetCurrentRun implements engine.ReadTx.
func (t *txn) WorkflowGetCurrentRun(ctx context.Context, workflowID string) (string, error) {
	var runID string
	err := notFound(t.tx.QueryRow(ctx, `SELECT current_run_id FROM workflows WHERE workflow_id = $1`, workflowID).Scan(&runID))
	if err == nil && runID == "" {
		err = engine.ErrNotFound
	}
	return runID, wrap("WorkflowGetCurrentRun", err)
}

// WorkflowLock implements engine.Tx. It first tries to create the row (the
// creator holds it until commit; a concurrent creator waits for that), and
// otherwise locks the existing row with SELECT ... FOR UPDATE.
func (t *txn) WorkflowLock(ctx context.Context, workflowID string) (string, error) {
	var runID string
	err := t.tx.QueryRow(ctx, `INSERT INTO workflows (workflow_id) VALUES ($1)
		ON CONFLICT (workflow_id) DO NOTHING RETURNING current_run_id`, workflowID).Scan(&runID)
	if errors.Is(err, pgx.ErrNoRows) {
		err = t.tx.QueryRow(ctx, `SELECT current_run_id FROM workflows WHERE workflow_id = $1 FOR UPDATE`, workflowID).Scan(&runID)
	}
	return runID, wrap("WorkflowLock", err)
}

// WorkflowLockOrCreate implements engine.Tx: a new workflow id costs one
// statement, the INSERT that creates its row pointing at runID.
func (t *txn) WorkflowLockOrCreate(ctx context.Context, workflowID, runID string) (string, bool, error) {
	var cur string
	err := t.tx.QueryRow(ctx, `INSERT INTO workflows (workflow_id, current_run_id) VALUES ($1, $2)
		ON CONFLICT (workflow_id) DO NOTHING RETURNING current_run_id`, workflowID, runID).Scan(&cur)
	if err == nil {
		return "", true, nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		err = t.tx.QueryRow(ctx, `SELECT current_run_id FROM workflows WHERE workflow_id = $1 FOR UPDATE`, workflowID).Scan(&cur)
	}
	return cur, false, wrap("WorkflowLockOrCreate", err)
}

// WorkflowCreateExpecting implements engine.WorkflowCreator: a plain
// INSERT, queued, which fails the transaction with a unique violation of
// workflows_pkey (engine.ErrUnexpected, see unexpected) when the id is
// taken, at the transaction's next statement or its commit. An insert
// racing another creator of the id waits for it, as WorkflowLockOrCreate
// does, and fails when that one commits. Without ON CONFLICT the insert
// is not speculative: one WAL record and a CTE fewer than the form that
// checks its count with iwf_expect.
func (t *txn) WorkflowCreateExpecting(ctx context.Context, workflowID, runID string) error {
	t.tx.touch(workflowID)
	t.tx.later("WorkflowCreateExpecting", `INSERT INTO workflows (workflow_id, current_run_id) VALUES ($1, $2)`,
		nil, workflowID, runID)
	return nil
}

// WorkflowSetCurrentRun implements engine.Tx; it creates the workflow row
// when absent.
func (t *txn) WorkflowSetCurrentRun(ctx context.Context, workflowID, runID string) error {
	t.tx.later("WorkflowSetCurrentRun", `INSERT INTO workflows (workflow_id, current_run_id) VALUES ($1, $2)
		ON CONFLICT (workflow_id) DO UPDATE SET current_run_id = EXCLUDED.current_run_id`, nil, workflowID, runID)
	return nil
}

// ---------------------------------------------------------------------------
// runs

func scanRun(row rowfmt.Scanner) (*engine.Run, error) {
	r, err := rowfmt.ScanRun(row)
	return r, notFound(err)
}

// RunGet implements engine.ReadTx.
func (t *txn) RunGet(ctx context.Context, runID string) (*engine.Run, error) {
	r, err := scanRun(t.tx.QueryRow(ctx, `SELECT `+runColumns+` FROM runs WHERE run_id = $1`, runID))
	return r, wrap("RunGet", err)
}

// RunLock implements engine.Tx with SELECT ... FOR UPDATE.
func (t *txn) RunLock(ctx context.Context, runID string) (*engine.Run, error) {
	r, err := scanRun(t.tx.QueryRow(ctx, `SELECT `+runColumns+` FROM runs WHERE run_id = $1 FOR UPDATE`, runID))
	return r, wrap("RunLock", err)
}

// RunInsert implements engine.Tx.
func (t *txn) RunInsert(ctx context.Context, r *engine.Run) error {
	t.born.Run(r)
	t.tx.later("RunInsert", `INSERT INTO runs (`+runColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7)`, nil,
		r.RunID, r.WorkflowID, r.WorkflowType, string(r.Status), rowfmt.ToMs(r.StartedAt), rowfmt.ToMs(r.ClosedAt), r.Data)
	return nil
}

// RunUpdate implements engine.Tx. The write is queued: when the run does
// not exist, the transaction fails with engine.ErrNotFound at its next
// read or its commit (iwf_found, checked in the database). The first
// RunUpdate of the run checked by a TaskTakeExpecting whose check is still
// queued takes the check's place instead (fold).
func (t *txn) RunUpdate(ctx context.Context, r *engine.Run) error {
	t.born.Change(r.RunID)
	t.tx.touch(r.RunID)
	if c := t.fold(&t.expectRun, r.RunID, ""); c != nil {
		sql := sqlRunUpdateExpecting
		if c.deleteAll {
			sql = sqlRunUpdateExpectingDeleteAll
		}
		t.tx.queued[c.at] = queuedStmt{op: "RunUpdate (expecting)", sql: sql,
			args: []any{string(r.Status), rowfmt.ToMs(r.ClosedAt), r.Data, r.RunID, c.status, c.closedAt, c.data, c.taskID, c.owner}}
		return nil
	}
	t.tx.later("RunUpdate", `WITH u AS (
		UPDATE runs SET status = $1, closed_at = $2, data = $3 WHERE run_id = $4 RETURNING 1)
		SELECT CASE WHEN (SELECT count(*) FROM u) = 1 THEN true ELSE iwf_found(false, 'run') END`, nil,
		string(r.Status), rowfmt.ToMs(r.ClosedAt), r.Data, r.RunID)
	return nil
}

// ---------------------------------------------------------------------------
// executions

func scanExecution(row rowfmt.Scanner) (*engine.Execution, error) {
	x, err := rowfmt.ScanExecution(row)
	return x, notFound(err)
}

func statusStrings(statuses []engine.ExecutionStatus) []string {
	out := make([]string, len(statuses))
	for i, s := range statuses {
		out[i] = string(s)
	}
	return out
}

func kindStrings(kinds []engine.TaskKind) []string {
	out := make([]string, len(kinds))
	for i, k := range kinds {
		out[i] = string(k)
	}
	return out
}

// ExecutionGet implements engine.ReadTx.
func (t *txn) ExecutionGet(ctx context.Context, runID, executionID string) (*engine.Execution, error) {
	e, err := scanExecution(t.tx.QueryRow(ctx, `SELECT `+execColumns+` FROM executions WHERE run_id = $1 AND execution_id = $2`, runID, executionID))
	return e, wrap("ExecutionGet", err)
}

// ExecutionList implements engine.ReadTx.
func (t *txn) ExecutionList(ctx context.Context, runID string, statuses ...engine.ExecutionStatus) ([]*engine.Execution, error) {
	var (
		rows pgx.Rows
		err  error
	)
	if len(statuses) == 0 {
		rows, err = t.tx.Query(ctx, `SELECT `+execColumns+` FROM executions WHERE run_id = $1 ORDER BY id`, runID)
	} else {
		rows, err = t.tx.Query(ctx, `SELECT `+execColumns+` FROM executions WHERE run_id = $1 AND status = ANY($2) ORDER BY id`,
			runID, statusStrings(statuses))
	}
	out, err := collect(rows, err, func(r pgx.Rows) (*engine.Execution, error) { return scanExecution(r) })
	return out, wrap("ExecutionList", err)
}

// ExecutionInsert implements engine.Tx with one multi-row INSERT.
func (t *txn) ExecutionInsert(ctx context.Context, executions []*engine.Execution) error {
	if len(executions) == 0 {
		return nil
	}
	t.born.Executions(executions)
	n := len(executions)
	if n <= valuesMaxRows {
		args := make([]any, 0, 6*n)
		for _, e := range executions {
			args = append(args, e.RunID, e.ExecutionID, e.StateID, string(e.Status), rowfmt.ToMs(e.CreatedAt), e.Data)
		}
		t.tx.later("ExecutionInsert", sqlExecutionInsertValues[n-1], nil, args...)
		return nil
	}
	var (
		runIDs, execIDs, stateIDs, statuses = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		created                             = make([]int64, n)
		data                                = make([][]byte, n)
	)
	for i, e := range executions {
		runIDs[i], execIDs[i], stateIDs[i], statuses[i] = e.RunID, e.ExecutionID, e.StateID, string(e.Status)
		created[i], data[i] = rowfmt.ToMs(e.CreatedAt), e.Data
	}
	t.tx.later("ExecutionInsert", `INSERT INTO executions (`+execColumns+`)
		SELECT r, e, s, st, c, d
		FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[], $6::bytea[]) WITH ORDINALITY AS u(r, e, s, st, c, d, o)
		ORDER BY o`, nil, runIDs, execIDs, stateIDs, statuses, created, data)
	return nil
}

// ExecutionUpdate implements engine.Tx. The write is queued: when the
// execution does not exist, the transaction fails with engine.ErrNotFound
// at its next read or its commit (iwf_found, checked in the database). The
// first ExecutionUpdate of the execution checked by a TaskTakeExpecting
// whose check is still queued takes the check's place instead (fold).
func (t *txn) ExecutionUpdate(ctx context.Context, e *engine.Execution) error {
	t.born.Change(e.RunID)
	t.tx.touch(e.RunID)
	if c := t.fold(&t.expectExec, e.RunID, e.ExecutionID); c != nil {
		t.tx.queued[c.at] = queuedStmt{op: "ExecutionUpdate (expecting)", sql: sqlExecutionUpdateExpecting,
			args: []any{string(e.Status), e.Data, e.RunID, e.ExecutionID, c.status, c.data}}
		return nil
	}
	t.tx.later("ExecutionUpdate", `WITH u AS (
		UPDATE executions SET status = $1, data = $2 WHERE run_id = $3 AND execution_id = $4 RETURNING 1)
		SELECT CASE WHEN (SELECT count(*) FROM u) = 1 THEN true ELSE iwf_found(false, 'execution') END`, nil,
		string(e.Status), e.Data, e.RunID, e.ExecutionID)
	return nil
}

// ---------------------------------------------------------------------------
// messages

// MessagePeek implements engine.ReadTx.
func (t *txn) MessagePeek(ctx context.Context, runID string, kind engine.ChannelKind, channel string, limit int) ([]*engine.Message, error) {
	var lim *int64
	if limit > 0 {
		l := int64(limit)
		lim = &l
	}
	rows, err := t.tx.Query(ctx, `SELECT `+msgColumns+` FROM messages
		WHERE run_id = $1 AND kind = $2 AND channel = $3 ORDER BY id LIMIT $4`, runID, int32(kind), channel, lim)
	out, err := collect(rows, err, func(r pgx.Rows) (*engine.Message, error) {
		var (
			m         engine.Message
			kind      int32
			createdAt int64
		)
		if err := r.Scan(&m.ID, &m.RunID, &kind, &m.Channel, &m.Value, &createdAt); err != nil {
			return nil, err
		}
		m.Kind, m.CreatedAt = engine.ChannelKind(kind), rowfmt.FromMs(createdAt)
		return &m, nil
	})
	return out, wrap("MessagePeek", err)
}

// MessageCounts implements engine.ReadTx.
func (t *txn) MessageCounts(ctx context.Context, runID string, kind engine.ChannelKind) (map[string]int, error) {
	rows, err := t.tx.Query(ctx, `SELECT channel, count(*) FROM messages WHERE run_id = $1 AND kind = $2 GROUP BY channel`,
		runID, int32(kind))
	if err != nil {
		return nil, wrap("MessageCounts", err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var (
			ch string
			n  int64
		)
		if err := rows.Scan(&ch, &n); err != nil {
			return nil, wrap("MessageCounts", err)
		}
		out[ch] = int(n)
	}
	return out, wrap("MessageCounts", rows.Err())
}

// MessageAppend implements engine.Tx with one multi-row INSERT.
func (t *txn) MessageAppend(ctx context.Context, messages []*engine.Message) error {
	if len(messages) == 0 {
		return nil
	}
	n := len(messages)
	var (
		runIDs, channels = make([]string, n), make([]string, n)
		kinds            = make([]int32, n)
		values           = make([][]byte, n)
		created          = make([]int64, n)
	)
	for i, m := range messages {
		runIDs[i], kinds[i], channels[i], values[i], created[i] = m.RunID, int32(m.Kind), m.Channel, m.Value, rowfmt.ToMs(m.CreatedAt)
	}
	t.tx.laterRows("MessageAppend", `INSERT INTO messages (run_id, kind, channel, value, created_at)
		SELECT r, k, c, v, t
		FROM unnest($1::text[], $2::int[], $3::text[], $4::bytea[], $5::bigint[]) WITH ORDINALITY AS u(r, k, c, v, t, o)
		ORDER BY o
		RETURNING id`, readIDs(n, func(ids []int64) {
		for i, m := range messages {
			m.ID = ids[i]
		}
	}), runIDs, kinds, channels, values, created)
	return nil
}

// MessageDelete implements engine.Tx.
func (t *txn) MessageDelete(ctx context.Context, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	t.tx.later("MessageDelete", `DELETE FROM messages WHERE id = ANY($1)`, nil, ids)
	return nil
}

// ---------------------------------------------------------------------------
// attributes

// DataAttributeGet implements engine.ReadTx.
func (t *txn) DataAttributeGet(ctx context.Context, runID string, keys []string) ([]*engine.Attribute, error) {
	var (
		rows pgx.Rows
		err  error
	)
	switch {
	case keys == nil:
		rows, err = t.tx.Query(ctx, `SELECT key, value FROM data_attributes WHERE run_id = $1 ORDER BY key`, runID)
	case len(keys) == 0:
		return nil, nil
	default:
		rows, err = t.tx.Query(ctx, `SELECT key, value FROM data_attributes WHERE run_id = $1 AND key = ANY($2) ORDER BY key`, runID, keys)
	}
	out, err := collect(rows, err, func(r pgx.Rows) (*engine.Attribute, error) {
		var a engine.Attribute
		return &a, r.Scan(&a.Key, &a.Value)
	})
	return out, wrap("DataAttributeGet", err)
}

// lastByKey drops all but the last occurrence of every key, keeping order:
// one INSERT ... ON CONFLICT DO UPDATE may not touch a row twice.
func lastByKey[T any](items []T, key func(T) string) []T {
	seen := make(map[string]int, len(items))
	for i, it := range items {
		seen[key(it)] = i
	}
	if len(seen) == len(items) {
		return items
	}
	out := make([]T, 0, len(seen))
	for i, it := range items {
		if seen[key(it)] == i {
			out = append(out, it)
		}
	}
	return out
}

// DataAttributeUpsert implements engine.Tx with one multi-row upsert. A key
// given twice takes its last value.
func (t *txn) DataAttributeUpsert(ctx context.Context, runID string, attrs []*engine.Attribute) error {
	attrs = lastByKey(attrs, func(a *engine.Attribute) string { return a.Key })
	t.born.DataAttributes(runID, attrs)
	if len(attrs) == 0 {
		return nil
	}
	keys, values := make([]string, len(attrs)), make([][]byte, len(attrs))
	for i, a := range attrs {
		keys[i], values[i] = a.Key, a.Value
	}
	t.tx.later("DataAttributeUpsert", `INSERT INTO data_attributes (run_id, key, value)
		SELECT $1, k, v FROM unnest($2::text[], $3::bytea[]) AS u(k, v)
		ON CONFLICT (run_id, key) DO UPDATE SET value = EXCLUDED.value`, nil, runID, keys, values)
	return nil
}

// SearchAttributeGet implements engine.ReadTx.
func (t *txn) SearchAttributeGet(ctx context.Context, runID string, keys []string) ([]*engine.SearchAttribute, error) {
	var (
		rows pgx.Rows
		err  error
	)
	switch {
	case keys == nil:
		rows, err = t.tx.Query(ctx, `SELECT `+saColumns+` FROM search_attributes WHERE run_id = $1 ORDER BY key`, runID)
	case len(keys) == 0:
		return nil, nil
	default:
		rows, err = t.tx.Query(ctx, `SELECT `+saColumns+` FROM search_attributes WHERE run_id = $1 AND key = ANY($2) ORDER BY key`, runID, keys)
	}
	out, err := collect(rows, err, scanSearchAttribute)
	if err != nil {
		return nil, wrap("SearchAttributeGet", err)
	}
	arrays := keywordArrays(out)
	if len(arrays) == 0 {
		return out, nil
	}
	arrayKeys := make([]string, 0, len(arrays))
	for k := range arrays {
		arrayKeys = append(arrayKeys, k)
	}
	rows, err = t.tx.Query(ctx, `SELECT key, value FROM search_attribute_strings
		WHERE run_id = $1 AND key = ANY($2) ORDER BY key, pos`, runID, arrayKeys)
	if err := fillKeywordArrays(rows, err, arrays); err != nil {
		return nil, wrap("SearchAttributeGet", err)
	}
	return out, nil
}

// scanSearchAttribute reads a row of search_attributes (saColumns).
func scanSearchAttribute(r pgx.Rows) (*engine.SearchAttribute, error) {
	var (
		a  engine.SearchAttribute
		tm *int64
	)
	if err := r.Scan(&a.Key, &a.ValueType, &a.Raw, &a.String, &a.Int, &a.Double, &a.Bool, &tm); err != nil {
		return nil, err
	}
	if tm != nil {
		v := rowfmt.FromNs(*tm)
		a.Time = &v
	}
	return &a, nil
}

// keywordArrays gives the KEYWORD_ARRAY attributes of attrs an empty
// element list and returns them by key, for fillKeywordArrays.
func keywordArrays(attrs []*engine.SearchAttribute) map[string]*engine.SearchAttribute {
	var arrays map[string]*engine.SearchAttribute
	for _, a := range attrs {
		if a.ValueType == search.KeywordArray {
			a.Strings = []string{}
			if arrays == nil {
				arrays = map[string]*engine.SearchAttribute{}
			}
			arrays[a.Key] = a
		}
	}
	return arrays
}

// fillKeywordArrays appends the element rows (key, value, in position
// order) of search_attribute_strings to their attributes in arrays; rows of
// other keys are skipped.
func fillKeywordArrays(rows pgx.Rows, err error, arrays map[string]*engine.SearchAttribute) error {
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var key, value string
		if err := rows.Scan(&key, &value); err != nil {
			return err
		}
		if a := arrays[key]; a != nil {
			a.Strings = append(a.Strings, value)
		}
	}
	return rows.Err()
}

// SearchAttributeUpsert implements engine.Tx: one upsert of the attributes,
// then the KEYWORD_ARRAY elements of the given keys are replaced, all sent
// in one round trip. A key given twice takes its last value.
func (t *txn) SearchAttributeUpsert(ctx context.Context, runID string, attrs []*engine.SearchAttribute) error {
	attrs = lastByKey(attrs, func(a *engine.SearchAttribute) string { return a.Key })
	t.born.SearchAttributes(runID, attrs)
	if len(attrs) == 0 {
		return nil
	}
	n := len(attrs)
	var (
		keys, types = make([]string, n), make([]string, n)
		raws        = make([][]byte, n)
		strs        = make([]*string, n)
		ints        = make([]*int64, n)
		doubles     = make([]*float64, n)
		bools       = make([]*bool, n)
		times       = make([]*int64, n)

		elemKeys   []string
		elemPos    []int32
		elemValues []string
	)
	for i, a := range attrs {
		keys[i], types[i], raws[i] = a.Key, string(a.ValueType), a.Raw
		strs[i], ints[i], doubles[i], bools[i] = a.String, a.Int, a.Double, a.Bool
		if a.Time != nil {
			v := rowfmt.ToNs(*a.Time)
			times[i] = &v
		}
		for j, v := range rowfmt.KeywordElements(a) {
			elemKeys, elemPos, elemValues = append(elemKeys, a.Key), append(elemPos, int32(j)), append(elemValues, v)
		}
	}
	t.tx.later("SearchAttributeUpsert", `INSERT INTO search_attributes (run_id, `+saColumns+`)
		SELECT $1, k, vt, r, s, i, d, b, t
		FROM unnest($2::text[], $3::text[], $4::bytea[], $5::text[], $6::bigint[], $7::float8[], $8::bool[], $9::bigint[])
			AS u(k, vt, r, s, i, d, b, t)
		ON CONFLICT (run_id, key) DO UPDATE SET value_type = EXCLUDED.value_type, raw = EXCLUDED.raw,
			string_value = EXCLUDED.string_value, int_value = EXCLUDED.int_value, double_value = EXCLUDED.double_value,
			bool_value = EXCLUDED.bool_value, time_value = EXCLUDED.time_value`, nil,
		runID, keys, types, raws, strs, ints, doubles, bools, times)
	t.tx.later("SearchAttributeUpsert", `DELETE FROM search_attribute_strings WHERE run_id = $1 AND key = ANY($2)`, nil, runID, keys)
	if len(elemKeys) > 0 {
		t.tx.later("SearchAttributeUpsert", `INSERT INTO search_attribute_strings (run_id, key, pos, value)
			SELECT $1, k, p, v FROM unnest($2::text[], $3::int[], $4::text[]) AS u(k, p, v)`, nil,
			runID, elemKeys, elemPos, elemValues)
	}
	return nil
}

// ---------------------------------------------------------------------------
// tasks

func scanTasks(rows pgx.Rows) ([]*engine.Task, error) {
	return collect(rows, nil, scanTask)
}

// TaskList implements engine.ReadTx.
func (t *txn) TaskList(ctx context.Context, runID string) ([]*engine.Task, error) {
	rows, err := t.tx.Query(ctx, `SELECT `+taskColumns+` FROM tasks WHERE run_id = $1 ORDER BY due_at, id`, runID)
	out, err := collect(rows, err, scanTask)
	return out, wrap("TaskList", err)
}

// TaskInsert implements engine.Tx with one multi-row INSERT. A task may be
// inserted leased.
func (t *txn) TaskInsert(ctx context.Context, tasks []*engine.Task) error {
	if len(tasks) == 0 {
		return nil
	}
	t.taskInserts++
	n := len(tasks)
	setIDs := readIDs(n, func(ids []int64) {
		for i, tk := range tasks {
			tk.ID = ids[i]
		}
	})
	if n <= valuesMaxRows {
		args := make([]any, 0, 10*n)
		for _, tk := range tasks {
			args = append(args, tk.RunID, tk.WorkflowID, tk.ExecutionID, string(tk.Kind), rowfmt.ToMs(tk.DueAt), int32(tk.Attempt),
				rowfmt.ToMs(tk.FirstAttemptAt), nullString(tk.LeaseOwner), rowfmt.ToMs(tk.LeaseExpiresAt), tk.Data)
		}
		t.tx.laterRows("TaskInsert", sqlTaskInsertValues[n-1], setIDs, args...)
		return nil
	}
	var (
		runIDs, wfIDs, execIDs, kinds = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		due, first, expiry            = make([]int64, n), make([]int64, n), make([]int64, n)
		attempts                      = make([]int32, n)
		owners                        = make([]*string, n)
		data                          = make([][]byte, n)
	)
	for i, tk := range tasks {
		runIDs[i], wfIDs[i], execIDs[i], kinds[i] = tk.RunID, tk.WorkflowID, tk.ExecutionID, string(tk.Kind)
		due[i], first[i], expiry[i] = rowfmt.ToMs(tk.DueAt), rowfmt.ToMs(tk.FirstAttemptAt), rowfmt.ToMs(tk.LeaseExpiresAt)
		attempts[i], owners[i], data[i] = int32(tk.Attempt), nullString(tk.LeaseOwner), tk.Data
	}
	t.tx.laterRows("TaskInsert", `INSERT INTO tasks (run_id, workflow_id, execution_id, kind, due_at, attempt,
			first_attempt_at, lease_owner, lease_expires_at, data)
		SELECT r, w, e, k, du, a, f, lo, le, d
		FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[], $6::int[], $7::bigint[], $8::text[],
			$9::bigint[], $10::bytea[]) WITH ORDINALITY AS u(r, w, e, k, du, a, f, lo, le, d, o)
		ORDER BY o
		RETURNING id`, setIDs, runIDs, wfIDs, execIDs, kinds, due, attempts, first, owners, expiry, data)
	return nil
}

// TaskDelete implements engine.Tx.
func (t *txn) TaskDelete(ctx context.Context, id int64, owner string) (bool, error) {
	tag, err := t.tx.Exec(ctx, `DELETE FROM tasks WHERE id = $1 AND lease_owner IS NOT DISTINCT FROM $2::text`, id, nullString(owner))
	return tag.RowsAffected() > 0, wrap("TaskDelete", err)
}

// ReadForCallAfterCommit implements engine.CallPrefetcher: callReadSQL
// travels behind the COMMIT, in its round trip. For the first call of a
// run this transaction created, the transaction may know the answer
// already (package born, see knowReads): it is then handed over after the
// commit, unread.
func (t *txn) ReadForCallAfterCommit(runID, executionID string, done func(*engine.CallRead)) {
	t.tx.afterCommit = append(t.tx.afterCommit, afterCommitRead{runID: runID, executionID: executionID, done: done})
}

// knowReads answers from the rows born the reads queued behind the COMMIT
// that they answer, once the transaction's function returned: a write
// made after a read was asked for counts.
func (t *txn) knowReads() {
	for i := range t.tx.afterCommit {
		a := &t.tx.afterCommit[i]
		a.known = t.born.Read(a.runID, a.executionID)
	}
}

// TaskTake implements engine.Tx: the run lock and the task's DELETE are
// queued and travel with the read of the execution (or, without one, the
// DELETE is the statement they travel with), so the three take one round
// trip. PostgreSQL runs them in that order: the execution is read under
// the run's lock.
func (t *txn) TaskTake(ctx context.Context, runID string, taskID int64, owner, executionID string) (*engine.TakenTask, error) {
	out := &engine.TakenTask{}
	t.tx.laterRows("TaskTake (run lock)", `SELECT `+runColumns+` FROM runs WHERE run_id = $1 FOR UPDATE`, func(rows pgx.Rows) error {
		defer rows.Close()
		if !rows.Next() {
			return rows.Err()
		}
		r, err := rowfmt.ScanRun(rows)
		out.Run = r
		return err
	}, runID)
	const del = `DELETE FROM tasks WHERE id = $1 AND lease_owner IS NOT DISTINCT FROM $2::text`
	if executionID == "" {
		tag, err := t.tx.Exec(ctx, del, taskID, nullString(owner))
		out.Removed = tag.RowsAffected() > 0
		return out, wrap("TaskTake", err)
	}
	t.tx.later("TaskTake (task delete)", del, func(tag pgconn.CommandTag) error {
		out.Removed = tag.RowsAffected() > 0
		return nil
	}, taskID, nullString(owner))
	x, err := scanExecution(t.tx.QueryRow(ctx, `SELECT `+execColumns+` FROM executions WHERE run_id = $1 AND execution_id = $2`, runID, executionID))
	if errors.Is(err, engine.ErrNotFound) {
		err = nil
	}
	out.Execution = x
	return out, wrap("TaskTake", err)
}

// TaskTakeExpecting implements engine.TaskTakeExpecter: the statements of
// TaskTake, each turned into a check that fails the transaction (SQLSTATE
// IW001, see iwf_expect) unless it finds what the caller expects, are
// queued and travel with the next statement sent. They run in TaskTake's
// order and each takes its own snapshot, so the task and the execution are
// checked under the run's lock, as TaskTake reads them. The expected values
// are copied: the caller goes on to change run and x.
//
// The run's check locks the run (FOR UPDATE) and, in the same statement,
// deletes the task: the delete reads the locked row, so it runs after the
// lock, and finding the task re-leased or gone since the statement's
// snapshot, it re-checks the newest row (as any DELETE in READ COMMITTED
// does) and deletes nothing. The RunUpdate that follows the check in the
// transaction takes its place while it is still queued:
// an UPDATE whose WHERE is the check, then made at the same point of the
// transaction, and which takes the run's row lock there as the check did
// (sqlRunUpdateExpecting). The execution's check is folded likewise into
// the execution's ExecutionUpdate (sqlExecutionUpdateExpecting). An UPDATE
// in READ COMMITTED that finds its row changed by a transaction that
// committed after its snapshot evaluates its WHERE again on the row as it
// now is, so the folded check is made on the newest committed row, as the
// locking read made it for the run, and at least as strictly as the plain
// read for the execution (which the row lock now also covers). A folded
// check that fails affects no row and raises IW001, the check's error
// (engine.ErrUnexpected), before the write could have; the transaction is
// then rolled back whole, as before.
func (t *txn) TaskTakeExpecting(ctx context.Context, run *engine.Run, taskID int64, owner string, x *engine.Execution) error {
	t.tx.touch(run.RunID)
	t.expectRun = t.queueCheck(queuedCheck{op: "TaskTakeExpecting (run, task)", runID: run.RunID, status: string(run.Status),
		closedAt: rowfmt.ToMs(run.ClosedAt), data: bytes.Clone(run.Data), taskID: taskID, owner: nullString(owner),
		inserts: t.taskInserts})
	t.tx.later(t.expectRun.op, sqlRunCheck,
		nil, run.RunID, t.expectRun.status, t.expectRun.closedAt, t.expectRun.data, taskID, t.expectRun.owner)
	t.expectExec = t.queueCheck(queuedCheck{op: "TaskTakeExpecting (execution)", runID: x.RunID, executionID: x.ExecutionID, status: string(x.Status),
		data: bytes.Clone(x.Data)})
	t.tx.later(t.expectExec.op, `SELECT CASE WHEN count(*) = 1 THEN true ELSE iwf_expect(false, 'execution') END FROM executions
		WHERE run_id = $1 AND execution_id = $2 AND status = $3 AND data IS NOT DISTINCT FROM $4`,
		nil, x.RunID, x.ExecutionID, t.expectExec.status, t.expectExec.data)
	return nil
}

// The checks below call iwf_expect (and RunUpdate's and ExecutionUpdate's
// iwf_found) only when they fail: CASE WHEN <ok> THEN true ELSE
// iwf_expect(false, <what>) END. Each call of a PL/pgSQL function sets up
// its interpreter in the backend (pgbench, one client, a SELECT of two
// checks that hold: 10,584 statements/s with the calls, 12,470 with the
// CASE, medians of three); a CASE evaluates only the branch it takes, and
// the functions are VOLATILE, so the planner never evaluates them ahead.

// sqlRunCheck is the run's check of TaskTakeExpecting with the task's
// delete: $1 the run, $2..$4 the status, closed_at and data it must still
// hold, $5 and $6 the task and its lease owner.
const sqlRunCheck = `WITH r AS (
		SELECT 1 FROM runs WHERE run_id = $1 AND status = $2 AND closed_at = $3 AND data IS NOT DISTINCT FROM $4 FOR UPDATE),
		d AS (DELETE FROM tasks WHERE id = $5 AND lease_owner IS NOT DISTINCT FROM $6::text AND EXISTS (SELECT 1 FROM r) RETURNING 1)
		SELECT CASE WHEN (SELECT count(*) FROM r) = 1 THEN true ELSE iwf_expect(false, 'run') END,
			CASE WHEN (SELECT count(*) FROM d) = 1 THEN true ELSE iwf_expect(false, 'task') END`

// sqlRunCheckDeleteAll is sqlRunCheck that deletes every task of the run
// (foldDeleteByRun); the taken one must be among them, still leased by
// the owner.
const sqlRunCheckDeleteAll = `WITH r AS (
		SELECT 1 FROM runs WHERE run_id = $1 AND status = $2 AND closed_at = $3 AND data IS NOT DISTINCT FROM $4 FOR UPDATE),
		d AS (DELETE FROM tasks WHERE run_id = $1 AND EXISTS (SELECT 1 FROM r) RETURNING id, lease_owner)
		SELECT CASE WHEN (SELECT count(*) FROM r) = 1 THEN true ELSE iwf_expect(false, 'run') END,
			CASE WHEN (SELECT count(*) FROM d WHERE id = $5 AND lease_owner IS NOT DISTINCT FROM $6::text) = 1 THEN true
				ELSE iwf_expect(false, 'task') END`

// sqlRunUpdateExpecting is RunUpdate folded with the run's check of
// TaskTakeExpecting and the task's delete that travels with it: $1..$4 as
// RunUpdate's, $5..$7 the status, closed_at and data the run must still
// hold, $8 and $9 the task and its lease owner. No row updated is the
// failed check. The delete waits for the update (it reads u), so the run's
// row lock is taken before the task's, as in TaskTake.
const sqlRunUpdateExpecting = `WITH u AS (
		UPDATE runs SET status = $1, closed_at = $2, data = $3
		WHERE run_id = $4 AND status = $5 AND closed_at = $6 AND data IS NOT DISTINCT FROM $7 RETURNING 1),
		d AS (DELETE FROM tasks WHERE id = $8 AND lease_owner IS NOT DISTINCT FROM $9::text AND EXISTS (SELECT 1 FROM u) RETURNING 1)
		SELECT CASE WHEN (SELECT count(*) FROM u) = 1 THEN true ELSE iwf_expect(false, 'run') END,
			CASE WHEN (SELECT count(*) FROM d) = 1 THEN true ELSE iwf_expect(false, 'task') END`

// sqlRunUpdateExpectingDeleteAll is sqlRunUpdateExpecting folded with a
// TaskDeleteByRun of the run as well (foldDeleteByRun): it deletes every
// task of the run, among which the taken one must be, still leased by
// the owner.
const sqlRunUpdateExpectingDeleteAll = `WITH u AS (
		UPDATE runs SET status = $1, closed_at = $2, data = $3
		WHERE run_id = $4 AND status = $5 AND closed_at = $6 AND data IS NOT DISTINCT FROM $7 RETURNING 1),
		d AS (DELETE FROM tasks WHERE run_id = $4 AND EXISTS (SELECT 1 FROM u) RETURNING id, lease_owner)
		SELECT CASE WHEN (SELECT count(*) FROM u) = 1 THEN true ELSE iwf_expect(false, 'run') END,
			CASE WHEN (SELECT count(*) FROM d WHERE id = $8 AND lease_owner IS NOT DISTINCT FROM $9::text) = 1 THEN true
				ELSE iwf_expect(false, 'task') END`

// sqlExecutionUpdateExpecting is ExecutionUpdate folded with the
// execution's check of TaskTakeExpecting: $1..$4 as ExecutionUpdate's, $5
// and $6 the status and data the execution must still hold. No row
// updated is the failed check.
const sqlExecutionUpdateExpecting = `WITH u AS (
		UPDATE executions SET status = $1, data = $2
		WHERE run_id = $3 AND execution_id = $4 AND status = $5 AND data IS NOT DISTINCT FROM $6 RETURNING 1)
		SELECT CASE WHEN (SELECT count(*) FROM u) = 1 THEN true ELSE iwf_expect(false, 'execution') END`

// queueCheck returns c placed at the next index of the pipe's queue, where
// the caller queues the check's statement next.
func (t *txn) queueCheck(c queuedCheck) *queuedCheck {
	c.at, c.sends = len(t.tx.queued), t.tx.sends
	return &c
}

// fold returns the check *slot when it is of the row runID, executionID
// ("": the run) and still waits in the pipe's queue, and clears *slot:
// the caller's write then replaces the check's statement, at its index.
// Otherwise it returns nil, and clears *slot when the check went out: the
// write is queued as usual, behind the check.
func (t *txn) fold(slot **queuedCheck, runID, executionID string) *queuedCheck {
	c := *slot
	if c == nil {
		return nil
	}
	if !t.waiting(c) {
		*slot = nil
		return nil
	}
	if c.runID != runID || c.executionID != executionID {
		return nil
	}
	*slot = nil
	return c
}

// waiting reports whether the check c still waits, unsent, at its index
// of the pipe's queue.
func (t *txn) waiting(c *queuedCheck) bool {
	return c.sends == t.tx.sends && c.at < len(t.tx.queued) && t.tx.queued[c.at].op == c.op
}

// foldDeleteByRun folds a TaskDeleteByRun of every kind into the run's
// check of TaskTakeExpecting, when that check is of runID and still waits
// in the pipe's queue, unfolded, and no task was queued for insertion
// since it (which the delete, made earlier, would miss): the check's
// statement then deletes every task of the run instead of the taken one,
// one statement fewer for a run's close. The delete moves to the check's
// place in the transaction; it takes the run's tasks' row locks after the
// run's, as the separate delete did.
func (t *txn) foldDeleteByRun(runID string) bool {
	c := t.expectRun
	if c == nil || c.runID != runID || c.deleteAll || c.inserts != t.taskInserts || !t.waiting(c) {
		return false
	}
	c.deleteAll = true
	q := &t.tx.queued[c.at]
	q.sql = sqlRunCheckDeleteAll
	return true
}

// TaskReschedule implements engine.Tx.
func (t *txn) TaskReschedule(ctx context.Context, tk *engine.Task, owner string) (bool, error) {
	tag, err := t.tx.Exec(ctx, `UPDATE tasks SET due_at = $1, attempt = $2, lease_owner = $3, lease_expires_at = $4
		WHERE id = $5 AND lease_owner IS NOT DISTINCT FROM $6::text`,
		rowfmt.ToMs(tk.DueAt), int32(tk.Attempt), nullString(tk.LeaseOwner), rowfmt.ToMs(tk.LeaseExpiresAt), tk.ID, nullString(owner))
	return tag.RowsAffected() > 0, wrap("TaskReschedule", err)
}

// TaskDeleteByRun implements engine.Tx.
func (t *txn) TaskDeleteByRun(ctx context.Context, runID string, kinds ...engine.TaskKind) error {
	if len(kinds) == 0 {
		if t.foldDeleteByRun(runID) {
			return nil
		}
		t.tx.later("TaskDeleteByRun", `DELETE FROM tasks WHERE run_id = $1`, nil, runID)
	} else {
		t.tx.later("TaskDeleteByRun", `DELETE FROM tasks WHERE run_id = $1 AND kind = ANY($2)`, nil, runID, kindStrings(kinds))
	}
	return nil
}

// TaskDeleteByExecution implements engine.Tx.
func (t *txn) TaskDeleteByExecution(ctx context.Context, runID, executionID string, kinds ...engine.TaskKind) error {
	if len(kinds) == 0 {
		t.tx.later("TaskDeleteByExecution", `DELETE FROM tasks WHERE run_id = $1 AND execution_id = $2`, nil, runID, executionID)
	} else {
		t.tx.later("TaskDeleteByExecution", `DELETE FROM tasks WHERE run_id = $1 AND execution_id = $2 AND kind = ANY($3)`, nil,
			runID, executionID, kindStrings(kinds))
	}
	return nil
}

// ---------------------------------------------------------------------------
// history

// HistoryList implements engine.ReadTx.
func (t *txn) HistoryList(ctx context.Context, runID string, afterID int64, limit int) ([]*engine.HistoryEvent, error) {
	var lim *int64
	if limit > 0 {
		l := int64(limit)
		lim = &l
	}
	rows, err := t.tx.Query(ctx, `SELECT `+histColumns+` FROM history WHERE run_id = $1 AND id > $2 ORDER BY id LIMIT $3`,
		runID, afterID, lim)
	out, err := collect(rows, err, func(r pgx.Rows) (*engine.HistoryEvent, error) {
		var (
			e  engine.HistoryEvent
			at int64
		)
		if err := r.Scan(&e.ID, &e.RunID, &at, &e.Type, &e.ExecutionID, &e.Data); err != nil {
			return nil, err
		}
		e.At = rowfmt.FromMs(at)
		return &e, nil
	})
	return out, wrap("HistoryList", err)
}

// HistoryOutline implements engine.ReadTx: the data of the events o does
// not select stays in the database.
func (t *txn) HistoryOutline(ctx context.Context, runID string, afterID int64, limit int, o engine.OutlineData) ([]*engine.HistoryEvent, error) {
	var lim *int64
	if limit > 0 {
		l := int64(limit)
		lim = &l
	}
	types := o.Types
	if types == nil {
		types = []string{}
	}
	var marked *string
	var marker []byte
	if o.MarkedType != "" && o.Marker != "" {
		marked, marker = &o.MarkedType, []byte(o.Marker)
	}
	rows, err := t.tx.Query(ctx, `SELECT id, at, type, execution_id,
			CASE WHEN type = ANY($4) OR (type = $5 AND position($6::bytea IN data) > 0) THEN data END
		FROM history WHERE run_id = $1 AND id > $2 ORDER BY id LIMIT $3`,
		runID, afterID, lim, types, marked, marker)
	out, err := collect(rows, err, func(r pgx.Rows) (*engine.HistoryEvent, error) {
		var (
			e  = engine.HistoryEvent{RunID: runID}
			at int64
		)
		if err := r.Scan(&e.ID, &at, &e.Type, &e.ExecutionID, &e.Data); err != nil {
			return nil, err
		}
		e.At = rowfmt.FromMs(at)
		return &e, nil
	})
	return out, wrap("HistoryOutline", err)
}

// HistoryGet implements engine.ReadTx.
func (t *txn) HistoryGet(ctx context.Context, runID string, ids []int64) ([]*engine.HistoryEvent, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	rows, err := t.tx.Query(ctx, `SELECT `+histColumns+` FROM history WHERE run_id = $1 AND id = ANY($2) ORDER BY id`, runID, ids)
	out, err := collect(rows, err, scanEvent)
	return out, wrap("HistoryGet", err)
}

// scanEvent reads a history row (histColumns).
func scanEvent(r pgx.Rows) (*engine.HistoryEvent, error) {
	var (
		e  engine.HistoryEvent
		at int64
	)
	if err := r.Scan(&e.ID, &e.RunID, &at, &e.Type, &e.ExecutionID, &e.Data); err != nil {
		return nil, err
	}
	e.At = rowfmt.FromMs(at)
	return &e, nil
}

// HistoryAppend implements engine.Tx with one multi-row INSERT: a VALUES
// list for up to valuesMaxRows events, an unnest of arrays beyond.
func (t *txn) HistoryAppend(ctx context.Context, events []*engine.HistoryEvent) error {
	if len(events) == 0 {
		return nil
	}
	n := len(events)
	setIDs := readIDs(n, func(ids []int64) {
		for i, e := range events {
			e.ID = ids[i]
		}
	})
	if n <= valuesMaxRows {
		args := make([]any, 0, 5*n)
		for _, e := range events {
			args = append(args, e.RunID, rowfmt.ToMs(e.At), e.Type, e.ExecutionID, e.Data)
		}
		t.tx.laterRows("HistoryAppend", sqlHistoryInsertValues[n-1], setIDs, args...)
		return nil
	}
	var (
		runIDs, types, execIDs = make([]string, n), make([]string, n), make([]string, n)
		ats                    = make([]int64, n)
		data                   = make([][]byte, n)
	)
	for i, e := range events {
		runIDs[i], ats[i], types[i], execIDs[i], data[i] = e.RunID, rowfmt.ToMs(e.At), e.Type, e.ExecutionID, e.Data
	}
	t.tx.laterRows("HistoryAppend", `INSERT INTO history (run_id, at, type, execution_id, data)
		SELECT r, a, ty, e, d
		FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::bytea[]) WITH ORDINALITY AS u(r, a, ty, e, d, o)
		ORDER BY o
		RETURNING id`, setIDs, runIDs, ats, types, execIDs, data)
	return nil
}

// scanTask reads a task row.
func scanTask(row pgx.Rows) (*engine.Task, error) { return rowfmt.ScanTask(row) }

// valuesMaxRows is the most rows a multi-row INSERT writes as a VALUES
// list of parameters; more go as arrays through unnest. A worker's answer
// inserts one to four history events, executions and tasks, and for so
// few rows a VALUES list costs the backend less than unnest ... WITH
// ORDINALITY ORDER BY (a function scan of every array, then a sort), and
// the server less than encoding arrays. A VALUES list is inserted, and
// its sequence values (and RETURNING rows) are taken, in its order.
const valuesMaxRows = 4

// The INSERTs of 1 to valuesMaxRows rows, by rows - 1.
var (
	sqlExecutionInsertValues = valuesInserts(`INSERT INTO executions (`+execColumns+`) VALUES `, 6, ``)
	sqlTaskInsertValues      = valuesInserts(`INSERT INTO tasks (run_id, workflow_id, execution_id, kind, due_at, attempt,
			first_attempt_at, lease_owner, lease_expires_at, data) VALUES `, 10, ` RETURNING id`)
	sqlHistoryInsertValues = valuesInserts(`INSERT INTO history (run_id, at, type, execution_id, data) VALUES `, 5, ` RETURNING id`)
)

// valuesInserts returns prefix + a VALUES list of 1 to valuesMaxRows rows of
// cols parameters each + suffix.
func valuesInserts(prefix string, cols int, suffix string) []string {
	out := make([]string, valuesMaxRows)
	var b strings.Builder
	b.WriteString(prefix)
	p := 0
	for n := range valuesMaxRows {
		if n > 0 {
			b.WriteString(", ")
		}
		b.WriteByte('(')
		for c := range cols {
			if c > 0 {
				b.WriteString(", ")
			}
			p++
			b.WriteString("$" + strconv.Itoa(p))
		}
		b.WriteByte(')')
		out[n] = b.String() + suffix
	}
	return out
}
