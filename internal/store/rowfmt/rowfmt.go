// Package rowfmt holds what the two stores share where the SQL is not the
// difference: how times are kept in columns (unix milliseconds, 0 for the
// zero time; DATETIME search attributes in unix nanoseconds), the order claimed tasks are returned in, and how driver
// errors become the engine's. Each store keeps its SQL and its driver.
package rowfmt

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/search"
)

// ToMs converts a time to the unix milliseconds a column holds; the zero
// time is 0.
func ToMs(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// FromMs converts a column's unix milliseconds to a UTC time; 0 is the zero
// time.
func FromMs(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMilli(v).UTC()
}

// The instants a DATETIME search attribute can hold: unix nanoseconds in
// an int64, from 1677-09-21 to 2262-04-11.
var (
	minDatetime = time.Unix(0, math.MinInt64).UTC()
	maxDatetime = time.Unix(0, math.MaxInt64).UTC()
)

// ToNs converts a DATETIME value to the unix nanoseconds its column holds;
// instants beyond minDatetime and maxDatetime become the nearest one (the
// engine refuses to store them; a search literal beyond them compares as
// the bound).
func ToNs(t time.Time) int64 {
	switch {
	case t.Before(minDatetime):
		return math.MinInt64
	case t.After(maxDatetime):
		return math.MaxInt64
	}
	return t.UnixNano()
}

// FromNs converts a column's unix nanoseconds to a UTC time.
func FromNs(v int64) time.Time { return time.Unix(0, v).UTC() }

// SortTasks puts claimed tasks in the order TaskClaim returns them: oldest
// due first, then by id. (An UPDATE ... RETURNING yields rows in no defined
// order.)
func SortTasks(tasks []*engine.Task) {
	sort.Slice(tasks, func(i, j int) bool {
		if !tasks[i].DueAt.Equal(tasks[j].DueAt) {
			return tasks[i].DueAt.Before(tasks[j].DueAt)
		}
		return tasks[i].ID < tasks[j].ID
	})
}

// NotFound turns the driver's "no rows" error into engine.ErrNotFound.
func NotFound(err, noRows error) error {
	if errors.Is(err, noRows) {
		return engine.ErrNotFound
	}
	return err
}

// Wrap names the store and the operation in an error; nil and
// engine.ErrNotFound pass through unchanged.
func Wrap(store, op string, err error) error {
	if err == nil || errors.Is(err, engine.ErrNotFound) {
		return err
	}
	return fmt.Errorf("%s: %s: %w", store, op, err)
}

// Scanner is one result row of either driver (sql.Row, *sql.Rows, pgx.Row,
// pgx.Rows).
type Scanner interface {
	Scan(dest ...any) error
}

// RunColumns, ExecutionColumns and TaskColumns are the columns the Scan
// functions read, in order.
const (
	RunColumns       = "run_id, workflow_id, workflow_type, status, started_at, closed_at, data"
	ExecutionColumns = "run_id, execution_id, state_id, status, created_at, data"
	TaskColumns      = "id, run_id, workflow_id, execution_id, kind, due_at, attempt, first_attempt_at, lease_owner, lease_expires_at, data"
)

// ScanRun reads a row of RunColumns. The driver's error is returned as is.
func ScanRun(row Scanner) (*engine.Run, error) {
	var (
		r                   engine.Run
		status              string
		startedAt, closedAt int64
	)
	if err := row.Scan(&r.RunID, &r.WorkflowID, &r.WorkflowType, &status, &startedAt, &closedAt, &r.Data); err != nil {
		return nil, err
	}
	r.Status = engine.RunStatus(status)
	r.StartedAt, r.ClosedAt = FromMs(startedAt), FromMs(closedAt)
	return &r, nil
}

// ScanExecution reads a row of ExecutionColumns.
func ScanExecution(row Scanner) (*engine.Execution, error) {
	var (
		e         engine.Execution
		status    string
		createdAt int64
	)
	if err := row.Scan(&e.RunID, &e.ExecutionID, &e.StateID, &status, &createdAt, &e.Data); err != nil {
		return nil, err
	}
	e.Status = engine.ExecutionStatus(status)
	e.CreatedAt = FromMs(createdAt)
	return &e, nil
}

// ScanTask reads a row of TaskColumns; a NULL lease owner is "".
func ScanTask(row Scanner) (*engine.Task, error) {
	var (
		tk                      engine.Task
		kind                    string
		attempt                 int32
		due, first, leaseExpiry int64
		owner                   *string
	)
	if err := row.Scan(&tk.ID, &tk.RunID, &tk.WorkflowID, &tk.ExecutionID, &kind, &due, &attempt,
		&first, &owner, &leaseExpiry, &tk.Data); err != nil {
		return nil, err
	}
	tk.Kind, tk.Attempt = engine.TaskKind(kind), int(attempt)
	tk.DueAt, tk.FirstAttemptAt, tk.LeaseExpiresAt = FromMs(due), FromMs(first), FromMs(leaseExpiry)
	if owner != nil {
		tk.LeaseOwner = *owner
	}
	return &tk, nil
}

// KeywordElements returns the elements a search attribute row keeps in
// search_attribute_strings: a KEYWORD_ARRAY's elements, and a KEYWORD's
// value as a one-element list. KEYWORD and KEYWORD_ARRAY are one family,
// as in Temporal: a condition on either matches any element.
func KeywordElements(a *engine.SearchAttribute) []string {
	switch {
	case a.ValueType == search.KeywordArray:
		return a.Strings
	case a.ValueType == search.Keyword && a.String != nil:
		return []string{*a.String}
	}
	return nil
}

// Classified reports whether err needs no classifying by a store: it is
// nil, or already says what the engine needs (an *engine.UnavailableError
// or an *engine.Error with its code).
func Classified(err error) bool {
	var ee *engine.Error
	return err == nil || engine.IsUnavailable(err) || errors.As(err, &ee)
}

// BatchColumns and BatchItemColumns are the columns ScanBatch and
// ScanBatchItem read, in order.
const (
	BatchColumns     = "seq, batch_id, query, operation, options, reason, rps, state, message, matched, done, failed, created_by, created_at, updated_at, closed_at, COALESCE(lease_owner, ''), lease_expires_at"
	BatchItemColumns = "batch_id, seq, workflow_id, run_id, status, failure"
)

// ScanBatch reads a row of BatchColumns.
func ScanBatch(row Scanner) (*engine.Batch, error) {
	var (
		b                                       engine.Batch
		state                                   string
		createdAt, updatedAt, closedAt, expires int64
	)
	if err := row.Scan(&b.Seq, &b.ID, &b.Query, &b.Operation, &b.Options, &b.Reason, &b.RPS, &state, &b.Message,
		&b.Matched, &b.Done, &b.Failed, &b.CreatedBy, &createdAt, &updatedAt, &closedAt, &b.LeaseOwner, &expires); err != nil {
		return nil, err
	}
	b.State = engine.BatchState(state)
	b.CreatedAt, b.UpdatedAt, b.ClosedAt, b.LeaseExpiresAt = FromMs(createdAt), FromMs(updatedAt), FromMs(closedAt), FromMs(expires)
	return &b, nil
}

// ScanBatchItem reads a row of BatchItemColumns.
func ScanBatchItem(row Scanner) (*engine.BatchItem, error) {
	var (
		it     engine.BatchItem
		status string
	)
	if err := row.Scan(&it.BatchID, &it.Seq, &it.WorkflowID, &it.RunID, &status, &it.Failure); err != nil {
		return nil, err
	}
	it.Status = engine.BatchItemStatus(status)
	return &it, nil
}

// BatchStateStrings returns states as strings, for a list parameter.
func BatchStateStrings(states []engine.BatchState) []string {
	out := make([]string, len(states))
	for i, s := range states {
		out[i] = string(s)
	}
	return out
}

// BatchClosing reports whether entering state s closes a batch.
func BatchClosing(s engine.BatchState) bool {
	return s == engine.BatchCancelled || s == engine.BatchCompleted
}

// BatchAbandoned is the message of a starting batch whose creator stopped
// before it stored every matching run.
const BatchAbandoned = "the server stopped while it stored the matching runs; start the batch again"

// BatchCounts is what finishing an item with status adds to its batch's
// done and failed counters.
func BatchCounts(status engine.BatchItemStatus) (done, failed int) {
	if status == engine.BatchItemFailed {
		return 0, 1
	}
	return 1, 0
}
