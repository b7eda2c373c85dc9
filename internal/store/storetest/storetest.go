// Package storetest is the conformance suite of engine.Store.
//
// Every store implementation (internal/store/sqlite, internal/store/postgres)
// runs the same suite from its own tests:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) engine.Store { return newIsolatedStore(t) })
//	}
//
// The suite owns the observable behaviour of the contract in engine/store.go:
// round-trips of every row type, ordering, lease rules of the task queue,
// rollback, and serialisation of concurrent transactions. It imports only the
// engine package and the standard library, so that it can be reused by any
// backend without import cycles.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/search"
)

// Run exercises every method of engine.Store, engine.ReadTx and engine.Tx.
// newStore must return a fresh, migrated store that shares no rows with any
// other store it returned; it is called once per subtest and is responsible
// for closing the store (for example with t.Cleanup).
func Run(t *testing.T, newStore func(t *testing.T) engine.Store) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, s engine.Store)
	}{
		{"Ping", testPing},
		{"SchemaVersion", testSchemaVersion},
		{"UpdateCommits", testUpdateCommits},
		{"UpdateRollsBackOnError", testUpdateRollsBackOnError},
		{"UpdateRollsBackOnPanic", testUpdateRollsBackOnPanic},
		{"ViewIsSnapshot", testViewIsSnapshot},
		{"WorkflowLockAndCurrentRun", testWorkflow},
		{"WorkflowLockSerialises", testWorkflowLockSerialises},
		{"WorkflowLockOrCreate", testWorkflowLockOrCreate},
		{"RunRoundTrip", testRunRoundTrip},
		{"RunUpdate", testRunUpdate},
		{"UpdateOfAbsentRowKeepsNothing", testUpdateOfAbsentRowKeepsNothing},
		{"RunLockSerialises", testRunLockSerialises},
		{"ExecutionRoundTripAndOrder", testExecutionRoundTrip},
		{"TaskInsertGivesEachItsID", testTaskInsertIDs},
		{"ExecutionFilterAndCount", testExecutionFilterAndCount},
		{"ExecutionUpdate", testExecutionUpdate},
		{"MessageAppendPeek", testMessageAppendPeek},
		{"MessageCountsAndDelete", testMessageCountsAndDelete},
		{"DataAttributes", testDataAttributes},
		{"SearchAttributes", testSearchAttributes},
		{"TaskInsertListRoundTrip", testTaskInsertList},
		{"TaskDeleteRespectsLease", testTaskDelete},
		{"TaskRescheduleRespectsLease", testTaskReschedule},
		{"TaskDeleteByRunAndExecution", testTaskDeleteByRunAndExecution},
		{"TaskClaimDueAndOrder", testTaskClaimDueAndOrder},
		{"TaskClaimLeaseRules", testTaskClaimLeaseRules},
		{"TaskClaimLimit", testTaskClaimLimit},
		{"TaskClaimExpiredFirst", testTaskClaimExpiredFirst},
		{"TaskClaimConcurrent", testTaskClaimConcurrent},
		{"TaskRenewLeases", testTaskRenewLeases},
		{"TaskReleaseLeases", testTaskReleaseLeases},
		{"TaskRelease", testTaskRelease},
		{"History", testHistory},
		{"HistoryOutline", testHistoryOutline},
		{"ReadForCall", testReadForCall},
		{"ReadForCallAfterCommit", testReadForCallAfterCommit},
		{"TaskTake", testTaskTake},
	}
	tests = append(tests, limitTests...)
	tests = append(tests, permitTests...)
	tests = append(tests, searchTests...)
	tests = append(tests, batchTests...)
	tests = append(tests, payloadTests...)
	tests = append(tests, pauseTests...)
	tests = append(tests, limitSettingTests...)
	for _, tc := range append(tests, retentionTests...) {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, newStore(t))
		})
	}
}

// ---------------------------------------------------------------------------
// helpers

// base is an arbitrary instant with sub-millisecond digits, in a non-UTC zone,
// so that the suite checks both millisecond truncation and UTC conversion.
var base = time.Date(2024, 5, 6, 7, 8, 9, 123456789, time.FixedZone("X", 2*3600))

// at returns base shifted by d, as given to the store.
func at(d time.Duration) time.Time { return base.Add(d) }

// ms is what the store must return for a time it was given: UTC, truncated
// to the millisecond.
func ms(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return time.UnixMilli(t.UnixMilli()).UTC()
}

func ctxT(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func update(t *testing.T, s engine.Store, fn func(ctx context.Context, tx engine.Tx) error) {
	t.Helper()
	if err := s.Update(ctxT(t), fn); err != nil {
		t.Fatalf("Update: %v", err)
	}
}

func view(t *testing.T, s engine.Store, fn func(ctx context.Context, tx engine.ReadTx) error) {
	t.Helper()
	if err := s.View(ctxT(t), fn); err != nil {
		t.Fatalf("View: %v", err)
	}
}

func equal(t *testing.T, what string, got, want any) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s:\n got: %s\nwant: %s", what, show(got), show(want))
	}
}

// show formats values so that nil and empty byte slices are distinguishable.
func show(v any) string {
	rv := reflect.ValueOf(v)
	switch {
	case !rv.IsValid():
		return "<nil>"
	case rv.Kind() == reflect.Slice && rv.Type().Elem().Kind() == reflect.Pointer:
		s := "["
		for i := 0; i < rv.Len(); i++ {
			if i > 0 {
				s += ", "
			}
			s += show(rv.Index(i).Interface())
		}
		return s + "]"
	case rv.Kind() == reflect.Pointer && !rv.IsNil() && rv.Elem().Kind() == reflect.Struct:
		return show(rv.Elem().Interface())
	case rv.Kind() == reflect.Struct:
		s := "{"
		for i := 0; i < rv.NumField(); i++ {
			if i > 0 {
				s += " "
			}
			f := rv.Field(i)
			s += rv.Type().Field(i).Name + ":"
			switch {
			case f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.Uint8:
				if f.IsNil() {
					s += "nil"
				} else {
					s += strconv.Quote(string(f.Bytes()))
				}
			case f.Kind() == reflect.Pointer && !f.IsNil():
				s += fmt.Sprintf("&%v", f.Elem().Interface())
			default:
				s += fmt.Sprintf("%v", f.Interface())
			}
		}
		return s + "}"
	}
	return fmt.Sprintf("%#v", v)
}

func isNotFound(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("%s: got error %v, want engine.ErrNotFound", what, err)
	}
}

// waitDone fails the test when done is not closed within a generous deadline,
// instead of hanging on a deadlock.
func waitDone(t *testing.T, what string, done <-chan struct{}) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatalf("%s: did not finish within 20s (deadlock?)", what)
	}
}

func newRun(id string) *engine.Run {
	return &engine.Run{
		RunID:        id,
		WorkflowID:   "wf-" + id,
		WorkflowType: "Type",
		Status:       engine.RunRunning,
		StartedAt:    at(0),
		Data:         []byte(`{"counter":0}`),
	}
}

func insertRun(t *testing.T, s engine.Store, r *engine.Run) {
	t.Helper()
	update(t, s, func(ctx context.Context, tx engine.Tx) error { return tx.RunInsert(ctx, r) })
}

func getRun(t *testing.T, s engine.Store, id string) *engine.Run {
	t.Helper()
	var r *engine.Run
	view(t, s, func(ctx context.Context, tx engine.ReadTx) (err error) {
		r, err = tx.RunGet(ctx, id)
		return err
	})
	return r
}

func insertTasks(t *testing.T, s engine.Store, tasks ...*engine.Task) {
	t.Helper()
	update(t, s, func(ctx context.Context, tx engine.Tx) error { return tx.TaskInsert(ctx, tasks) })
	for _, tk := range tasks {
		if tk.ID == 0 {
			t.Fatalf("TaskInsert did not set the ID of %+v", tk)
		}
	}
}

func listTasks(t *testing.T, s engine.Store, runID string) []*engine.Task {
	t.Helper()
	var out []*engine.Task
	view(t, s, func(ctx context.Context, tx engine.ReadTx) (err error) {
		out, err = tx.TaskList(ctx, runID)
		return err
	})
	return out
}

func taskByID(t *testing.T, s engine.Store, runID string, id int64) *engine.Task {
	t.Helper()
	for _, tk := range listTasks(t, s, runID) {
		if tk.ID == id {
			return tk
		}
	}
	return nil
}

// stored returns what the store must return for a task it was given.
func stored(tk *engine.Task) *engine.Task {
	c := *tk
	c.DueAt = ms(c.DueAt)
	c.FirstAttemptAt = ms(c.FirstAttemptAt)
	c.LeaseExpiresAt = ms(c.LeaseExpiresAt)
	return &c
}

func ids(tasks []*engine.Task) []int64 {
	out := make([]int64, len(tasks))
	for i, tk := range tasks {
		out[i] = tk.ID
	}
	return out
}

func newTask(runID, execID string, kind engine.TaskKind, due time.Time) *engine.Task {
	return &engine.Task{
		RunID:          runID,
		WorkflowID:     "wf-" + runID,
		ExecutionID:    execID,
		Kind:           kind,
		DueAt:          due,
		Attempt:        1,
		FirstAttemptAt: due,
		Data:           []byte(`{"k":"` + execID + `"}`),
	}
}

func claim(t *testing.T, s engine.Store, p engine.TaskClaimParams) []*engine.Task {
	t.Helper()
	out, err := s.TaskClaim(ctxT(t), p)
	if err != nil {
		t.Fatalf("TaskClaim(%+v): %v", p, err)
	}
	return out
}

func ptr[T any](v T) *T { return &v }

var errBoom = errors.New("boom")

// ---------------------------------------------------------------------------
// Store-level

func testPing(t *testing.T, s engine.Store) {
	if err := s.Ping(ctxT(t)); err != nil {
		t.Fatalf("Ping: %v", err)
	}
}

// testSchemaVersion: a migrated store has a schema version, the same on
// every call; a cancelled call fails instead of answering 0.
func testSchemaVersion(t *testing.T, s engine.Store) {
	v, err := s.SchemaVersion(ctxT(t))
	if err != nil {
		t.Fatalf("SchemaVersion: %v", err)
	}
	if v < 1 {
		t.Fatalf("SchemaVersion of a migrated store = %d, want at least 1", v)
	}
	if again, err := s.SchemaVersion(ctxT(t)); err != nil || again != v {
		t.Fatalf("SchemaVersion again = %d, %v; want %d", again, err, v)
	}
	ctx, cancel := context.WithCancel(ctxT(t))
	cancel()
	if got, err := s.SchemaVersion(ctx); err == nil {
		t.Fatalf("SchemaVersion with a cancelled context = %d, want an error", got)
	}
}

func testUpdateCommits(t *testing.T, s engine.Store) {
	r := newRun("r1")
	update(t, s, func(ctx context.Context, tx engine.Tx) error {
		if err := tx.RunInsert(ctx, r); err != nil {
			return err
		}
		// A transaction reads its own writes.
		got, err := tx.RunGet(ctx, "r1")
		if err != nil {
			return fmt.Errorf("RunGet in the inserting tx: %w", err)
		}
		if got.WorkflowID != r.WorkflowID {
			return fmt.Errorf("RunGet in the inserting tx: got %+v", got)
		}
		return nil
	})
	if got := getRun(t, s, "r1"); got.RunID != "r1" {
		t.Fatalf("committed run not visible: %+v", got)
	}
}

// writeEverything writes one row of every kind for run r.
func writeEverything(ctx context.Context, tx engine.Tx, r string) error {
	if _, err := tx.WorkflowLock(ctx, "wf-"+r); err != nil {
		return err
	}
	if err := tx.WorkflowSetCurrentRun(ctx, "wf-"+r, r); err != nil {
		return err
	}
	if err := tx.RunInsert(ctx, newRun(r)); err != nil {
		return err
	}
	if err := tx.ExecutionInsert(ctx, []*engine.Execution{{RunID: r, ExecutionID: "S1-1", StateID: "S1", Status: engine.ExecWaitUntil, CreatedAt: at(0)}}); err != nil {
		return err
	}
	if err := tx.MessageAppend(ctx, []*engine.Message{{RunID: r, Kind: engine.ChannelSignal, Channel: "c", Value: []byte(`1`), CreatedAt: at(0)}}); err != nil {
		return err
	}
	if err := tx.DataAttributeUpsert(ctx, r, []*engine.Attribute{{Key: "k", Value: []byte(`1`)}}); err != nil {
		return err
	}
	if err := tx.SearchAttributeUpsert(ctx, r, []*engine.SearchAttribute{{Key: "k", ValueType: search.KeywordArray, Raw: []byte(`[]`), Strings: []string{"a"}}}); err != nil {
		return err
	}
	if err := tx.TaskInsert(ctx, []*engine.Task{newTask(r, "S1-1", engine.TaskWaitUntil, at(0))}); err != nil {
		return err
	}
	return tx.HistoryAppend(ctx, []*engine.HistoryEvent{{RunID: r, At: at(0), Type: "started"}})
}

// checkNothing asserts that no row written by writeEverything for r exists.
func checkNothing(t *testing.T, s engine.Store, r string) {
	t.Helper()
	view(t, s, func(ctx context.Context, tx engine.ReadTx) error {
		_, err := tx.WorkflowGetCurrentRun(ctx, "wf-"+r)
		isNotFound(t, "WorkflowGetCurrentRun after rollback", err)
		_, err = tx.RunGet(ctx, r)
		isNotFound(t, "RunGet after rollback", err)
		_, err = tx.ExecutionGet(ctx, r, "S1-1")
		isNotFound(t, "ExecutionGet after rollback", err)
		if xs, err := tx.ExecutionList(ctx, r); err != nil || len(xs) != 0 {
			t.Fatalf("ExecutionList after rollback = %v, %v", xs, err)
		}
		if m, err := tx.MessagePeek(ctx, r, engine.ChannelSignal, "c", 0); err != nil || len(m) != 0 {
			t.Fatalf("MessagePeek after rollback = %v, %v", m, err)
		}
		if a, err := tx.DataAttributeGet(ctx, r, nil); err != nil || len(a) != 0 {
			t.Fatalf("DataAttributeGet after rollback = %v, %v", a, err)
		}
		if a, err := tx.SearchAttributeGet(ctx, r, nil); err != nil || len(a) != 0 {
			t.Fatalf("SearchAttributeGet after rollback = %v, %v", a, err)
		}
		if a, err := tx.TaskList(ctx, r); err != nil || len(a) != 0 {
			t.Fatalf("TaskList after rollback = %v, %v", a, err)
		}
		if a, err := tx.HistoryList(ctx, r, 0, 0); err != nil || len(a) != 0 {
			t.Fatalf("HistoryList after rollback = %v, %v", a, err)
		}
		return nil
	})
	if got := claim(t, s, engine.TaskClaimParams{Owner: "o", Now: at(time.Hour), DueBefore: at(time.Hour), LeaseDuration: time.Minute, Limit: 10}); len(got) != 0 {
		t.Fatalf("TaskClaim after rollback returned %v", show(got))
	}
}

func testUpdateRollsBackOnError(t *testing.T, s engine.Store) {
	err := s.Update(ctxT(t), func(ctx context.Context, tx engine.Tx) error {
		if err := writeEverything(ctx, tx, "r1"); err != nil {
			return fmt.Errorf("unexpected: %w", err)
		}
		return fmt.Errorf("wrapped: %w", errBoom)
	})
	if !errors.Is(err, errBoom) {
		t.Fatalf("Update returned %v, want fn's error", err)
	}
	checkNothing(t, s, "r1")
	// The store is still usable, and the same rows can be written now.
	update(t, s, func(ctx context.Context, tx engine.Tx) error { return writeEverything(ctx, tx, "r1") })
	if r := getRun(t, s, "r1"); r.RunID != "r1" {
		t.Fatalf("RunGet = %+v", r)
	}
}

func testUpdateRollsBackOnPanic(t *testing.T, s engine.Store) {
	func() {
		defer func() {
			if p := recover(); p != errBoom {
				t.Fatalf("recovered %v, want the panic of fn to propagate", p)
			}
		}()
		_ = s.Update(ctxT(t), func(ctx context.Context, tx engine.Tx) error {
			if err := writeEverything(ctx, tx, "r1"); err != nil {
				t.Errorf("unexpected: %v", err)
			}
			panic(errBoom)
		})
	}()
	checkNothing(t, s, "r1")
	update(t, s, func(ctx context.Context, tx engine.Tx) error { return writeEverything(ctx, tx, "r1") })
}

func testViewIsSnapshot(t *testing.T, s engine.Store) {
	insertRun(t, s, newRun("r1"))
	err := s.View(ctxT(t), func(ctx context.Context, tx engine.ReadTx) error {
		first, err := tx.RunGet(ctx, "r1")
		if err != nil {
			return err
		}
		// Commit a change from another goroutine while the view is open.
		done := make(chan struct{})
		var uerr error
		go func() {
			defer close(done)
			uerr = s.Update(context.Background(), func(ctx context.Context, tx engine.Tx) error {
				r, err := tx.RunLock(ctx, "r1")
				if err != nil {
					return err
				}
				r.Data = []byte(`{"counter":1}`)
				if err := tx.RunUpdate(ctx, r); err != nil {
					return err
				}
				return tx.HistoryAppend(ctx, []*engine.HistoryEvent{{RunID: "r1", At: at(0), Type: "x"}})
			})
		}()
		waitDone(t, "Update during View", done)
		if uerr != nil {
			return fmt.Errorf("concurrent Update: %w", uerr)
		}
		second, err := tx.RunGet(ctx, "r1")
		if err != nil {
			return err
		}
		equal(t, "RunGet later in the same View", second, first)
		h, err := tx.HistoryList(ctx, "r1", 0, 0)
		if err != nil {
			return err
		}
		if len(h) != 0 {
			t.Fatalf("View sees rows committed after it started: %v", show(h))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("View: %v", err)
	}
	if got := getRun(t, s, "r1"); string(got.Data) != `{"counter":1}` {
		t.Fatalf("a new View does not see the committed change: %s", got.Data)
	}
	// View returns fn's error.
	if err := s.View(ctxT(t), func(context.Context, engine.ReadTx) error { return errBoom }); !errors.Is(err, errBoom) {
		t.Fatalf("View returned %v, want fn's error", err)
	}
}

// ---------------------------------------------------------------------------
// workflows and runs

func testWorkflow(t *testing.T, s engine.Store) {
	view(t, s, func(ctx context.Context, tx engine.ReadTx) error {
		_, err := tx.WorkflowGetCurrentRun(ctx, "wf")
		isNotFound(t, "WorkflowGetCurrentRun of an unknown id", err)
		return nil
	})
	update(t, s, func(ctx context.Context, tx engine.Tx) error {
		cur, err := tx.WorkflowLock(ctx, "wf")
		if err != nil {
			return err
		}
		equal(t, "WorkflowLock of an absent id", cur, "")
		// Locking again in the same transaction is allowed.
		cur, err = tx.WorkflowLock(ctx, "wf")
		if err != nil {
			return err
		}
		equal(t, "second WorkflowLock", cur, "")
		return nil
	})
	view(t, s, func(ctx context.Context, tx engine.ReadTx) error {
		_, err := tx.WorkflowGetCurrentRun(ctx, "wf")
		isNotFound(t, "WorkflowGetCurrentRun of a locked but never started id", err)
		return nil
	})
	update(t, s, func(ctx context.Context, tx engine.Tx) error {
		if _, err := tx.WorkflowLock(ctx, "wf"); err != nil {
			return err
		}
		if err := tx.WorkflowSetCurrentRun(ctx, "wf", "run-1"); err != nil {
			return err
		}
		cur, err := tx.WorkflowGetCurrentRun(ctx, "wf")
		if err != nil {
			return err
		}
		equal(t, "WorkflowGetCurrentRun in the same tx", cur, "run-1")
		return nil
	})
	update(t, s, func(ctx context.Context, tx engine.Tx) error {
		cur, err := tx.WorkflowLock(ctx, "wf")
		if err != nil {
			return err
		}
		equal(t, "WorkflowLock after SetCurrentRun", cur, "run-1")
		return tx.WorkflowSetCurrentRun(ctx, "wf", "run-2")
	})
	view(t, s, func(ctx context.Context, tx engine.ReadTx) error {
		cur, err := tx.WorkflowGetCurrentRun(ctx, "wf")
		if err != nil {
			return err
		}
		equal(t, "WorkflowGetCurrentRun", cur, "run-2")
		_, err = tx.WorkflowGetCurrentRun(ctx, "wf-other")
		isNotFound(t, "WorkflowGetCurrentRun of another id", err)
		return nil
	})
}

// testWorkflowLockSerialises has n transactions race to create and advance
// the same, initially absent, workflow row. Each reads the current run id
// under the lock and writes the next one; lost updates or a failed creation
// race leave a final value below n.
func testWorkflowLockSerialises(t *testing.T, s engine.Store) {
	const n = 16
	var wg sync.WaitGroup
	errs := make(chan error, n)
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			errs <- s.Update(context.Background(), func(ctx context.Context, tx engine.Tx) error {
				cur, err := tx.WorkflowLock(ctx, "wf")
				if err != nil {
					return err
				}
				k := 0
				if cur != "" {
					if k, err = strconv.Atoi(cur); err != nil {
						return err
					}
				}
				return tx.WorkflowSetCurrentRun(ctx, "wf", strconv.Itoa(k+1))
			})
		}()
	}
	close(start)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	waitDone(t, "concurrent WorkflowLock transactions", done)
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("Update: %v", err)
		}
	}
	view(t, s, func(ctx context.Context, tx engine.ReadTx) error {
		cur, err := tx.WorkflowGetCurrentRun(ctx, "wf")
		if err != nil {
			return err
		}
		equal(t, "counter after concurrent increments", cur, strconv.Itoa(n))
		return nil
	})
}

// testWorkflowLockOrCreate checks Tx.WorkflowLockOrCreate: an absent row
// is created pointing at the given run, an existing row is locked and
// keeps its current run, and of transactions racing to create the same
// row exactly one creates it while the others find its run.
func testWorkflowLockOrCreate(t *testing.T, s engine.Store) {
	update(t, s, func(ctx context.Context, tx engine.Tx) error {
		cur, created, err := tx.WorkflowLockOrCreate(ctx, "wf", "run-a")
		if err != nil {
			return err
		}
		equal(t, "WorkflowLockOrCreate of an absent id", []any{cur, created}, []any{"", true})
		cur, err = tx.WorkflowGetCurrentRun(ctx, "wf")
		if err != nil {
			return err
		}
		equal(t, "current run in the creating tx", cur, "run-a")
		return nil
	})
	update(t, s, func(ctx context.Context, tx engine.Tx) error {
		cur, created, err := tx.WorkflowLockOrCreate(ctx, "wf", "run-b")
		if err != nil {
			return err
		}
		equal(t, "WorkflowLockOrCreate of an existing id", []any{cur, created}, []any{"run-a", false})
		return nil
	})
	// A row without a current run (locked by a transaction that started
	// nothing): either it now points at the run, or the caller learns that
	// it has none and sets it.
	update(t, s, func(ctx context.Context, tx engine.Tx) error {
		_, err := tx.WorkflowLock(ctx, "wf-empty")
		return err
	})
	update(t, s, func(ctx context.Context, tx engine.Tx) error {
		cur, created, err := tx.WorkflowLockOrCreate(ctx, "wf-empty", "run-c")
		if err != nil {
			return err
		}
		if !created {
			equal(t, "WorkflowLockOrCreate of a row without a run", cur, "")
			return tx.WorkflowSetCurrentRun(ctx, "wf-empty", "run-c")
		}
		return nil
	})
	view(t, s, func(ctx context.Context, tx engine.ReadTx) error {
		for id, want := range map[string]string{"wf": "run-a", "wf-empty": "run-c"} {
			cur, err := tx.WorkflowGetCurrentRun(ctx, id)
			if err != nil {
				return err
			}
			equal(t, "current run of "+id, cur, want)
		}
		return nil
	})

	const n = 8
	type outcome struct {
		runID, cur string
		created    bool
	}
	var wg sync.WaitGroup
	outcomes := make(chan outcome, n)
	errs := make(chan error, n)
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			runID := "race-" + strconv.Itoa(i)
			errs <- s.Update(context.Background(), func(ctx context.Context, tx engine.Tx) error {
				cur, created, err := tx.WorkflowLockOrCreate(ctx, "wf-race", runID)
				if err != nil {
					return err
				}
				outcomes <- outcome{runID: runID, cur: cur, created: created}
				return nil
			})
		}()
	}
	close(start)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	waitDone(t, "concurrent WorkflowLockOrCreate transactions", done)
	close(errs)
	close(outcomes)
	for err := range errs {
		if err != nil {
			t.Fatalf("Update: %v", err)
		}
	}
	var creator string
	var found []string
	for o := range outcomes {
		if o.created {
			if creator != "" {
				t.Fatalf("both %s and %s created the row", creator, o.runID)
			}
			creator = o.runID
		} else {
			found = append(found, o.cur)
		}
	}
	if creator == "" || len(found) != n-1 {
		t.Fatalf("creator %q, %d transactions found the row, want one creator and %d", creator, len(found), n-1)
	}
	for _, cur := range found {
		equal(t, "current run found by a racing transaction", cur, creator)
	}
	view(t, s, func(ctx context.Context, tx engine.ReadTx) error {
		cur, err := tx.WorkflowGetCurrentRun(ctx, "wf-race")
		if err != nil {
			return err
		}
		equal(t, "current run after the race", cur, creator)
		return nil
	})
}

func testRunRoundTrip(t *testing.T, s engine.Store) {
	runs := []*engine.Run{
		{RunID: "r1", WorkflowID: "wf1", WorkflowType: "T1", Status: engine.RunRunning, StartedAt: at(0), Data: []byte(`{"a":1}`)},
		{RunID: "r2", WorkflowID: "wf1", WorkflowType: "T2", Status: engine.RunCompleted, StartedAt: at(time.Second), ClosedAt: at(time.Hour), Data: []byte{}},
		{RunID: "r3", WorkflowID: "wf3", WorkflowType: "T1", Status: engine.RunFailed, StartedAt: at(-time.Hour), Data: nil},
	}
	update(t, s, func(ctx context.Context, tx engine.Tx) error {
		for _, r := range runs {
			if err := tx.RunInsert(ctx, r); err != nil {
				return err
			}
		}
		return nil
	})
	view(t, s, func(ctx context.Context, tx engine.ReadTx) error {
		for _, r := range runs {
			got, err := tx.RunGet(ctx, r.RunID)
			if err != nil {
				return err
			}
			want := *r
			want.StartedAt, want.ClosedAt = ms(r.StartedAt), ms(r.ClosedAt)
			equal(t, "RunGet "+r.RunID, got, &want)
			if got.StartedAt.Location() != time.UTC {
				t.Fatalf("StartedAt not in UTC: %v", got.StartedAt.Location())
			}
		}
		_, err := tx.RunGet(ctx, "absent")
		isNotFound(t, "RunGet of an absent run", err)
		return nil
	})
	update(t, s, func(ctx context.Context, tx engine.Tx) error {
		got, err := tx.RunLock(ctx, "r2")
		if err != nil {
			return err
		}
		want := *runs[1]
		want.StartedAt, want.ClosedAt = ms(want.StartedAt), ms(want.ClosedAt)
		equal(t, "RunLock", got, &want)
		_, err = tx.RunLock(ctx, "absent")
		isNotFound(t, "RunLock of an absent run", err)
		return nil
	})
	err := s.Update(ctxT(t), func(ctx context.Context, tx engine.Tx) error { return tx.RunInsert(ctx, newRun("r1")) })
	if err == nil {
		t.Fatalf("RunInsert of a duplicate run id succeeded")
	}
}

func testRunUpdate(t *testing.T, s engine.Store) {
	insertRun(t, s, newRun("r1"))
	insertRun(t, s, newRun("r2"))
	update(t, s, func(ctx context.Context, tx engine.Tx) error {
		r, err := tx.RunLock(ctx, "r1")
		if err != nil {
			return err
		}
		r.Status = engine.RunTimeout
		r.ClosedAt = at(90 * time.Minute)
		r.Data = nil
		// Only Status, ClosedAt and Data are written.
		r.WorkflowType = "Changed"
		r.WorkflowID = "changed"
		r.StartedAt = at(time.Hour)
		return tx.RunUpdate(ctx, r)
	})
	want := newRun("r1")
	want.StartedAt = ms(want.StartedAt)
	want.Status = engine.RunTimeout
	want.ClosedAt = ms(at(90 * time.Minute))
	want.Data = nil
	equal(t, "run after RunUpdate", getRun(t, s, "r1"), want)

	other := newRun("r2")
	other.StartedAt = ms(other.StartedAt)
	equal(t, "other run after RunUpdate", getRun(t, s, "r2"), other)

	// Back to empty data, and ClosedAt back to zero.
	update(t, s, func(ctx context.Context, tx engine.Tx) error {
		r, err := tx.RunLock(ctx, "r1")
		if err != nil {
			return err
		}
		r.Status, r.ClosedAt, r.Data = engine.RunRunning, time.Time{}, []byte{}
		return tx.RunUpdate(ctx, r)
	})
	want.Status, want.ClosedAt, want.Data = engine.RunRunning, time.Time{}, []byte{}
	equal(t, "run after second RunUpdate", getRun(t, s, "r1"), want)

	err := s.Update(ctxT(t), func(ctx context.Context, tx engine.Tx) error { return tx.RunUpdate(ctx, newRun("absent")) })
	isNotFound(t, "RunUpdate of an absent run", err)
}

// testUpdateOfAbsentRowKeepsNothing: a transaction whose RunUpdate or
// ExecutionUpdate finds no row fails with engine.ErrNotFound, and nothing
// it wrote before is kept, even when the store checks the update only when
// it commits.
func testUpdateOfAbsentRowKeepsNothing(t *testing.T, s engine.Store) {
	for name, write := range map[string]func(ctx context.Context, tx engine.Tx) error{
		"RunUpdate": func(ctx context.Context, tx engine.Tx) error { return tx.RunUpdate(ctx, newRun("absent")) },
		"ExecutionUpdate": func(ctx context.Context, tx engine.Tx) error {
			return tx.ExecutionUpdate(ctx, &engine.Execution{RunID: "absent", ExecutionID: "S-1", StateID: "S",
				Status: engine.ExecExecute, CreatedAt: at(0), Data: []byte(`{}`)})
		},
	} {
		id := "kept-" + name
		err := s.Update(ctxT(t), func(ctx context.Context, tx engine.Tx) error {
			if err := tx.RunInsert(ctx, newRun(id)); err != nil {
				return err
			}
			return write(ctx, tx)
		})
		isNotFound(t, name+" of an absent row", err)
		view(t, s, func(ctx context.Context, tx engine.ReadTx) error {
			if _, err := tx.RunGet(ctx, id); !errors.Is(err, engine.ErrNotFound) {
				t.Errorf("after a failed %s: the run the transaction inserted first: %v, want engine.ErrNotFound", name, err)
			}
			return nil
		})
	}
}

// testRunLockSerialises runs n concurrent read-modify-write transactions on a
// counter kept in Run.Data; the count is exact only if RunLock serialises them.
func testRunLockSerialises(t *testing.T, s engine.Store) {
	const n = 24
	r := newRun("r1")
	r.Data = []byte("0")
	insertRun(t, s, r)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			errs <- s.Update(context.Background(), func(ctx context.Context, tx engine.Tx) error {
				r, err := tx.RunLock(ctx, "r1")
				if err != nil {
					return err
				}
				k, err := strconv.Atoi(string(r.Data))
				if err != nil {
					return err
				}
				r.Data = []byte(strconv.Itoa(k + 1))
				return tx.RunUpdate(ctx, r)
			})
		}()
	}
	close(start)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	waitDone(t, "concurrent RunLock transactions", done)
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("Update: %v", err)
		}
	}
	equal(t, "counter after concurrent increments", string(getRun(t, s, "r1").Data), strconv.Itoa(n))
}

// ---------------------------------------------------------------------------
// executions

func storedExec(e *engine.Execution) *engine.Execution {
	c := *e
	c.CreatedAt = ms(c.CreatedAt)
	return &c
}

func testExecutionRoundTrip(t *testing.T, s engine.Store) {
	// Insertion order deliberately differs from any key order.
	batch1 := []*engine.Execution{
		{RunID: "r1", ExecutionID: "S2-1", StateID: "S2", Status: engine.ExecWaitUntil, CreatedAt: at(3 * time.Second), Data: []byte(`{"x":1}`)},
		{RunID: "r1", ExecutionID: "S10-1", StateID: "S10", Status: engine.ExecExecute, CreatedAt: at(time.Second), Data: []byte{}},
		{RunID: "r1", ExecutionID: "S1-1", StateID: "S1", Status: engine.ExecWaiting, CreatedAt: at(2 * time.Second), Data: nil},
	}
	batch2 := []*engine.Execution{
		{RunID: "r1", ExecutionID: "A-1", StateID: "A", Status: engine.ExecCompleted, CreatedAt: at(0)},
	}
	otherRun := []*engine.Execution{
		{RunID: "r2", ExecutionID: "S1-1", StateID: "S1", Status: engine.ExecWaitUntil, CreatedAt: at(0)},
	}
	update(t, s, func(ctx context.Context, tx engine.Tx) error {
		if err := tx.ExecutionInsert(ctx, batch1); err != nil {
			return err
		}
		if err := tx.ExecutionInsert(ctx, nil); err != nil {
			return fmt.Errorf("empty ExecutionInsert: %w", err)
		}
		return tx.ExecutionInsert(ctx, otherRun)
	})
	update(t, s, func(ctx context.Context, tx engine.Tx) error { return tx.ExecutionInsert(ctx, batch2) })

	all := append(append([]*engine.Execution{}, batch1...), batch2...)
	var want []*engine.Execution
	for _, e := range all {
		want = append(want, storedExec(e))
	}
	view(t, s, func(ctx context.Context, tx engine.ReadTx) error {
		got, err := tx.ExecutionList(ctx, "r1")
		if err != nil {
			return err
		}
		equal(t, "ExecutionList in insertion order", got, want)
		for _, e := range all {
			got, err := tx.ExecutionGet(ctx, e.RunID, e.ExecutionID)
			if err != nil {
				return err
			}
			equal(t, "ExecutionGet "+e.ExecutionID, got, storedExec(e))
		}
		got2, err := tx.ExecutionGet(ctx, "r2", "S1-1")
		if err != nil {
			return err
		}
		equal(t, "ExecutionGet of the same id in another run", got2, storedExec(otherRun[0]))
		_, err = tx.ExecutionGet(ctx, "r1", "absent")
		isNotFound(t, "ExecutionGet of an absent execution", err)
		_, err = tx.ExecutionGet(ctx, "absent", "S1-1")
		isNotFound(t, "ExecutionGet of an absent run", err)
		none, err := tx.ExecutionList(ctx, "absent")
		if err != nil || len(none) != 0 {
			t.Fatalf("ExecutionList of an absent run = %v, %v", none, err)
		}
		return nil
	})
	err := s.Update(ctxT(t), func(ctx context.Context, tx engine.Tx) error {
		return tx.ExecutionInsert(ctx, []*engine.Execution{{RunID: "r1", ExecutionID: "S1-1", StateID: "S1", Status: engine.ExecWaitUntil, CreatedAt: at(0)}})
	})
	if err == nil {
		t.Fatalf("ExecutionInsert of a duplicate (run, execution) succeeded")
	}
}

func testExecutionFilterAndCount(t *testing.T, s engine.Store) {
	statuses := []engine.ExecutionStatus{
		engine.ExecWaitUntil, engine.ExecCompleted, engine.ExecWaiting, engine.ExecFailed,
		engine.ExecExecute, engine.ExecAbandoned, engine.ExecWaitUntil, engine.ExecCompleted,
	}
	var execs []*engine.Execution
	for i, st := range statuses {
		execs = append(execs, &engine.Execution{RunID: "r1", ExecutionID: fmt.Sprintf("S-%d", i), StateID: "S", Status: st, CreatedAt: at(0)})
	}
	update(t, s, func(ctx context.Context, tx engine.Tx) error {
		if err := tx.ExecutionInsert(ctx, execs); err != nil {
			return err
		}
		return tx.ExecutionInsert(ctx, []*engine.Execution{{RunID: "r2", ExecutionID: "S-0", StateID: "S", Status: engine.ExecWaitUntil, CreatedAt: at(0)}})
	})
	view(t, s, func(ctx context.Context, tx engine.ReadTx) error {
		check := func(filter []engine.ExecutionStatus, wantIDs []string) {
			t.Helper()
			got, err := tx.ExecutionList(ctx, "r1", filter...)
			if err != nil {
				t.Fatalf("ExecutionList(%v): %v", filter, err)
			}
			var gotIDs []string
			for _, e := range got {
				gotIDs = append(gotIDs, e.ExecutionID)
			}
			equal(t, fmt.Sprintf("ExecutionList(%v)", filter), gotIDs, wantIDs)
		}
		check(nil, []string{"S-0", "S-1", "S-2", "S-3", "S-4", "S-5", "S-6", "S-7"})
		check(engine.LiveStatuses, []string{"S-0", "S-2", "S-4", "S-6"})
		check([]engine.ExecutionStatus{engine.ExecCompleted}, []string{"S-1", "S-7"})
		check([]engine.ExecutionStatus{engine.ExecAbandoned, engine.ExecFailed}, []string{"S-3", "S-5"})
		check([]engine.ExecutionStatus{"NO_SUCH_STATUS"}, nil)
		xs, err := tx.ExecutionList(ctx, "absent", engine.LiveStatuses...)
		if err != nil || len(xs) != 0 {
			t.Fatalf("ExecutionList of an absent run = %v, %v", xs, err)
		}
		return nil
	})
}

func testExecutionUpdate(t *testing.T, s engine.Store) {
	execs := []*engine.Execution{
		{RunID: "r1", ExecutionID: "S1-1", StateID: "S1", Status: engine.ExecWaitUntil, CreatedAt: at(0), Data: []byte(`a`)},
		{RunID: "r1", ExecutionID: "S2-1", StateID: "S2", Status: engine.ExecWaitUntil, CreatedAt: at(0), Data: []byte(`b`)},
	}
	update(t, s, func(ctx context.Context, tx engine.Tx) error { return tx.ExecutionInsert(ctx, execs) })
	update(t, s, func(ctx context.Context, tx engine.Tx) error {
		return tx.ExecutionUpdate(ctx, &engine.Execution{
			RunID: "r1", ExecutionID: "S1-1", Status: engine.ExecCompleted, Data: []byte(`{"done":true}`),
			// Only Status and Data are written.
			StateID: "other", CreatedAt: at(time.Hour),
		})
	})
	want := []*engine.Execution{storedExec(execs[0]), storedExec(execs[1])}
	want[0].Status, want[0].Data = engine.ExecCompleted, []byte(`{"done":true}`)
	view(t, s, func(ctx context.Context, tx engine.ReadTx) error {
		got, err := tx.ExecutionList(ctx, "r1")
		if err != nil {
			return err
		}
		equal(t, "executions after ExecutionUpdate (order unchanged)", got, want)
		return nil
	})
	update(t, s, func(ctx context.Context, tx engine.Tx) error {
		return tx.ExecutionUpdate(ctx, &engine.Execution{RunID: "r1", ExecutionID: "S2-1", Status: engine.ExecAbandoned, Data: nil})
	})
	want[1].Status, want[1].Data = engine.ExecAbandoned, nil
	view(t, s, func(ctx context.Context, tx engine.ReadTx) error {
		got, err := tx.ExecutionGet(ctx, "r1", "S2-1")
		if err != nil {
			return err
		}
		equal(t, "execution with nil Data", got, want[1])
		return nil
	})
	err := s.Update(ctxT(t), func(ctx context.Context, tx engine.Tx) error {
		return tx.ExecutionUpdate(ctx, &engine.Execution{RunID: "r1", ExecutionID: "absent", Status: engine.ExecCompleted})
	})
	isNotFound(t, "ExecutionUpdate of an absent execution", err)
}

// ---------------------------------------------------------------------------
// messages

func storedMsg(m *engine.Message) *engine.Message {
	c := *m
	c.CreatedAt = ms(c.CreatedAt)
	return &c
}

func peek(t *testing.T, s engine.Store, runID string, kind engine.ChannelKind, ch string, limit int) []*engine.Message {
	t.Helper()
	var out []*engine.Message
	view(t, s, func(ctx context.Context, tx engine.ReadTx) (err error) {
		out, err = tx.MessagePeek(ctx, runID, kind, ch, limit)
		return err
	})
	return out
}

func testMessageAppendPeek(t *testing.T, s engine.Store) {
	msgs := []*engine.Message{
		{RunID: "r1", Kind: engine.ChannelSignal, Channel: "c", Value: []byte(`"first"`), CreatedAt: at(time.Second)},
		{RunID: "r1", Kind: engine.ChannelSignal, Channel: "c", Value: nil, CreatedAt: at(0)},
		{RunID: "r1", Kind: engine.ChannelInternal, Channel: "c", Value: []byte(`"internal"`), CreatedAt: at(0)},
		{RunID: "r1", Kind: engine.ChannelSignal, Channel: "d", Value: []byte(`"d"`), CreatedAt: at(0)},
		{RunID: "r2", Kind: engine.ChannelSignal, Channel: "c", Value: []byte(`"r2"`), CreatedAt: at(0)},
		{RunID: "r1", Kind: engine.ChannelSignal, Channel: "c", Value: []byte{}, CreatedAt: at(-time.Second)},
	}
	update(t, s, func(ctx context.Context, tx engine.Tx) error {
		if err := tx.MessageAppend(ctx, nil); err != nil {
			return fmt.Errorf("empty MessageAppend: %w", err)
		}
		return tx.MessageAppend(ctx, msgs)
	})
	for i := 1; i < len(msgs); i++ {
		if msgs[i].ID <= msgs[i-1].ID {
			t.Fatalf("MessageAppend IDs not increasing in append order: %v", show(msgs))
		}
	}
	later := []*engine.Message{{RunID: "r1", Kind: engine.ChannelSignal, Channel: "c", Value: []byte(`"last"`), CreatedAt: at(0)}}
	update(t, s, func(ctx context.Context, tx engine.Tx) error { return tx.MessageAppend(ctx, later) })
	if later[0].ID <= msgs[len(msgs)-1].ID {
		t.Fatalf("later MessageAppend got ID %d, not above %d", later[0].ID, msgs[len(msgs)-1].ID)
	}

	fifo := []*engine.Message{storedMsg(msgs[0]), storedMsg(msgs[1]), storedMsg(msgs[5]), storedMsg(later[0])}
	equal(t, "MessagePeek limit 0", peek(t, s, "r1", engine.ChannelSignal, "c", 0), fifo)
	equal(t, "MessagePeek limit -1", peek(t, s, "r1", engine.ChannelSignal, "c", -1), fifo)
	equal(t, "MessagePeek limit 2", peek(t, s, "r1", engine.ChannelSignal, "c", 2), fifo[:2])
	equal(t, "MessagePeek limit 10", peek(t, s, "r1", engine.ChannelSignal, "c", 10), fifo)
	equal(t, "MessagePeek internal", peek(t, s, "r1", engine.ChannelInternal, "c", 0), []*engine.Message{storedMsg(msgs[2])})
	equal(t, "MessagePeek other channel", peek(t, s, "r1", engine.ChannelSignal, "d", 0), []*engine.Message{storedMsg(msgs[3])})
	equal(t, "MessagePeek other run", peek(t, s, "r2", engine.ChannelSignal, "c", 0), []*engine.Message{storedMsg(msgs[4])})
	if got := peek(t, s, "r1", engine.ChannelInternal, "d", 0); len(got) != 0 {
		t.Fatalf("MessagePeek of an empty channel = %v", show(got))
	}
}

func testMessageCountsAndDelete(t *testing.T, s engine.Store) {
	var msgs []*engine.Message
	add := func(run string, kind engine.ChannelKind, ch string, n int) {
		for i := 0; i < n; i++ {
			msgs = append(msgs, &engine.Message{RunID: run, Kind: kind, Channel: ch, Value: []byte(strconv.Itoa(len(msgs))), CreatedAt: at(0)})
		}
	}
	add("r1", engine.ChannelSignal, "a", 3)
	add("r1", engine.ChannelSignal, "b", 1)
	add("r1", engine.ChannelInternal, "a", 2)
	add("r1", engine.ChannelInternal, "c", 1)
	add("r2", engine.ChannelSignal, "a", 5)
	update(t, s, func(ctx context.Context, tx engine.Tx) error { return tx.MessageAppend(ctx, msgs) })

	counts := func(run string, kind engine.ChannelKind) map[string]int {
		t.Helper()
		var out map[string]int
		view(t, s, func(ctx context.Context, tx engine.ReadTx) (err error) {
			out, err = tx.MessageCounts(ctx, run, kind)
			return err
		})
		return out
	}
	equal(t, "MessageCounts signal", counts("r1", engine.ChannelSignal), map[string]int{"a": 3, "b": 1})
	equal(t, "MessageCounts internal", counts("r1", engine.ChannelInternal), map[string]int{"a": 2, "c": 1})
	if got := counts("absent", engine.ChannelSignal); len(got) != 0 {
		t.Fatalf("MessageCounts of an absent run = %v", got)
	}

	// Consume the first two of r1/signal/a and the only one of r1/signal/b.
	a := peek(t, s, "r1", engine.ChannelSignal, "a", 2)
	b := peek(t, s, "r1", engine.ChannelSignal, "b", 0)
	update(t, s, func(ctx context.Context, tx engine.Tx) error {
		if err := tx.MessageDelete(ctx, nil); err != nil {
			return fmt.Errorf("empty MessageDelete: %w", err)
		}
		return tx.MessageDelete(ctx, []int64{a[0].ID, b[0].ID, a[1].ID})
	})
	equal(t, "MessageCounts after delete", counts("r1", engine.ChannelSignal), map[string]int{"a": 1})
	equal(t, "MessagePeek after delete", peek(t, s, "r1", engine.ChannelSignal, "a", 0), []*engine.Message{storedMsg(msgs[2])})
	equal(t, "MessageCounts of another run after delete", counts("r2", engine.ChannelSignal), map[string]int{"a": 5})
	// Deleting again, or unknown IDs, is harmless.
	update(t, s, func(ctx context.Context, tx engine.Tx) error {
		return tx.MessageDelete(ctx, []int64{a[0].ID, 1 << 60})
	})
	equal(t, "MessageCounts after repeated delete", counts("r1", engine.ChannelSignal), map[string]int{"a": 1})

	// IDs are never reused, even after the newest message was deleted.
	last := msgs[len(msgs)-1]
	update(t, s, func(ctx context.Context, tx engine.Tx) error { return tx.MessageDelete(ctx, []int64{last.ID}) })
	again := []*engine.Message{{RunID: "r2", Kind: engine.ChannelSignal, Channel: "a", CreatedAt: at(0)}}
	update(t, s, func(ctx context.Context, tx engine.Tx) error { return tx.MessageAppend(ctx, again) })
	if again[0].ID <= last.ID {
		t.Fatalf("message ID %d reused or reordered after deleting ID %d", again[0].ID, last.ID)
	}
}

// ---------------------------------------------------------------------------
// attributes

func testDataAttributes(t *testing.T, s engine.Store) {
	update(t, s, func(ctx context.Context, tx engine.Tx) error {
		if err := tx.DataAttributeUpsert(ctx, "r1", nil); err != nil {
			return fmt.Errorf("empty DataAttributeUpsert: %w", err)
		}
		if err := tx.DataAttributeUpsert(ctx, "r1", []*engine.Attribute{
			{Key: "zeta", Value: []byte(`"z"`)},
			{Key: "alpha", Value: nil},
			{Key: "mid", Value: []byte{}},
			{Key: "Beta", Value: []byte(`2`)},
		}); err != nil {
			return err
		}
		return tx.DataAttributeUpsert(ctx, "r2", []*engine.Attribute{{Key: "alpha", Value: []byte(`"r2"`)}})
	})
	get := func(run string, keys []string) []*engine.Attribute {
		t.Helper()
		var out []*engine.Attribute
		view(t, s, func(ctx context.Context, tx engine.ReadTx) (err error) {
			out, err = tx.DataAttributeGet(ctx, run, keys)
			return err
		})
		return out
	}
	all := []*engine.Attribute{
		{Key: "Beta", Value: []byte(`2`)},
		{Key: "alpha", Value: nil},
		{Key: "mid", Value: []byte{}},
		{Key: "zeta", Value: []byte(`"z"`)},
	}
	equal(t, "DataAttributeGet(nil) in key order", get("r1", nil), all)
	equal(t, "DataAttributeGet(keys) skips unknown keys", get("r1", []string{"zeta", "unknown", "alpha"}), []*engine.Attribute{all[1], all[3]})
	if got := get("r1", []string{}); len(got) != 0 {
		t.Fatalf("DataAttributeGet(empty keys) = %v, want none", show(got))
	}
	if got := get("absent", nil); len(got) != 0 {
		t.Fatalf("DataAttributeGet of an absent run = %v", show(got))
	}
	equal(t, "DataAttributeGet other run", get("r2", nil), []*engine.Attribute{{Key: "alpha", Value: []byte(`"r2"`)}})

	// Upsert replaces values (including with nil) and adds new keys; a key
	// repeated in one call takes its last value.
	update(t, s, func(ctx context.Context, tx engine.Tx) error {
		return tx.DataAttributeUpsert(ctx, "r1", []*engine.Attribute{
			{Key: "alpha", Value: []byte(`"a2"`)},
			{Key: "zeta", Value: nil},
			{Key: "new", Value: []byte(`1`)},
			{Key: "new", Value: []byte(`2`)},
		})
	})
	equal(t, "DataAttributeGet after upsert", get("r1", nil), []*engine.Attribute{
		{Key: "Beta", Value: []byte(`2`)},
		{Key: "alpha", Value: []byte(`"a2"`)},
		{Key: "mid", Value: []byte{}},
		{Key: "new", Value: []byte(`2`)},
		{Key: "zeta", Value: nil},
	})
	equal(t, "DataAttributeGet other run after upsert", get("r2", nil), []*engine.Attribute{{Key: "alpha", Value: []byte(`"r2"`)}})
}

func testSearchAttributes(t *testing.T, s engine.Store) {
	tm := at(5 * time.Minute)
	attrs := []*engine.SearchAttribute{
		{Key: "kw", ValueType: search.Keyword, Raw: []byte(`{"k":1}`), String: ptr("hello")},
		{Key: "txt", ValueType: search.Text, Raw: []byte(`{}`), String: ptr("")},
		{Key: "int", ValueType: search.Int, Raw: []byte(`{"i":-5}`), Int: ptr(int64(-1) << 62)},
		{Key: "dbl", ValueType: search.Double, Raw: []byte(`{"d":1.5}`), Double: ptr(1.5e-300)},
		{Key: "boolT", ValueType: search.Bool, Raw: []byte(`{}`), Bool: ptr(true)},
		{Key: "boolF", ValueType: search.Bool, Raw: nil, Bool: ptr(false)},
		{Key: "dt", ValueType: search.Datetime, Raw: []byte(`{}`), Time: &tm},
		{Key: "arr", ValueType: search.KeywordArray, Raw: []byte(`{}`), Strings: []string{"b", "a", "b", ""}},
		{Key: "arrEmpty", ValueType: search.KeywordArray, Raw: []byte(`{}`), Strings: []string{}},
	}
	update(t, s, func(ctx context.Context, tx engine.Tx) error {
		if err := tx.SearchAttributeUpsert(ctx, "r1", nil); err != nil {
			return fmt.Errorf("empty SearchAttributeUpsert: %w", err)
		}
		if err := tx.SearchAttributeUpsert(ctx, "r1", attrs); err != nil {
			return err
		}
		return tx.SearchAttributeUpsert(ctx, "r2", []*engine.SearchAttribute{
			{Key: "arr", ValueType: search.KeywordArray, Raw: []byte(`{}`), Strings: []string{"other"}},
		})
	})
	get := func(run string, keys []string) []*engine.SearchAttribute {
		t.Helper()
		var out []*engine.SearchAttribute
		view(t, s, func(ctx context.Context, tx engine.ReadTx) (err error) {
			out, err = tx.SearchAttributeGet(ctx, run, keys)
			return err
		})
		return out
	}
	byKey := map[string]*engine.SearchAttribute{}
	var keys []string
	for _, a := range attrs {
		c := *a
		if c.Time != nil {
			c.Time = ptr(c.Time.UTC()) // kept to the nanosecond
		}
		byKey[a.Key] = &c
		keys = append(keys, a.Key)
	}
	sort.Strings(keys)
	var want []*engine.SearchAttribute
	for _, k := range keys {
		want = append(want, byKey[k])
	}
	equal(t, "SearchAttributeGet(nil) in key order", get("r1", nil), want)
	equal(t, "SearchAttributeGet(keys)", get("r1", []string{"kw", "unknown", "arr"}), []*engine.SearchAttribute{byKey["arr"], byKey["kw"]})
	if got := get("r1", []string{}); len(got) != 0 {
		t.Fatalf("SearchAttributeGet(empty keys) = %v, want none", show(got))
	}
	if got := get("absent", nil); len(got) != 0 {
		t.Fatalf("SearchAttributeGet of an absent run = %v", show(got))
	}
	if got := get("r1", []string{"dt"}); got[0].Time.Location() != time.UTC {
		t.Fatalf("DATETIME not returned in UTC: %v", got[0].Time)
	}

	// Replace: an array shrinks, an array becomes a keyword, a keyword becomes an int.
	update(t, s, func(ctx context.Context, tx engine.Tx) error {
		return tx.SearchAttributeUpsert(ctx, "r1", []*engine.SearchAttribute{
			{Key: "arr", ValueType: search.KeywordArray, Raw: []byte(`[1]`), Strings: []string{"z"}},
			{Key: "arrEmpty", ValueType: search.Keyword, Raw: []byte(`"k"`), String: ptr("k")},
			{Key: "kw", ValueType: search.Int, Raw: []byte(`7`), Int: ptr(int64(7))},
		})
	})
	equal(t, "SearchAttributeGet after replace", get("r1", []string{"arr", "arrEmpty", "kw"}), []*engine.SearchAttribute{
		{Key: "arr", ValueType: search.KeywordArray, Raw: []byte(`[1]`), Strings: []string{"z"}},
		{Key: "arrEmpty", ValueType: search.Keyword, Raw: []byte(`"k"`), String: ptr("k")},
		{Key: "kw", ValueType: search.Int, Raw: []byte(`7`), Int: ptr(int64(7))},
	})
	equal(t, "SearchAttributeGet other run", get("r2", nil), []*engine.SearchAttribute{
		{Key: "arr", ValueType: search.KeywordArray, Raw: []byte(`{}`), Strings: []string{"other"}},
	})
}

// testReadForCall checks engine.CallReader, for the stores that have it:
// it returns what the reads of a View return (run, execution, all data and
// search attributes in key order, keyword arrays with their elements), and
// nil for an absent run or execution, after the same transaction's writes.
func testReadForCall(t *testing.T, s engine.Store) {
	cr, ok := s.(engine.CallReader)
	if !ok {
		t.Skip("the store reads call inputs through View")
	}
	tm := at(time.Minute)
	update(t, s, func(ctx context.Context, tx engine.Tx) error {
		for _, id := range []string{"r1", "r2"} {
			if err := tx.RunInsert(ctx, newRun(id)); err != nil {
				return err
			}
		}
		if err := tx.ExecutionInsert(ctx, []*engine.Execution{
			{RunID: "r1", ExecutionID: "S1-1", StateID: "S1", Status: engine.ExecExecute, CreatedAt: at(0), Data: []byte(`{"x":1}`)},
			{RunID: "r2", ExecutionID: "S1-1", StateID: "S1", Status: engine.ExecWaitUntil, CreatedAt: at(0)},
		}); err != nil {
			return err
		}
		if err := tx.DataAttributeUpsert(ctx, "r1", []*engine.Attribute{
			{Key: "b", Value: []byte(`2`)}, {Key: "a", Value: []byte(`1`)}, {Key: "c"},
		}); err != nil {
			return err
		}
		if err := tx.DataAttributeUpsert(ctx, "r2", []*engine.Attribute{{Key: "other", Value: []byte(`3`)}}); err != nil {
			return err
		}
		if err := tx.SearchAttributeUpsert(ctx, "r1", []*engine.SearchAttribute{
			{Key: "kw", ValueType: search.Keyword, Raw: []byte(`{}`), String: ptr("k")},
			{Key: "arr", ValueType: search.KeywordArray, Raw: []byte(`{}`), Strings: []string{"y", "x"}},
			{Key: "dt", ValueType: search.Datetime, Raw: []byte(`{}`), Time: &tm},
			{Key: "none", ValueType: search.KeywordArray, Raw: []byte(`{}`), Strings: []string{}},
			{Key: "n", ValueType: search.Int, Raw: []byte(`{}`), Int: ptr(int64(-7))},
			{Key: "d", ValueType: search.Double, Raw: []byte(`{}`), Double: ptr(2.5)},
			{Key: "ok", ValueType: search.Bool, Raw: []byte(`{}`), Bool: ptr(false)},
			{Key: "txt", ValueType: search.Text, Raw: []byte(`{}`), String: ptr("")},
		}); err != nil {
			return err
		}
		return tx.SearchAttributeUpsert(ctx, "r2", []*engine.SearchAttribute{
			{Key: "arr", ValueType: search.KeywordArray, Raw: []byte(`{}`), Strings: []string{"r2"}},
		})
	})
	var want engine.CallRead
	view(t, s, func(ctx context.Context, tx engine.ReadTx) (err error) {
		if want.Run, err = tx.RunGet(ctx, "r1"); err != nil {
			return err
		}
		if want.Execution, err = tx.ExecutionGet(ctx, "r1", "S1-1"); err != nil {
			return err
		}
		if want.DataAttributes, err = tx.DataAttributeGet(ctx, "r1", nil); err != nil {
			return err
		}
		want.SearchAttributes, err = tx.SearchAttributeGet(ctx, "r1", nil)
		return err
	})
	got, err := cr.ReadForCall(ctxT(t), "r1", "S1-1")
	if err != nil {
		t.Fatal(err)
	}
	equal(t, "ReadForCall", got, &want)
	if len(got.DataAttributes) != 3 || len(got.SearchAttributes) != 8 || len(got.SearchAttributes[0].Strings) != 2 {
		t.Fatalf("ReadForCall read %s", show(got))
	}

	got, err = cr.ReadForCall(ctxT(t), "r1", "absent")
	if err != nil {
		t.Fatal(err)
	}
	if got.Run == nil || got.Execution != nil {
		t.Fatalf("ReadForCall of an absent execution: %s", show(got))
	}
	got, err = cr.ReadForCall(ctxT(t), "absent", "S1-1")
	if err != nil {
		t.Fatal(err)
	}
	if got.Run != nil || got.Execution != nil || len(got.DataAttributes) != 0 || len(got.SearchAttributes) != 0 {
		t.Fatalf("ReadForCall of an absent run: %s", show(got))
	}
}

// testTaskTake checks Tx.TaskTake: it locks and returns the run, removes
// the task only for its lease owner, and returns the execution as stored;
// an absent run or execution is nil, and an absent run's task is removed
// all the same. What it did is part of the transaction: a rollback keeps
// the task.
func testTaskTake(t *testing.T, s engine.Store) {
	insertRun(t, s, newRun("r1"))
	update(t, s, func(ctx context.Context, tx engine.Tx) error {
		return tx.ExecutionInsert(ctx, []*engine.Execution{
			{RunID: "r1", ExecutionID: "S1-1", StateID: "S1", Status: engine.ExecExecute, CreatedAt: at(0), Data: []byte(`{"a":1}`)},
		})
	})
	mine := newTask("r1", "S1-1", engine.TaskExecute, at(0))
	mine.LeaseOwner, mine.LeaseExpiresAt = "node-a", at(time.Minute)
	other := newTask("r1", "S1-1", engine.TaskExecute, at(0))
	other.LeaseOwner, other.LeaseExpiresAt = "node-b", at(time.Minute)
	orphan := newTask("gone", "S1-1", engine.TaskExecute, at(0))
	timeout := newTask("r1", "", engine.TaskTimeout, at(0))
	insertTasks(t, s, mine, other, orphan, timeout)
	var wantRun *engine.Run
	view(t, s, func(ctx context.Context, tx engine.ReadTx) (err error) {
		wantRun, err = tx.RunGet(ctx, "r1")
		return err
	})

	errRollback := errors.New("roll back")
	err := s.Update(ctxT(t), func(ctx context.Context, tx engine.Tx) error {
		got, err := tx.TaskTake(ctx, "r1", mine.ID, "node-a", "S1-1")
		if err != nil {
			return err
		}
		if !got.Removed || got.Execution == nil || string(got.Execution.Data) != `{"a":1}` {
			return fmt.Errorf("TaskTake of a held task: %s", show(got))
		}
		return errRollback
	})
	if !errors.Is(err, errRollback) {
		t.Fatalf("Update = %v, want the rollback error", err)
	}
	if n := len(listTasks(t, s, "r1")); n != 3 {
		t.Fatalf("after a rolled-back TaskTake the run has %d tasks, want 3", n)
	}

	update(t, s, func(ctx context.Context, tx engine.Tx) error {
		got, err := tx.TaskTake(ctx, "r1", mine.ID, "node-a", "S1-1")
		if err != nil {
			return err
		}
		equal(t, "TaskTake run", got.Run, wantRun)
		if !got.Removed {
			t.Errorf("TaskTake by the lease owner removed nothing")
		}
		if got.Execution == nil || got.Execution.Status != engine.ExecExecute || got.Execution.StateID != "S1" {
			t.Errorf("TaskTake execution = %s", show(got.Execution))
		}

		got, err = tx.TaskTake(ctx, "r1", other.ID, "node-a", "absent")
		if err != nil {
			return err
		}
		if got.Run == nil || got.Removed || got.Execution != nil {
			t.Errorf("TaskTake of another node's task with an absent execution: %s", show(got))
		}

		got, err = tx.TaskTake(ctx, "gone", orphan.ID, "", "S1-1")
		if err != nil {
			return err
		}
		if got.Run != nil || !got.Removed || got.Execution != nil {
			t.Errorf("TaskTake of an absent run's task: %s", show(got))
		}

		got, err = tx.TaskTake(ctx, "r1", timeout.ID, "", "")
		if err != nil {
			return err
		}
		if got.Run == nil || !got.Removed || got.Execution != nil {
			t.Errorf("TaskTake without an execution: %s", show(got))
		}
		return nil
	})
	equal(t, "tasks left", listTasks(t, s, "r1"), []*engine.Task{stored(other)})
	if n := len(listTasks(t, s, "gone")); n != 0 {
		t.Fatalf("the absent run's task is still stored")
	}
}

// ---------------------------------------------------------------------------
// tasks

func testTaskInsertList(t *testing.T, s engine.Store) {
	tasks := []*engine.Task{
		newTask("r1", "S1-1", engine.TaskExecute, at(2*time.Second)),
		newTask("r1", "", engine.TaskTimeout, at(time.Hour)),
		newTask("r1", "S2-1", engine.TaskTimer, at(time.Second)),
		newTask("r1", "S3-1", engine.TaskWaitUntil, at(time.Second)), // same due: ID order
		newTask("r2", "S1-1", engine.TaskWaitUntil, at(0)),
	}
	tasks[0].Attempt, tasks[0].FirstAttemptAt = 3, at(-time.Minute)
	tasks[1].Data = nil
	tasks[2].Data = []byte{}
	// A task may be inserted already leased (the inserting node runs it at once).
	tasks[3].LeaseOwner, tasks[3].LeaseExpiresAt = "node-a", at(time.Minute)
	insertTasks(t, s, tasks...)
	for i := 1; i < len(tasks); i++ {
		if tasks[i].ID <= tasks[i-1].ID {
			t.Fatalf("TaskInsert IDs not increasing: %v", ids(tasks))
		}
	}
	equal(t, "TaskList oldest due first", listTasks(t, s, "r1"),
		[]*engine.Task{stored(tasks[2]), stored(tasks[3]), stored(tasks[0]), stored(tasks[1])})
	equal(t, "TaskList other run", listTasks(t, s, "r2"), []*engine.Task{stored(tasks[4])})
	if got := listTasks(t, s, "absent"); len(got) != 0 {
		t.Fatalf("TaskList of an absent run = %v", show(got))
	}
	update(t, s, func(ctx context.Context, tx engine.Tx) error {
		if err := tx.TaskInsert(ctx, nil); err != nil {
			return fmt.Errorf("empty TaskInsert: %w", err)
		}
		return nil
	})

	// IDs are never reused, even after the newest task was deleted.
	last := tasks[len(tasks)-1]
	update(t, s, func(ctx context.Context, tx engine.Tx) error {
		ok, err := tx.TaskDelete(ctx, last.ID, "")
		if err == nil && !ok {
			err = errors.New("TaskDelete of an unleased task reported false")
		}
		return err
	})
	again := newTask("r2", "S1-1", engine.TaskWaitUntil, at(0))
	insertTasks(t, s, again)
	if again.ID <= last.ID {
		t.Fatalf("task ID %d reused or reordered after deleting ID %d", again.ID, last.ID)
	}
}

func taskDelete(t *testing.T, s engine.Store, id int64, owner string) bool {
	t.Helper()
	var ok bool
	update(t, s, func(ctx context.Context, tx engine.Tx) (err error) {
		ok, err = tx.TaskDelete(ctx, id, owner)
		return err
	})
	return ok
}

func testTaskDelete(t *testing.T, s engine.Store) {
	free := newTask("r1", "S1-1", engine.TaskWaitUntil, at(0))
	held := newTask("r1", "S2-1", engine.TaskWaitUntil, at(0))
	held.LeaseOwner, held.LeaseExpiresAt = "A", at(time.Minute)
	insertTasks(t, s, free, held)

	if taskDelete(t, s, free.ID, "A") {
		t.Fatalf("TaskDelete by an owner of an unleased task succeeded")
	}
	if taskDelete(t, s, held.ID, "") {
		t.Fatalf("TaskDelete with owner \"\" of a leased task succeeded")
	}
	if taskDelete(t, s, held.ID, "B") {
		t.Fatalf("TaskDelete by another owner succeeded")
	}
	equal(t, "tasks after refused deletes", ids(listTasks(t, s, "r1")), []int64{free.ID, held.ID})
	if !taskDelete(t, s, free.ID, "") {
		t.Fatalf("TaskDelete with owner \"\" of an unleased task failed")
	}
	if !taskDelete(t, s, held.ID, "A") {
		t.Fatalf("TaskDelete by the lease owner failed")
	}
	if taskDelete(t, s, held.ID, "A") {
		t.Fatalf("TaskDelete of a deleted task reported true")
	}
	if taskDelete(t, s, 1<<60, "") {
		t.Fatalf("TaskDelete of an unknown id reported true")
	}
	if got := listTasks(t, s, "r1"); len(got) != 0 {
		t.Fatalf("tasks left: %v", show(got))
	}

	// An owner whose lease was taken over by a claim can no longer delete.
	tk := newTask("r1", "S3-1", engine.TaskExecute, at(0))
	tk.LeaseOwner, tk.LeaseExpiresAt = "A", at(time.Second)
	insertTasks(t, s, tk)
	got := claim(t, s, engine.TaskClaimParams{Owner: "B", Now: at(time.Minute), DueBefore: at(time.Minute), LeaseDuration: time.Minute, Limit: 10})
	equal(t, "claimed after expiry", ids(got), []int64{tk.ID})
	if taskDelete(t, s, tk.ID, "A") {
		t.Fatalf("TaskDelete by the previous owner after a takeover succeeded")
	}
	if !taskDelete(t, s, tk.ID, "B") {
		t.Fatalf("TaskDelete by the new owner failed")
	}
}

func taskReschedule(t *testing.T, s engine.Store, tk *engine.Task, owner string) bool {
	t.Helper()
	var ok bool
	update(t, s, func(ctx context.Context, tx engine.Tx) (err error) {
		ok, err = tx.TaskReschedule(ctx, tk, owner)
		return err
	})
	return ok
}

func testTaskReschedule(t *testing.T, s engine.Store) {
	tk := newTask("r1", "S1-1", engine.TaskExecute, at(0))
	tk.LeaseOwner, tk.LeaseExpiresAt = "A", at(time.Minute)
	tk.FirstAttemptAt = at(-time.Hour)
	insertTasks(t, s, tk)
	orig := stored(tk)

	next := *tk
	next.DueAt, next.Attempt, next.LeaseOwner, next.LeaseExpiresAt = at(10*time.Second), 2, "", time.Time{}
	// Fields other than DueAt, Attempt and the lease are not written.
	next.Data, next.FirstAttemptAt, next.Kind = []byte(`"changed"`), at(time.Hour), engine.TaskTimer

	if taskReschedule(t, s, &next, "B") {
		t.Fatalf("TaskReschedule by another owner succeeded")
	}
	if taskReschedule(t, s, &next, "") {
		t.Fatalf("TaskReschedule with owner \"\" of a leased task succeeded")
	}
	equal(t, "task after refused reschedule", taskByID(t, s, "r1", tk.ID), orig)

	if !taskReschedule(t, s, &next, "A") {
		t.Fatalf("TaskReschedule by the owner failed")
	}
	want := *orig
	want.DueAt, want.Attempt, want.LeaseOwner, want.LeaseExpiresAt = ms(next.DueAt), 2, "", time.Time{}
	equal(t, "task after reschedule (lease released)", taskByID(t, s, "r1", tk.ID), &want)

	// Now unleased: owner "" matches; reschedule it leased to C.
	next.LeaseOwner, next.LeaseExpiresAt, next.Attempt = "C", at(2*time.Minute), 3
	if taskReschedule(t, s, &next, "A") {
		t.Fatalf("TaskReschedule by the former owner of an unleased task succeeded")
	}
	if !taskReschedule(t, s, &next, "") {
		t.Fatalf("TaskReschedule with owner \"\" of an unleased task failed")
	}
	want.LeaseOwner, want.LeaseExpiresAt, want.Attempt = "C", ms(at(2*time.Minute)), 3
	equal(t, "task after reschedule (leased)", taskByID(t, s, "r1", tk.ID), &want)

	gone := next
	gone.ID = 1 << 60
	if taskReschedule(t, s, &gone, "C") {
		t.Fatalf("TaskReschedule of an unknown id reported true")
	}
}

func testTaskDeleteByRunAndExecution(t *testing.T, s engine.Store) {
	mk := func(run, exec string, kind engine.TaskKind) *engine.Task { return newTask(run, exec, kind, at(0)) }
	r1 := []*engine.Task{
		mk("r1", "S1-1", engine.TaskWaitUntil), // 0
		mk("r1", "S1-1", engine.TaskTimer),     // 1
		mk("r1", "S1-1", engine.TaskTimer),     // 2
		mk("r1", "S2-1", engine.TaskTimer),     // 3
		mk("r1", "S2-1", engine.TaskExecute),   // 4
		mk("r1", "", engine.TaskTimeout),       // 5
	}
	r1[1].LeaseOwner, r1[1].LeaseExpiresAt = "A", at(time.Minute) // leases do not protect from these deletes
	r2 := []*engine.Task{mk("r2", "S1-1", engine.TaskTimer), mk("r2", "", engine.TaskTimeout)}
	insertTasks(t, s, append(append([]*engine.Task{}, r1...), r2...)...)

	do := func(fn func(ctx context.Context, tx engine.Tx) error) { t.Helper(); update(t, s, fn) }
	do(func(ctx context.Context, tx engine.Tx) error {
		return tx.TaskDeleteByExecution(ctx, "r1", "S1-1", engine.TaskTimer)
	})
	equal(t, "after TaskDeleteByExecution(S1-1, TIMER)", ids(listTasks(t, s, "r1")), ids([]*engine.Task{r1[0], r1[3], r1[4], r1[5]}))
	do(func(ctx context.Context, tx engine.Tx) error {
		return tx.TaskDeleteByExecution(ctx, "r1", "S2-1")
	})
	equal(t, "after TaskDeleteByExecution(S2-1)", ids(listTasks(t, s, "r1")), ids([]*engine.Task{r1[0], r1[5]}))
	do(func(ctx context.Context, tx engine.Tx) error {
		return tx.TaskDeleteByRun(ctx, "r1", engine.TaskTimer, engine.TaskExecute)
	})
	equal(t, "after TaskDeleteByRun(TIMER, EXECUTE)", ids(listTasks(t, s, "r1")), ids([]*engine.Task{r1[0], r1[5]}))
	do(func(ctx context.Context, tx engine.Tx) error {
		return tx.TaskDeleteByRun(ctx, "r1", engine.TaskTimeout, engine.TaskTimer)
	})
	equal(t, "after TaskDeleteByRun(TIMEOUT, TIMER)", ids(listTasks(t, s, "r1")), ids([]*engine.Task{r1[0]}))
	do(func(ctx context.Context, tx engine.Tx) error {
		return tx.TaskDeleteByRun(ctx, "r1")
	})
	if got := listTasks(t, s, "r1"); len(got) != 0 {
		t.Fatalf("after TaskDeleteByRun(all) tasks left: %v", show(got))
	}
	equal(t, "other run untouched", ids(listTasks(t, s, "r2")), ids(r2))
	do(func(ctx context.Context, tx engine.Tx) error {
		if err := tx.TaskDeleteByExecution(ctx, "r2", "absent"); err != nil {
			return err
		}
		return tx.TaskDeleteByRun(ctx, "absent")
	})
	equal(t, "other run untouched by no-op deletes", ids(listTasks(t, s, "r2")), ids(r2))
}

func testTaskClaimDueAndOrder(t *testing.T, s engine.Store) {
	now := at(0)
	late := newTask("r1", "late", engine.TaskExecute, now.Add(-time.Second))
	exact := newTask("r1", "exact", engine.TaskExecute, now)
	future := newTask("r1", "future", engine.TaskExecute, now.Add(time.Second))
	early := newTask("r2", "early", engine.TaskTimer, now.Add(-time.Hour))
	insertTasks(t, s, late, exact, future, early)

	got := claim(t, s, engine.TaskClaimParams{Owner: "A", Now: now, DueBefore: now, LeaseDuration: time.Minute, Limit: 100})
	equal(t, "claimed oldest due first, due at or before DueBefore", ids(got), []int64{early.ID, late.ID, exact.ID})
	for i, tk := range []*engine.Task{early, late, exact} {
		want := stored(tk)
		want.LeaseOwner = "A"
		want.LeaseExpiresAt = ms(now.Add(time.Minute))
		equal(t, "claimed task", got[i], want)
		equal(t, "claimed task as stored", taskByID(t, s, tk.RunID, tk.ID), want)
	}
	// A claim that looks ahead (DueBefore after Now) leases a future task
	// until its due time plus the lease duration.
	got = claim(t, s, engine.TaskClaimParams{Owner: "B", Now: now, DueBefore: now.Add(5 * time.Second), LeaseDuration: time.Minute, Limit: 100})
	equal(t, "look-ahead claim", ids(got), []int64{future.ID})
	equal(t, "look-ahead lease expiry", got[0].LeaseExpiresAt, ms(future.DueAt.Add(time.Minute)))
	if got := claim(t, s, engine.TaskClaimParams{Owner: "C", Now: now, DueBefore: now.Add(time.Hour), LeaseDuration: time.Minute, Limit: 100}); len(got) != 0 {
		t.Fatalf("claimed leased tasks: %v", show(got))
	}
}

func testTaskClaimLeaseRules(t *testing.T, s engine.Store) {
	now := at(0)
	tk := newTask("r1", "S1-1", engine.TaskExecute, now.Add(-time.Minute))
	tk.Attempt = 1
	insertTasks(t, s, tk)
	p := func(owner string, now time.Time) engine.TaskClaimParams {
		return engine.TaskClaimParams{Owner: owner, Now: now, DueBefore: now, LeaseDuration: 30 * time.Second, Limit: 10}
	}

	got := claim(t, s, p("A", now))
	equal(t, "first claim", ids(got), []int64{tk.ID})
	equal(t, "first claim of an unleased task keeps Attempt", got[0].Attempt, 1)
	equal(t, "first claim expiry", got[0].LeaseExpiresAt, ms(now.Add(30*time.Second)))

	// Still leased (expires at now+30s): not claimable before, nor exactly at, expiry.
	if got := claim(t, s, p("B", now.Add(29*time.Second))); len(got) != 0 {
		t.Fatalf("claimed an unexpired lease: %v", show(got))
	}
	if got := claim(t, s, p("B", now.Add(30*time.Second))); len(got) != 0 {
		t.Fatalf("claimed a lease at its expiry instant: %v", show(got))
	}
	// Expired: another owner takes it over and the attempt advances.
	later := now.Add(31 * time.Second)
	got = claim(t, s, p("B", later))
	equal(t, "claim after expiry", ids(got), []int64{tk.ID})
	want := stored(tk)
	want.Attempt = 2
	want.LeaseOwner = "B"
	want.LeaseExpiresAt = ms(later.Add(30 * time.Second))
	equal(t, "task re-claimed after expiry", got[0], want)
	equal(t, "task as stored", taskByID(t, s, "r1", tk.ID), want)

	// The same owner re-claiming its own expired lease also advances the attempt.
	evenLater := later.Add(time.Minute)
	got = claim(t, s, p("B", evenLater))
	equal(t, "re-claim by the same owner", ids(got), []int64{tk.ID})
	equal(t, "attempt after second expiry", got[0].Attempt, 3)

	// A rescheduled (unleased) task is claimed without advancing the attempt.
	update(t, s, func(ctx context.Context, tx engine.Tx) error {
		r := *got[0]
		r.LeaseOwner, r.LeaseExpiresAt, r.DueAt, r.Attempt = "", time.Time{}, evenLater, 4
		ok, err := tx.TaskReschedule(ctx, &r, "B")
		if err == nil && !ok {
			err = errors.New("TaskReschedule by the owner reported false")
		}
		return err
	})
	got = claim(t, s, p("C", evenLater))
	equal(t, "claim of a rescheduled task", ids(got), []int64{tk.ID})
	equal(t, "attempt of a rescheduled task", got[0].Attempt, 4)
}

func testTaskClaimLimit(t *testing.T, s engine.Store) {
	var tasks []*engine.Task
	for i := 0; i < 10; i++ {
		// Inserted newest due first, so that ID order and due order differ.
		tasks = append(tasks, newTask("r1", fmt.Sprintf("S-%d", i), engine.TaskTimer, at(-time.Duration(i)*time.Second)))
	}
	insertTasks(t, s, tasks...)
	p := engine.TaskClaimParams{Owner: "A", Now: at(0), DueBefore: at(0), LeaseDuration: time.Minute, Limit: 3}
	equal(t, "first claim of 3", ids(claim(t, s, p)), ids([]*engine.Task{tasks[9], tasks[8], tasks[7]}))
	equal(t, "second claim of 3", ids(claim(t, s, p)), ids([]*engine.Task{tasks[6], tasks[5], tasks[4]}))
	p.Limit = 0 // no limit
	equal(t, "claim without limit", ids(claim(t, s, p)), ids([]*engine.Task{tasks[3], tasks[2], tasks[1], tasks[0]}))
	if got := claim(t, s, p); len(got) != 0 {
		t.Fatalf("claim when all are leased = %v", show(got))
	}
}

// testTaskClaimExpiredFirst: when the limit binds, tasks whose lease expired
// (work a dead owner had started) are taken before unleased ones, and the
// result is still sorted oldest due first.
func testTaskClaimExpiredFirst(t *testing.T, s engine.Store) {
	now := at(0)
	unleasedOld := newTask("r1", "old", engine.TaskTimer, now.Add(-time.Hour))
	unleasedNew := newTask("r1", "new", engine.TaskTimer, now.Add(-time.Second))
	expired := newTask("r1", "expired", engine.TaskExecute, now.Add(-time.Minute))
	expired.LeaseOwner, expired.LeaseExpiresAt = "dead", now.Add(-time.Second)
	inFlight := newTask("r1", "inflight", engine.TaskExecute, now.Add(-2*time.Hour))
	inFlight.LeaseOwner, inFlight.LeaseExpiresAt = "alive", now.Add(time.Minute)
	insertTasks(t, s, unleasedOld, unleasedNew, expired, inFlight)

	p := engine.TaskClaimParams{Owner: "A", Now: now, DueBefore: now, LeaseDuration: time.Minute, Limit: 2}
	got := claim(t, s, p)
	equal(t, "claim of 2 with an expired lease", ids(got), []int64{unleasedOld.ID, expired.ID})
	equal(t, "attempt of the expired task", got[1].Attempt, expired.Attempt+1)
	equal(t, "remaining claim", ids(claim(t, s, p)), []int64{unleasedNew.ID})
}

// testTaskClaimConcurrent has several claimers drain one queue at once: no
// task may be handed out twice, and together they must get all of them.
func testTaskClaimConcurrent(t *testing.T, s engine.Store) {
	const nTasks, nClaimers, limit = 500, 8, 7
	var tasks []*engine.Task
	for i := 0; i < nTasks; i++ {
		tasks = append(tasks, newTask(fmt.Sprintf("r%d", i%17), fmt.Sprintf("S-%d", i), engine.TaskWaitUntil, at(-time.Duration(i%50)*time.Millisecond)))
	}
	insertTasks(t, s, tasks...)

	var (
		mu    sync.Mutex
		owner = map[int64]string{}
		dupes []string
		wg    sync.WaitGroup
		start = make(chan struct{})
	)
	errs := make(chan error, nClaimers)
	for c := 0; c < nClaimers; c++ {
		name := fmt.Sprintf("claimer-%d", c)
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for {
				got, err := s.TaskClaim(context.Background(), engine.TaskClaimParams{Owner: name, Now: at(0), DueBefore: at(0), LeaseDuration: time.Minute, Limit: limit})
				if err != nil {
					errs <- err
					return
				}
				if len(got) == 0 {
					return
				}
				if len(got) > limit {
					errs <- fmt.Errorf("claim returned %d tasks, limit %d", len(got), limit)
					return
				}
				mu.Lock()
				for _, tk := range got {
					if prev, ok := owner[tk.ID]; ok {
						dupes = append(dupes, fmt.Sprintf("task %d to %s and %s", tk.ID, prev, name))
					}
					owner[tk.ID] = name
					if tk.LeaseOwner != name {
						dupes = append(dupes, fmt.Sprintf("task %d returned to %s with lease owner %q", tk.ID, name, tk.LeaseOwner))
					}
				}
				mu.Unlock()
			}
		}()
	}
	close(start)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	waitDone(t, "concurrent claimers", done)
	close(errs)
	for err := range errs {
		t.Fatalf("TaskClaim: %v", err)
	}
	if len(dupes) > 0 {
		t.Fatalf("tasks claimed twice: %v", dupes)
	}
	if len(owner) != nTasks {
		t.Fatalf("claimers got %d distinct tasks, want %d", len(owner), nTasks)
	}
	// The stored lease owner is the claimer that received the task.
	for r := 0; r < 17; r++ {
		for _, tk := range listTasks(t, s, fmt.Sprintf("r%d", r)) {
			if tk.LeaseOwner != owner[tk.ID] {
				t.Fatalf("task %d stored with lease owner %q, handed to %q", tk.ID, tk.LeaseOwner, owner[tk.ID])
			}
		}
	}
}

func testTaskRenewLeases(t *testing.T, s engine.Store) {
	now := at(0)
	a1 := newTask("r1", "a1", engine.TaskExecute, now.Add(-time.Minute))
	a2 := newTask("r1", "a2", engine.TaskTimer, now.Add(time.Hour)) // due after now: renewed from its due time
	b := newTask("r1", "b", engine.TaskExecute, now.Add(-time.Minute))
	free := newTask("r1", "free", engine.TaskExecute, now.Add(-time.Minute))
	orphan := newTask("r1", "orphan", engine.TaskExecute, now.Add(-time.Minute)) // A's, but A does not know it
	orphan.LeaseOwner, orphan.LeaseExpiresAt = "A", now.Add(time.Second)
	a1.LeaseOwner, a1.LeaseExpiresAt = "A", now.Add(time.Second)
	a2.LeaseOwner, a2.LeaseExpiresAt = "A", now.Add(time.Hour+time.Second)
	b.LeaseOwner, b.LeaseExpiresAt = "B", now.Add(time.Second)
	insertTasks(t, s, a1, a2, b, free, orphan)
	held := []int64{a1.ID, a2.ID, b.ID, free.ID} // b and free are not A's: listing them changes nothing

	renewAt := now.Add(10 * time.Second)
	n, err := s.TaskRenewLeases(ctxT(t), "A", held, renewAt, time.Minute)
	if err != nil {
		t.Fatalf("TaskRenewLeases: %v", err)
	}
	equal(t, "renewed count", n, int64(2))
	equal(t, "renewed past-due lease", taskByID(t, s, "r1", a1.ID).LeaseExpiresAt, ms(renewAt.Add(time.Minute)))
	equal(t, "renewed future lease", taskByID(t, s, "r1", a2.ID).LeaseExpiresAt, ms(a2.DueAt.Add(time.Minute)))
	equal(t, "other owner's lease", taskByID(t, s, "r1", b.ID), stored(b))
	equal(t, "unleased task", taskByID(t, s, "r1", free.ID), stored(free))
	equal(t, "a lease of the owner's that it did not list", taskByID(t, s, "r1", orphan.ID), stored(orphan))
	equal(t, "owner after renew", taskByID(t, s, "r1", a1.ID).LeaseOwner, "A")
	equal(t, "attempt after renew", taskByID(t, s, "r1", a1.ID).Attempt, a1.Attempt)

	// Leases already at their target are not written again (a sleeping
	// timer costs nothing to renew).
	if n, err = s.TaskRenewLeases(ctxT(t), "A", held, renewAt, time.Minute); err != nil || n != 0 {
		t.Fatalf("TaskRenewLeases again at the same time = %d, %v; want 0 leases extended", n, err)
	}
	equal(t, "future lease after a second renew", taskByID(t, s, "r1", a2.ID).LeaseExpiresAt, ms(a2.DueAt.Add(time.Minute)))

	n, err = s.TaskRenewLeases(ctxT(t), "nobody", held, renewAt, time.Minute)
	if err != nil || n != 0 {
		t.Fatalf("TaskRenewLeases(nobody) = %d, %v", n, err)
	}
	// A renewed lease is not claimable until its new expiry; the unlisted
	// one expired and is.
	if got := claim(t, s, engine.TaskClaimParams{Owner: "C", Now: now.Add(30 * time.Second), DueBefore: now.Add(30 * time.Second), LeaseDuration: time.Minute, Limit: 10}); !reflect.DeepEqual(ids(got), []int64{b.ID, free.ID, orphan.ID}) {
		t.Fatalf("claim after renew = %v, want tasks %d, %d and %d", show(got), b.ID, free.ID, orphan.ID)
	}
	if n, err := s.TaskRenewLeases(ctxT(t), "A", nil, renewAt, time.Minute); err != nil || n != 0 {
		t.Fatalf("TaskRenewLeases of no tasks = %d, %v", n, err)
	}
}

func testTaskReleaseLeases(t *testing.T, s engine.Store) {
	now := at(0)
	a := newTask("r1", "a", engine.TaskExecute, now.Add(-time.Minute))
	b1 := newTask("r1", "b1", engine.TaskExecute, now.Add(-time.Minute))
	b2 := newTask("r2", "b2", engine.TaskTimer, now.Add(-time.Minute))
	free := newTask("r1", "free", engine.TaskExecute, now.Add(-time.Minute))
	a.LeaseOwner, a.LeaseExpiresAt = "A", now.Add(time.Hour)
	b1.LeaseOwner, b1.LeaseExpiresAt = "B", now.Add(time.Hour)
	b2.LeaseOwner, b2.LeaseExpiresAt = "C", now.Add(time.Hour)
	b1.Attempt = 2
	insertTasks(t, s, a, b1, b2, free)

	n, err := s.TaskReleaseLeases(ctxT(t), "A")
	if err != nil {
		t.Fatalf("TaskReleaseLeases: %v", err)
	}
	equal(t, "released count", n, int64(2))
	equal(t, "kept lease", taskByID(t, s, "r1", a.ID), stored(a))
	equal(t, "unleased task", taskByID(t, s, "r1", free.ID), stored(free))
	for _, tk := range []*engine.Task{b1, b2} {
		got := taskByID(t, s, tk.RunID, tk.ID)
		// The previous owner may have called the worker already: like an
		// expired lease, a released lease advances the attempt.
		want := stored(tk)
		want.LeaseOwner, want.LeaseExpiresAt, want.Attempt = "", time.Time{}, tk.Attempt+1
		equal(t, "released task", got, want)
	}
	// Released tasks are claimable at once, long before their old expiry.
	got := claim(t, s, engine.TaskClaimParams{Owner: "A", Now: now, DueBefore: now, LeaseDuration: time.Minute, Limit: 10})
	equal(t, "claim after release", ids(got), []int64{b1.ID, b2.ID, free.ID})
	equal(t, "attempt of a released task on claim", got[0].Attempt, b1.Attempt+1)

	// keepOwner "" releases every lease.
	n, err = s.TaskReleaseLeases(ctxT(t), "")
	if err != nil {
		t.Fatalf("TaskReleaseLeases(\"\"): %v", err)
	}
	equal(t, "released count with keepOwner \"\"", n, int64(4))
	for _, tk := range append(listTasks(t, s, "r1"), listTasks(t, s, "r2")...) {
		if tk.LeaseOwner != "" || !tk.LeaseExpiresAt.IsZero() {
			t.Fatalf("lease left after TaskReleaseLeases(\"\"): %v", show(tk))
		}
	}
}

// testTaskRelease: a node hands back the leases it names (or all of its
// own), with or without advancing the attempt, and nobody else's.
func testTaskRelease(t *testing.T, s engine.Store) {
	now := at(0)
	a1 := newTask("r1", "a1", engine.TaskExecute, now.Add(-time.Minute))
	a2 := newTask("r1", "a2", engine.TaskWaitUntil, now.Add(-time.Minute))
	a3 := newTask("r2", "a3", engine.TaskTimer, now.Add(-time.Minute))
	b := newTask("r2", "b", engine.TaskExecute, now.Add(-time.Minute))
	for _, tk := range []*engine.Task{a1, a2, a3} {
		tk.LeaseOwner, tk.LeaseExpiresAt = "A", now.Add(time.Hour)
	}
	b.LeaseOwner, b.LeaseExpiresAt = "B", now.Add(time.Hour)
	a2.Attempt = 3
	insertTasks(t, s, a1, a2, a3, b)

	if n, err := s.TaskRelease(ctxT(t), "A", []int64{}, false); err != nil || n != 0 {
		t.Fatalf("TaskRelease of no ids = %d, %v", n, err)
	}
	// Named tasks, without an attempt: b is not A's and stays leased.
	n, err := s.TaskRelease(ctxT(t), "A", []int64{a1.ID, b.ID}, false)
	if err != nil {
		t.Fatalf("TaskRelease: %v", err)
	}
	equal(t, "released named", n, int64(1))
	want := stored(a1)
	want.LeaseOwner, want.LeaseExpiresAt = "", time.Time{}
	equal(t, "released without attempt", taskByID(t, s, "r1", a1.ID), want)
	equal(t, "another owner's lease", taskByID(t, s, "r2", b.ID), stored(b))

	// Named, with an attempt.
	if n, err = s.TaskRelease(ctxT(t), "A", []int64{a2.ID}, true); err != nil || n != 1 {
		t.Fatalf("TaskRelease with bump = %d, %v", n, err)
	}
	want = stored(a2)
	want.LeaseOwner, want.LeaseExpiresAt, want.Attempt = "", time.Time{}, a2.Attempt+1
	equal(t, "released with attempt", taskByID(t, s, "r1", a2.ID), want)

	// nil: every lease of A (only a3 is left).
	if n, err = s.TaskRelease(ctxT(t), "A", nil, false); err != nil || n != 1 {
		t.Fatalf("TaskRelease(nil) = %d, %v", n, err)
	}
	if tk := taskByID(t, s, "r2", a3.ID); tk.LeaseOwner != "" || tk.Attempt != a3.Attempt {
		t.Fatalf("a3 after TaskRelease(nil): %v", show(tk))
	}
	// Released tasks are claimable at once.
	got := claim(t, s, engine.TaskClaimParams{Owner: "C", Now: now, DueBefore: now, LeaseDuration: time.Minute, Limit: 10})
	equal(t, "claim after release", ids(got), []int64{a1.ID, a2.ID, a3.ID})
	if _, err := s.TaskRelease(ctxT(t), "", nil, false); err == nil {
		t.Fatal("TaskRelease with an empty owner succeeded")
	}
}

// ---------------------------------------------------------------------------
// history

func testHistory(t *testing.T, s engine.Store) {
	events := []*engine.HistoryEvent{
		{RunID: "r1", At: at(time.Second), Type: "WorkflowStarted", Data: []byte(`{"input":1}`)},
		{RunID: "r2", At: at(0), Type: "WorkflowStarted"},
		{RunID: "r1", At: at(0), Type: "StateStarted", ExecutionID: "S1-1", Data: []byte{}},
		{RunID: "r1", At: at(2 * time.Second), Type: "StateCompleted", ExecutionID: "S1-1", Data: nil},
	}
	update(t, s, func(ctx context.Context, tx engine.Tx) error {
		if err := tx.HistoryAppend(ctx, nil); err != nil {
			return fmt.Errorf("empty HistoryAppend: %w", err)
		}
		return tx.HistoryAppend(ctx, events)
	})
	for i := 1; i < len(events); i++ {
		if events[i].ID <= events[i-1].ID {
			t.Fatalf("HistoryAppend IDs not increasing: %v", show(events))
		}
	}
	more := []*engine.HistoryEvent{{RunID: "r1", At: at(0), Type: "Later"}}
	update(t, s, func(ctx context.Context, tx engine.Tx) error { return tx.HistoryAppend(ctx, more) })

	storedEv := func(e *engine.HistoryEvent) *engine.HistoryEvent { c := *e; c.At = ms(c.At); return &c }
	r1 := []*engine.HistoryEvent{storedEv(events[0]), storedEv(events[2]), storedEv(events[3]), storedEv(more[0])}
	list := func(run string, after int64, limit int) []*engine.HistoryEvent {
		t.Helper()
		var out []*engine.HistoryEvent
		view(t, s, func(ctx context.Context, tx engine.ReadTx) (err error) {
			out, err = tx.HistoryList(ctx, run, after, limit)
			return err
		})
		return out
	}
	equal(t, "HistoryList all", list("r1", 0, 0), r1)
	equal(t, "HistoryList limit -1", list("r1", 0, -1), r1)
	equal(t, "HistoryList limit 2", list("r1", 0, 2), r1[:2])
	equal(t, "HistoryList after first", list("r1", r1[0].ID, 0), r1[1:])
	equal(t, "HistoryList after first, limit 2", list("r1", r1[0].ID, 2), r1[1:3])
	equal(t, "HistoryList after another run's id", list("r1", events[1].ID, 0), r1[1:])
	if got := list("r1", r1[3].ID, 0); len(got) != 0 {
		t.Fatalf("HistoryList after the last = %v", show(got))
	}
	equal(t, "HistoryList other run", list("r2", 0, 0), []*engine.HistoryEvent{storedEv(events[1])})
	if got := list("absent", 0, 0); len(got) != 0 {
		t.Fatalf("HistoryList of an absent run = %v", show(got))
	}

	// Many events in one call (a store may insert them in chunks): each
	// gets the ID it is stored under.
	var many, stored []*engine.HistoryEvent
	for i := range 21 {
		e := &engine.HistoryEvent{RunID: "r3", At: at(time.Duration(i) * time.Millisecond), Type: fmt.Sprintf("E%d", i), Data: []byte(fmt.Sprint(i))}
		many = append(many, e)
	}
	update(t, s, func(ctx context.Context, tx engine.Tx) error { return tx.HistoryAppend(ctx, many) })
	for _, e := range many {
		stored = append(stored, storedEv(e))
	}
	equal(t, "HistoryList of 21 events appended at once", list("r3", 0, 0), stored)
}

// testTaskInsertIDs checks that TaskInsert gives each task the id of its
// own row, for a few tasks and for many (a store may write the two
// differently: PostgreSQL inserts up to four rows as a VALUES list and
// more through unnest), and that the ids grow in the order given.
func testTaskInsertIDs(t *testing.T, s engine.Store) {
	at := time.UnixMilli(1_800_000_000_000)
	for _, n := range []int{1, 3, 4, 5, 9} {
		runID := fmt.Sprintf("ids-%d", n)
		var tasks []*engine.Task
		for i := range n {
			tasks = append(tasks, newTask(runID, fmt.Sprintf("S-%d", i), engine.TaskExecute, at.Add(time.Duration(n-i)*time.Second)))
		}
		insertTasks(t, s, tasks...)
		for i := 1; i < n; i++ {
			if tasks[i].ID <= tasks[i-1].ID {
				t.Fatalf("%d tasks: ids %d then %d, want them growing in the order given", n, tasks[i-1].ID, tasks[i].ID)
			}
		}
		view(t, s, func(ctx context.Context, tx engine.ReadTx) error {
			got, err := tx.TaskList(ctx, runID)
			if err != nil {
				return err
			}
			if len(got) != n {
				t.Fatalf("%d tasks inserted, %d listed", n, len(got))
			}
			byID := map[int64]*engine.Task{}
			for _, tk := range tasks {
				byID[tk.ID] = tk
			}
			for _, g := range got {
				w := byID[g.ID]
				if w == nil || g.ExecutionID != w.ExecutionID || !g.DueAt.Equal(w.DueAt) || string(g.Data) != string(w.Data) {
					t.Fatalf("%d tasks: the row of id %d is %s due %s, which TaskInsert gave no such id", n, g.ID, g.ExecutionID, g.DueAt)
				}
			}
			return nil
		})
	}
}
