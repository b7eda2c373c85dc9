package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/store/postgres"
	"github.com/iwf-server/iwf-server/internal/store/postgres/pgtest"
	"github.com/iwf-server/iwf-server/internal/store/storetest"
)

// TestTaskTakeExpecting: the checks of TaskTakeExpecting travel with the
// commit (one round trip for the whole transaction); when they hold, the
// task is removed and the transaction's writes kept; when the run, the
// task or the execution is not as expected, the commit fails with
// engine.ErrUnexpected and nothing of the transaction is kept.
func TestTaskTakeExpecting(t *testing.T) {
	var trips atomic.Int64
	s, _ := pgtest.NewStoreWith(t, postgres.WithRoundTripCounter(&trips))
	storetest.TaskTakeExpecting(t, s, trips.Load)
}

// TestTaskTakeExpectingWaitsForTheRun: the checks of TaskTakeExpecting
// (folded into the RunUpdate and ExecutionUpdate that follow them, or not
// when the answer does not update the run) are made on the rows as a
// concurrent transaction that held the run's lock left them. The answer
// waits for the lock; when the other transaction changed the run, the
// execution or the task, the answer fails with engine.ErrUnexpected and
// leaves none of its writes; when it changed nothing, the answer applies.
func TestTaskTakeExpectingWaitsForTheRun(t *testing.T) {
	s, schema := pgtest.NewStoreWith(t)
	admin := pgtest.Conn(t, schema)
	changes := []waitsCase{
		{"run changed", func(ctx context.Context, tx engine.Tx, run *engine.Run, _ *engine.Execution, _ *engine.Task) error {
			r := *run
			r.Data = []byte(`{"v":"other"}`)
			return tx.RunUpdate(ctx, &r)
		}, engine.ErrUnexpected, 1},
		{"execution changed", func(ctx context.Context, tx engine.Tx, _ *engine.Run, x *engine.Execution, _ *engine.Task) error {
			e := *x
			e.Data = []byte(`{"x":"other"}`)
			return tx.ExecutionUpdate(ctx, &e)
		}, engine.ErrUnexpected, 1},
		{"task taken", func(ctx context.Context, tx engine.Tx, _ *engine.Run, _ *engine.Execution, task *engine.Task) error {
			_, err := tx.TaskDelete(ctx, task.ID, expectOwner)
			return err
		}, engine.ErrUnexpected, 0},
		{"task leased to another process", func(ctx context.Context, tx engine.Tx, _ *engine.Run, _ *engine.Execution, task *engine.Task) error {
			other := *task
			other.LeaseOwner = "node-b"
			_, err := tx.TaskReschedule(ctx, &other, expectOwner)
			return err
		}, engine.ErrUnexpected, 1},
		{"nothing changed", func(context.Context, engine.Tx, *engine.Run, *engine.Execution, *engine.Task) error { return nil }, nil, 0},
	}
	// Each change is met by an answer that updates the run (its first
	// check folded into the run's UPDATE) and by one that does not.
	n := 0
	for _, c := range changes {
		for _, runUpdate := range []bool{true, false} {
			n++
			name := c.name
			if !runUpdate {
				name += ", no run update"
			}
			t.Run(name, func(t *testing.T) { c.run(t, s, admin, n, runUpdate) })
		}
	}
}

// expectOwner is the lease owner of TestTaskTakeExpectingWaitsForTheRun.
const expectOwner = "node-a"

// waitsCase is a case of TestTaskTakeExpectingWaitsForTheRun: change is
// made by the transaction that holds the run's lock; want is the answer's
// outcome and tasks the run's tasks left after it.
type waitsCase struct {
	name   string
	change func(ctx context.Context, tx engine.Tx, run *engine.Run, x *engine.Execution, task *engine.Task) error
	want   error
	tasks  int
}

// run runs the case on run number n; runUpdate says whether the answer
// updates the run.
func (c waitsCase) run(t *testing.T, s *postgres.Store, admin *pgx.Conn, n int, runUpdate bool) {
	ctx := context.Background()
	at := time.UnixMilli(time.Now().UnixMilli())
	run := &engine.Run{RunID: fmt.Sprintf("run-%d", n), WorkflowID: fmt.Sprintf("wf-%d", n), WorkflowType: "T",
		Status: engine.RunRunning, StartedAt: at, Data: []byte(`{"v":1}`)}
	x := &engine.Execution{RunID: run.RunID, ExecutionID: "S-1", StateID: "S", Status: engine.ExecExecute, CreatedAt: at, Data: []byte(`{"x":1}`)}
	task := &engine.Task{RunID: run.RunID, WorkflowID: run.WorkflowID, ExecutionID: "S-1", Kind: engine.TaskExecute, DueAt: at,
		Attempt: 1, FirstAttemptAt: at, LeaseOwner: expectOwner, LeaseExpiresAt: at.Add(time.Minute)}
	if err := s.Update(ctx, func(ctx context.Context, tx engine.Tx) error {
		if err := tx.RunInsert(ctx, run); err != nil {
			return err
		}
		if err := tx.ExecutionInsert(ctx, []*engine.Execution{x}); err != nil {
			return err
		}
		return tx.TaskInsert(ctx, []*engine.Task{task})
	}); err != nil {
		t.Fatal(err)
	}
	expRun, expX := *run, *x

	// The other transaction locks the run and holds it until release is
	// closed.
	locked, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	other := make(chan error, 1)
	go func() {
		other <- s.Update(ctx, func(ctx context.Context, tx engine.Tx) error {
			if _, err := tx.RunLock(ctx, run.RunID); err != nil {
				return err
			}
			once.Do(func() { close(locked) })
			<-release
			return c.change(ctx, tx, run, x, task)
		})
	}()
	<-locked
	answered := make(chan error, 1)
	go func() {
		answered <- s.Update(ctx, func(ctx context.Context, tx engine.Tx) error {
			r, e := expRun, expX
			if err := tx.(engine.TaskTakeExpecter).TaskTakeExpecting(ctx, &r, task.ID, expectOwner, &e); err != nil {
				return err
			}
			r.Data = []byte(`{"v":2}`)
			e.Status, e.Data = engine.ExecCompleted, []byte(`{"x":2}`)
			if err := tx.ExecutionUpdate(ctx, &e); err != nil {
				return err
			}
			if !runUpdate {
				return nil
			}
			return tx.RunUpdate(ctx, &r)
		})
	}()
	waitFor(t, "the answer waiting for the run's lock", func() (bool, error) {
		var waiting int
		err := admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND query LIKE '%runs%' AND pid <> pg_backend_pid()`).Scan(&waiting)
		return waiting > 0, err
	})
	close(release)
	if err := <-other; err != nil {
		t.Fatal(err)
	}
	err := <-answered
	if !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
		t.Fatalf("answer: %v, want %v", err, c.want)
	}
	var runData, xData string
	var status engine.ExecutionStatus
	var tasks int
	if err := s.View(ctx, func(ctx context.Context, tx engine.ReadTx) error {
		r, err := tx.RunGet(ctx, run.RunID)
		if err != nil {
			return err
		}
		e, err := tx.ExecutionGet(ctx, run.RunID, "S-1")
		if err != nil {
			return err
		}
		ts, err := tx.TaskList(ctx, run.RunID)
		runData, xData, status, tasks = string(r.Data), string(e.Data), e.Status, len(ts)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if c.want == nil {
		if (runData == `{"v":2}`) != runUpdate || status != engine.ExecCompleted || tasks != c.tasks {
			t.Errorf("applied answer left run %s, execution %s, %d tasks", runData, status, tasks)
		}
		return
	}
	if runData == `{"v":2}` || xData == `{"x":2}` || status != engine.ExecExecute || tasks != c.tasks {
		t.Errorf("refused answer left run %s, execution %s %s, %d tasks; want none of its writes and %d tasks",
			runData, status, xData, tasks, c.tasks)
	}
}
