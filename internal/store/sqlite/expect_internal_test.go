package sqlite

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/engine"
)

// TestTaskTakeExpectingStatements counts the statements of an answer: the
// checks of TaskTakeExpecting ride in the answer's updates of the run and
// the execution (the task's delete and the two updates: 3 statements),
// and are statements of their own only for a row the transaction does not
// update, or when it reads before updating it.
func TestTaskTakeExpectingStatements(t *testing.T) {
	ctx := context.Background()
	s := openMigrated(t, true)
	at := time.UnixMilli(1_800_000_000_000)
	const owner = "node-a"
	n := 0
	setup := func(t *testing.T) (*engine.Run, *engine.Execution, *engine.Task) {
		t.Helper()
		n++
		run := &engine.Run{RunID: fmt.Sprintf("run-%d", n), WorkflowID: fmt.Sprintf("wf-%d", n), WorkflowType: "T",
			Status: engine.RunRunning, StartedAt: at, Data: []byte(`{"v":1}`)}
		x := &engine.Execution{RunID: run.RunID, ExecutionID: "S-1", StateID: "S", Status: engine.ExecExecute, CreatedAt: at, Data: []byte(`{}`)}
		task := &engine.Task{RunID: run.RunID, WorkflowID: run.WorkflowID, ExecutionID: "S-1", Kind: engine.TaskExecute, DueAt: at,
			Attempt: 1, FirstAttemptAt: at, LeaseOwner: owner, LeaseExpiresAt: at.Add(time.Minute)}
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
		return run, x, task
	}
	for _, c := range []struct {
		name string
		// then runs after TaskTakeExpecting, on copies of the records
		then func(ctx context.Context, tx engine.Tx, run *engine.Run, x *engine.Execution) error
		want int64
	}{
		{"both updated", func(ctx context.Context, tx engine.Tx, run *engine.Run, x *engine.Execution) error {
			x.Status = engine.ExecCompleted
			if err := tx.ExecutionUpdate(ctx, x); err != nil {
				return err
			}
			run.Data = []byte(`{"v":2}`)
			return tx.RunUpdate(ctx, run)
		}, 3},
		{"run closed", func(ctx context.Context, tx engine.Tx, run *engine.Run, x *engine.Execution) error {
			x.Status = engine.ExecCompleted
			if err := tx.ExecutionUpdate(ctx, x); err != nil {
				return err
			}
			run.Status, run.ClosedAt = engine.RunCompleted, at.Add(time.Second)
			return tx.RunUpdate(ctx, run)
		}, 3},
		{"run only", func(ctx context.Context, tx engine.Tx, run *engine.Run, _ *engine.Execution) error {
			run.Data = []byte(`{"v":2}`)
			return tx.RunUpdate(ctx, run)
		}, 3}, // delete, update, the execution's check
		{"nothing updated", func(context.Context, engine.Tx, *engine.Run, *engine.Execution) error { return nil }, 3},
		{"read first", func(ctx context.Context, tx engine.Tx, run *engine.Run, x *engine.Execution) error {
			if _, err := tx.ExecutionGet(ctx, x.RunID, x.ExecutionID); err != nil {
				return err
			}
			run.Data = []byte(`{"v":2}`)
			return tx.RunUpdate(ctx, run)
		}, 5}, // delete, both checks, the read, the update
	} {
		t.Run(c.name, func(t *testing.T) {
			run, x, task := setup(t)
			before := s.writerStatements.Load()
			if err := s.Update(ctx, func(ctx context.Context, tx engine.Tx) error {
				if err := tx.(engine.TaskTakeExpecter).TaskTakeExpecting(ctx, run, task.ID, owner, x); err != nil {
					return err
				}
				r, e := *run, *x
				return c.then(ctx, tx, &r, &e)
			}); err != nil {
				t.Fatal(err)
			}
			if got := s.writerStatements.Load() - before; got != c.want {
				t.Errorf("the answer ran %d statements, want %d", got, c.want)
			}
		})
	}
}

// TestWorkflowLockOrCreateStatements: a start of a new workflow id writes
// its row in one statement; an existing id costs the insert that does
// nothing and the read.
func TestWorkflowLockOrCreateStatements(t *testing.T) {
	ctx := context.Background()
	s := openMigrated(t, true)
	for _, c := range []struct {
		name, runID string
		wantCur     string
		wantCreated bool
		want        int64
	}{
		{"new id", "run-a", "", true, 1},
		{"existing id", "run-b", "run-a", false, 2},
	} {
		before := s.writerStatements.Load()
		if err := s.Update(ctx, func(ctx context.Context, tx engine.Tx) error {
			cur, created, err := tx.WorkflowLockOrCreate(ctx, "wf", c.runID)
			if err == nil && (cur != c.wantCur || created != c.wantCreated) {
				t.Errorf("%s: WorkflowLockOrCreate = %q, %v; want %q, %v", c.name, cur, created, c.wantCur, c.wantCreated)
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if got := s.writerStatements.Load() - before; got != c.want {
			t.Errorf("%s: %d statements, want %d", c.name, got, c.want)
		}
	}
}
