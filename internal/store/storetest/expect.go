package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/engine"
)

// TaskTakeExpecting checks a store's engine.TaskTakeExpecter: when the
// run, the task and the execution are as expected, the task is removed and
// the transaction's writes kept; when one of them is not, the transaction
// fails with engine.ErrUnexpected (at the call, at a later read or at the
// commit) and nothing of it is kept. s's Tx must implement the interface.
// roundTrips, when not nil, counts the store's round trips: the
// transaction that holds must then take exactly one.
func TaskTakeExpecting(t *testing.T, s engine.Store, roundTrips func() int64) {
	ctx := context.Background()
	at := time.UnixMilli(time.Now().UnixMilli())
	const owner = "node-a"

	// setup stores run-N with execution S-1 in phase execute and a task of
	// it leased to owner, and returns the three as stored.
	n := 0
	setup := func(t *testing.T) (*engine.Run, *engine.Execution, *engine.Task) {
		t.Helper()
		n++
		run := &engine.Run{RunID: fmt.Sprintf("run-%d", n), WorkflowID: fmt.Sprintf("wf-%d", n), WorkflowType: "T",
			Status: engine.RunRunning, StartedAt: at, Data: []byte(`{"v":1}`)}
		x := &engine.Execution{RunID: run.RunID, ExecutionID: "S-1", StateID: "S", Status: engine.ExecExecute, CreatedAt: at, Data: []byte(`{"x":1}`)}
		task := &engine.Task{RunID: run.RunID, WorkflowID: run.WorkflowID, ExecutionID: "S-1", Kind: engine.TaskExecute, DueAt: at,
			Attempt: 1, FirstAttemptAt: at, LeaseOwner: owner, LeaseExpiresAt: at.Add(time.Minute)}
		err := s.Update(ctx, func(ctx context.Context, tx engine.Tx) error {
			if err := tx.RunInsert(ctx, run); err != nil {
				return err
			}
			if err := tx.ExecutionInsert(ctx, []*engine.Execution{x}); err != nil {
				return err
			}
			return tx.TaskInsert(ctx, []*engine.Task{task})
		})
		if err != nil {
			t.Fatal(err)
		}
		return run, x, task
	}
	// answer applies an answer to the expected run and execution: it
	// writes both and returns Update's error.
	answer := func(run *engine.Run, x *engine.Execution, task *engine.Task) error {
		return s.Update(ctx, func(ctx context.Context, tx engine.Tx) error {
			if err := tx.(engine.TaskTakeExpecter).TaskTakeExpecting(ctx, run, task.ID, owner, x); err != nil {
				return err
			}
			// The engine changes the records it passed; the checks must
			// compare with what they were.
			run.Data = []byte(`{"v":2}`)
			x.Status, x.Data = engine.ExecCompleted, []byte(`{"x":2}`)
			if err := tx.ExecutionUpdate(ctx, x); err != nil {
				return err
			}
			return tx.RunUpdate(ctx, run)
		})
	}
	// stored reads the run's data, the execution's status and the number of
	// the run's tasks.
	stored := func(t *testing.T, runID string) (string, engine.ExecutionStatus, int) {
		t.Helper()
		var data string
		var status engine.ExecutionStatus
		var tasks int
		err := s.View(ctx, func(ctx context.Context, tx engine.ReadTx) error {
			r, err := tx.RunGet(ctx, runID)
			if err != nil {
				return err
			}
			x, err := tx.ExecutionGet(ctx, runID, "S-1")
			if err != nil {
				return err
			}
			ts, err := tx.TaskList(ctx, runID)
			data, status, tasks = string(r.Data), x.Status, len(ts)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return data, status, tasks
	}

	t.Run("as expected", func(t *testing.T) {
		run, x, task := setup(t)
		var before int64
		if roundTrips != nil {
			before = roundTrips()
		}
		if err := answer(run, x, task); err != nil {
			t.Fatal(err)
		}
		if roundTrips != nil {
			if got := roundTrips() - before; got != 1 {
				t.Errorf("the transaction took %d round trips, want 1", got)
			}
		}
		if data, status, tasks := stored(t, run.RunID); data != `{"v":2}` || status != engine.ExecCompleted || tasks != 0 {
			t.Errorf("after the answer: run data %s, execution %s, %d tasks; want {\"v\":2}, COMPLETED, 0", data, status, tasks)
		}
	})

	// Each case changes one thing after the "read before the call".
	for _, c := range []struct {
		name   string
		change func(ctx context.Context, tx engine.Tx, run *engine.Run, x *engine.Execution, task *engine.Task) error
	}{
		{"run changed", func(ctx context.Context, tx engine.Tx, run *engine.Run, _ *engine.Execution, _ *engine.Task) error {
			r := *run
			r.Data = []byte(`{"v":"other"}`)
			return tx.RunUpdate(ctx, &r)
		}},
		{"execution changed", func(ctx context.Context, tx engine.Tx, _ *engine.Run, x *engine.Execution, _ *engine.Task) error {
			e := *x
			e.Data = []byte(`{"x":"other"}`)
			return tx.ExecutionUpdate(ctx, &e)
		}},
		{"task gone", func(ctx context.Context, tx engine.Tx, _ *engine.Run, _ *engine.Execution, task *engine.Task) error {
			_, err := tx.TaskDelete(ctx, task.ID, owner)
			return err
		}},
		{"task leased to another process", func(ctx context.Context, tx engine.Tx, _ *engine.Run, _ *engine.Execution, task *engine.Task) error {
			other := *task
			other.LeaseOwner = "node-b"
			_, err := tx.TaskReschedule(ctx, &other, owner)
			return err
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			run, x, task := setup(t)
			expRun, expX := *run, *x
			if err := s.Update(ctx, func(ctx context.Context, tx engine.Tx) error { return c.change(ctx, tx, run, x, task) }); err != nil {
				t.Fatal(err)
			}
			dataBefore, statusBefore, tasksBefore := stored(t, run.RunID)
			err := answer(&expRun, &expX, task)
			if !errors.Is(err, engine.ErrUnexpected) {
				t.Fatalf("answer after %s: %v, want engine.ErrUnexpected", c.name, err)
			}
			if data, status, tasks := stored(t, run.RunID); data != dataBefore || status != statusBefore || tasks != tasksBefore {
				t.Errorf("the failed answer left run data %s, execution %s, %d tasks; want %s, %s, %d as before it",
					data, status, tasks, dataBefore, statusBefore, tasksBefore)
			}
		})
	}

	// A run's close deletes every task of the run after the checks
	// (TaskDeleteByRun, which PostgreSQL folds into the run's check): the
	// tasks queued for insertion before the delete go too, those queued
	// after it stay, and a failed check keeps every task.
	closeCase := func(t *testing.T, before, after, leasedElsewhere bool) (int, error) {
		t.Helper()
		run, x, task := setup(t)
		timer := &engine.Task{RunID: run.RunID, WorkflowID: run.WorkflowID, ExecutionID: "S-1", Kind: engine.TaskTimer,
			DueAt: at.Add(time.Hour), Attempt: 1, FirstAttemptAt: at}
		if err := s.Update(ctx, func(ctx context.Context, tx engine.Tx) error {
			if err := tx.TaskInsert(ctx, []*engine.Task{timer}); err != nil {
				return err
			}
			if !leasedElsewhere {
				return nil
			}
			other := *task
			other.LeaseOwner = "node-b"
			_, err := tx.TaskReschedule(ctx, &other, owner)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		expRun, expX := *run, *x
		newTask := func() []*engine.Task {
			return []*engine.Task{{RunID: run.RunID, WorkflowID: run.WorkflowID, Kind: engine.TaskTimeout,
				DueAt: at.Add(time.Hour), Attempt: 1, FirstAttemptAt: at}}
		}
		err := s.Update(ctx, func(ctx context.Context, tx engine.Tx) error {
			if err := tx.(engine.TaskTakeExpecter).TaskTakeExpecting(ctx, &expRun, task.ID, owner, &expX); err != nil {
				return err
			}
			expX.Status, expX.Data = engine.ExecCompleted, []byte(`{"x":2}`)
			if err := tx.ExecutionUpdate(ctx, &expX); err != nil {
				return err
			}
			if before {
				if err := tx.TaskInsert(ctx, newTask()); err != nil {
					return err
				}
			}
			if err := tx.TaskDeleteByRun(ctx, run.RunID); err != nil {
				return err
			}
			if after {
				if err := tx.TaskInsert(ctx, newTask()); err != nil {
					return err
				}
			}
			expRun.Status, expRun.ClosedAt, expRun.Data = engine.RunCompleted, at.Add(time.Second), []byte(`{"v":"closed"}`)
			return tx.RunUpdate(ctx, &expRun)
		})
		_, _, tasks := stored(t, run.RunID)
		return tasks, err
	}
	t.Run("close deletes the run's tasks", func(t *testing.T) {
		if tasks, err := closeCase(t, false, false, false); err != nil || tasks != 0 {
			t.Errorf("close: %v, %d tasks left; want nil, 0", err, tasks)
		}
	})
	t.Run("close deletes a task inserted before its delete", func(t *testing.T) {
		if tasks, err := closeCase(t, true, false, false); err != nil || tasks != 0 {
			t.Errorf("close: %v, %d tasks left; want nil, 0", err, tasks)
		}
	})
	t.Run("close keeps a task inserted after its delete", func(t *testing.T) {
		if tasks, err := closeCase(t, false, true, false); err != nil || tasks != 1 {
			t.Errorf("close: %v, %d tasks left; want nil, 1", err, tasks)
		}
	})
	t.Run("close of a task leased to another process", func(t *testing.T) {
		if tasks, err := closeCase(t, false, false, true); !errors.Is(err, engine.ErrUnexpected) || tasks != 2 {
			t.Errorf("close: %v, %d tasks left; want engine.ErrUnexpected, 2", err, tasks)
		}
	})

	// A transaction that updates neither the run nor the execution after
	// TaskTakeExpecting still has them checked, at its commit at the
	// latest: unchanged, the task is gone; changed, nothing is kept.
	takeOnly := func(run *engine.Run, x *engine.Execution, task *engine.Task) error {
		return s.Update(ctx, func(ctx context.Context, tx engine.Tx) error {
			return tx.(engine.TaskTakeExpecter).TaskTakeExpecting(ctx, run, task.ID, owner, x)
		})
	}
	t.Run("no update, as expected", func(t *testing.T) {
		run, x, task := setup(t)
		if err := takeOnly(run, x, task); err != nil {
			t.Fatal(err)
		}
		if _, _, tasks := stored(t, run.RunID); tasks != 0 {
			t.Errorf("after the take: %d tasks, want 0", tasks)
		}
	})
	for _, c := range []struct {
		name   string
		change func(run *engine.Run, x *engine.Execution) (*engine.Run, *engine.Execution)
	}{
		{"run", func(run *engine.Run, x *engine.Execution) (*engine.Run, *engine.Execution) {
			r := *run
			r.Data = []byte(`{"v":"other"}`)
			return &r, nil
		}},
		{"execution", func(run *engine.Run, x *engine.Execution) (*engine.Run, *engine.Execution) {
			e := *x
			e.Status = engine.ExecCompleted
			return nil, &e
		}},
	} {
		t.Run("no update, "+c.name+" changed", func(t *testing.T) {
			run, x, task := setup(t)
			r, e := c.change(run, x)
			if err := s.Update(ctx, func(ctx context.Context, tx engine.Tx) error {
				if r != nil {
					return tx.RunUpdate(ctx, r)
				}
				return tx.ExecutionUpdate(ctx, e)
			}); err != nil {
				t.Fatal(err)
			}
			if err := takeOnly(run, x, task); !errors.Is(err, engine.ErrUnexpected) {
				t.Fatalf("take after the %s changed: %v, want engine.ErrUnexpected", c.name, err)
			}
			if _, _, tasks := stored(t, run.RunID); tasks != 1 {
				t.Errorf("the failed take left %d tasks, want 1", tasks)
			}
		})
	}

	// A transaction that read after TaskTakeExpecting fails when the checks
	// fail (PostgreSQL: the read carries them; SQLite: they are made when
	// the function returns, whatever it returned).
	t.Run("read after the checks", func(t *testing.T) {
		run, x, task := setup(t)
		expRun := *run
		if err := s.Update(ctx, func(ctx context.Context, tx engine.Tx) error {
			r := *run
			r.Data = []byte(`{"v":"other"}`)
			return tx.RunUpdate(ctx, &r)
		}); err != nil {
			t.Fatal(err)
		}
		err := s.Update(ctx, func(ctx context.Context, tx engine.Tx) error {
			if err := tx.(engine.TaskTakeExpecter).TaskTakeExpecting(ctx, &expRun, task.ID, owner, x); err != nil {
				return err
			}
			_, err := tx.ExecutionGet(ctx, run.RunID, "S-1")
			return err
		})
		if !errors.Is(err, engine.ErrUnexpected) {
			t.Fatalf("read after failing checks: %v, want engine.ErrUnexpected", err)
		}
	})
}
