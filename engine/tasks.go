package engine

// Task leasing: creating tasks, leasing them to this process, and checking
// in a transaction that a task is still ours before its outcome is applied.

import (
	"context"
	"errors"
	"time"

	"github.com/iwf-server/iwf-server/engine/internal/record"
)

// newTask builds a task of run; it is leased to this process when it is due
// soon, so that this process runs it right after the commit.
func (t *txn) newTask(run *Run, executionID string, kind TaskKind, due time.Time) *Task {
	task := &Task{
		RunID:          run.RunID,
		WorkflowID:     run.WorkflowID,
		ExecutionID:    executionID,
		Kind:           kind,
		DueAt:          due,
		Attempt:        1,
		FirstAttemptAt: due,
	}
	t.e.leaseLocally(task, t.now)
	return task
}

// leaseLocally leases t to this process if it is due within the local
// horizon; otherwise it leaves it for the poller.
func (e *Engine) leaseLocally(t *Task, now time.Time) {
	// Stores keep milliseconds: round up so that memory and store agree and
	// a task never runs before its stored due time.
	t.DueAt = ceilMillisecond(t.DueAt)
	if t.DueAt.Sub(now) <= e.localHorizon() {
		t.LeaseOwner = e.cfg.NodeID
		base := t.DueAt
		if base.Before(now) {
			base = now
		}
		t.LeaseExpiresAt = base.Add(e.cfg.LeaseDuration)
	} else {
		t.LeaseOwner = ""
		t.LeaseExpiresAt = time.Time{}
	}
}

// insertTasks stores tasks; those leased to this process run after the commit.
func (t *txn) insertTasks(tasks ...*Task) error {
	if err := t.tx.TaskInsert(t.ctx, tasks); err != nil {
		return err
	}
	t.keepLocal(tasks...)
	return nil
}

// keepLocal schedules, after the commit, the tasks leased to this process.
func (t *txn) keepLocal(tasks ...*Task) {
	for _, task := range tasks {
		if task.LeaseOwner == t.e.cfg.NodeID {
			t.fx.tasks = append(t.fx.tasks, task)
		}
	}
}

// reschedule moves a task this process holds to a later attempt or time.
func (t *txn) reschedule(task *Task, due time.Time, attempt int) error {
	next := *task
	next.DueAt = due
	next.Attempt = attempt
	t.e.leaseLocally(&next, t.now)
	ok, err := t.tx.TaskReschedule(t.ctx, &next, t.e.cfg.NodeID)
	if err == nil && ok {
		t.keepLocal(&next)
	}
	return err
}

// taskTxn is a runTxn for a task's outcome: the run, and for state tasks
// the execution and its record.
type taskTxn struct {
	*runTxn
	x  *Execution
	xd *record.Execution
}

// lockForTask locks the task's run, deletes the task and checks that it was
// still ours and its execution still in the phase want (Tx.TaskTake). It
// returns nil when the task is stale: gone, leased to another process, or
// its run or execution moved on; nothing of its outcome may then be
// applied.
func (t *txn) lockForTask(task *Task, want ExecutionStatus) (*taskTxn, error) {
	got, err := t.tx.TaskTake(t.ctx, task.RunID, task.ID, t.e.cfg.NodeID, task.ExecutionID)
	if err != nil || got.Run == nil {
		return nil, err
	}
	if !got.Removed {
		t.fx.stale = append(t.fx.stale, task)
		return nil, nil
	}
	if got.Run.Status != RunRunning {
		return nil, nil
	}
	tt := &taskTxn{}
	if task.ExecutionID != "" {
		if got.Execution == nil || got.Execution.Status != want {
			return nil, nil
		}
		tt.x = got.Execution
		if tt.xd, err = decodeExec(tt.x); err != nil {
			return nil, err
		}
	}
	rd, err := decodeRun(got.Run)
	if err != nil {
		return nil, err
	}
	tt.runTxn = t.forRun(got.Run, rd)
	return tt, nil
}

// updateTaking runs apply in a transaction that takes task (lockForTask)
// and does nothing when the task is stale. s is the snapshot the worker
// call was sent from, or nil. When the store can check it
// (TaskTakeExpecter), the first attempt takes the task as s shows it and
// saves reading and decoding the run and the execution again (and on
// PostgreSQL a round trip); should the run, the task or the
// execution have changed since s was read, the store rolls that attempt
// back and the transaction runs again with lockForTask. s must not be used
// after this call: the first attempt changes its records.
func (e *Engine) updateTaking(ctx context.Context, task *Task, want ExecutionStatus, s *apiSnapshot, apply func(tt *taskTxn) error) error {
	normal := func(t *txn) error {
		tt, err := t.lockForTask(task, want)
		if err != nil || tt == nil {
			return err
		}
		return apply(tt)
	}
	if s == nil || s.x == nil || task.ExecutionID == "" || s.run.Status != RunRunning || s.x.Status != want {
		return e.update(ctx, normal)
	}
	// unexpected records a check that failed at once (SQLite), which the
	// store may have followed by running the function again, the usual way,
	// within the same Update (a group commit's re-run).
	unexpected := false
	err := e.update(ctx, func(t *txn) error {
		ex, ok := t.tx.(TaskTakeExpecter)
		snap := s
		if !ok || snap == nil {
			// Another store, or a retry of the attempt below (s changed).
			return normal(t)
		}
		s = nil
		if err := ex.TaskTakeExpecting(t.ctx, snap.run, task.ID, t.e.cfg.NodeID, snap.x); err != nil {
			unexpected = unexpected || errors.Is(err, ErrUnexpected)
			return err
		}
		tt := &taskTxn{runTxn: t.forRun(snap.run, snap.rd), x: snap.x, xd: snap.xd}
		return apply(tt)
	})
	if !errors.Is(err, ErrUnexpected) {
		if unexpected {
			e.metrics.retaken.inc()
		}
		return err
	}
	e.metrics.retaken.inc()
	return e.update(ctx, normal)
}

// processTask runs one due task. It returns an error when the task should be
// tried again later by this process (store trouble); everything else is
// recorded in the store.
func (e *Engine) processTask(ctx context.Context, t *Task) error {
	var err error
	switch t.Kind {
	case TaskWaitUntil, TaskExecute:
		err = e.callStateAPI(ctx, t)
	case TaskTimer:
		var done bool
		if done, err = e.fireTimerEager(ctx, t); !done && err == nil {
			err = e.fireTimer(WithPriority(ctx, PriorityUrgent), t)
		}
	case TaskTimeout:
		err = e.fireTimeout(WithPriority(ctx, PriorityUrgent), t)
	default:
		err = e.dropTask(ctx, t)
	}
	if err != nil && ctx.Err() == nil && !errors.Is(err, errLimitWait) && !e.storeUnavailable(err, "tasks wait for the store") {
		e.log.Error().Err(err).Str("workflowId", t.WorkflowID).Str("runId", t.RunID).
			Str("stateExecutionId", t.ExecutionID).Str("task", string(t.Kind)).Msg("task failed; retrying")
	}
	return err
}

// storeUnavailable logs err, when it says the store is unavailable, at
// warn level at most once per failureLogInterval for what (the engine
// retries by itself), and reports whether it did so.
func (e *Engine) storeUnavailable(err error, what string) bool {
	if !IsUnavailable(err) {
		return false
	}
	e.metrics.storeUnavailable.inc()
	if suppressed, ok := e.failureLogs.allow("store: "+what, e.cfg.Clock.Now()); ok {
		ev := e.log.Warn().Err(err)
		if suppressed > 0 {
			ev = ev.Int("suppressed", suppressed)
		}
		ev.Msg("store unavailable; " + what + " and retry")
	}
	return true
}

// dropTask deletes a task whose execution or run has moved on.
func (e *Engine) dropTask(ctx context.Context, task *Task) error {
	return e.update(ctx, func(t *txn) error {
		_, err := t.tx.TaskDelete(t.ctx, task.ID, e.cfg.NodeID)
		return err
	})
}

// fireTimeout ends a run whose workflow timeout expired.
func (e *Engine) fireTimeout(ctx context.Context, task *Task) error {
	return e.update(ctx, func(t *txn) error {
		tt, err := t.lockForTask(task, "")
		if err != nil || tt == nil {
			return err
		}
		if err := tt.closeRun(RunTimeout, "", ""); err != nil {
			return err
		}
		return tt.save()
	})
}
