package engine

// A timer that moves its execution on by itself calls execute at once and
// records its firing in the transaction that applies the answer.
//
// The usual path takes three steps: a transaction fires the timer (the
// execution's commands complete and an execute task is created), the
// execute call, and a transaction that applies the answer. When the timer
// is the execution's only command, its firing is certain to complete the
// commands and the command results are known without a transaction, so
// the engine reads the call's inputs, calls execute and then, in one
// transaction, takes the timer's task, records the firing and applies the
// answer. The timer's task stays in the store, leased to this process,
// until that transaction: a crash before it makes another process fire the
// timer again, and execute is called again, as state API calls are at least
// once, with the timer task's attempt, which a process that takes over an
// expired lease increments. A message arriving during the call does not
// fire the timer (deliver leaves executions that wait on timers only
// alone). Whatever else ends the wait first (a timer skipped over the API,
// a closed run) removes the task, and the answer is then dropped as stale.
// A failed call is recorded as the usual path would record it: one
// transaction fires the timer and creates the execute task of that
// attempt, and the failed attempt is then applied to that task (the next
// attempt after backoff, or the state's failure policy).

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/channels"
	"github.com/iwf-server/iwf-server/engine/internal/record"
)

// firesAlone reports whether command index is a timer and the execution's
// only command, and its firing completes the commands.
func firesAlone(xd *record.Execution, index int) bool {
	req := flatCommands(xd.Commands)
	if len(req.Commands) != 1 || index != 0 || req.Commands[0].Kind != channels.Timer {
		return false
	}
	return req.Satisfied([]bool{true})
}

// fireTimerEager runs a timer task marked Alone: it calls execute and
// applies the answer with the firing. It reports false, having changed
// nothing, when the task is not such a timer any more; the caller then
// fires the timer the usual way.
func (e *Engine) fireTimerEager(ctx context.Context, task *Task) (bool, error) {
	var idx record.TimerTask
	if err := json.Unmarshal(task.Data, &idx); err != nil || !idx.Alone {
		return false, nil
	}
	cr, ok := e.store.(CallReader)
	if !ok {
		return false, nil
	}
	in, err := e.readForCall(ctx, cr, task.RunID, task.ExecutionID)
	if err != nil {
		return false, err
	}
	s, err := snapshotOf(in, ExecWaiting)
	if err != nil || s == nil || !firesAlone(s.xd, idx.Index) || len(lockKeys(loadingPolicies(s.xd.Options, false))) > 0 || e.limiter.applies(s) ||
		e.pausedBy(s.run.WorkflowType, s.rd) != "" {
		// A paused run's timer fires the usual way: its execute call is
		// then held (callStateAPI).
		return false, err
	}
	// The command results as the firing computes them.
	fired := *s.xd
	fired.Done, fired.FireAt = slices.Clone(fired.Done), slices.Clone(fired.FireAt)
	fired.Done[idx.Index], fired.FireAt[idx.Index] = true, 0
	results := commandResults(&fired)

	firedAt := e.cfg.Clock.Now()
	if task.LeaseExpiresAt.Sub(firedAt) < e.cfg.LeaseDuration/2 {
		// The lease has run down (the task waited for a goroutine or for
		// the store): another process may take the task over while the
		// call is in flight and call execute too. The usual path takes
		// the task before it calls.
		return false, nil
	}
	call := &Task{RunID: task.RunID, WorkflowID: task.WorkflowID, ExecutionID: task.ExecutionID,
		Kind: TaskExecute, DueAt: firedAt, Attempt: max(task.Attempt, 1), FirstAttemptAt: firedAt}
	ctx, phase := e.startPhase(ctx, "execute", firedAt, call, s)
	done, err := e.callExecuteEager(ctx, task, idx, call, s, results, firedAt)
	endSpan(phase, err)
	return done, err
}

// callExecuteEager is the call and the answer of fireTimerEager, within
// the span of its execute phase.
func (e *Engine) callExecuteEager(ctx context.Context, task *Task, idx record.TimerTask, call *Task, s *apiSnapshot,
	results *record.CommandResults, firedAt time.Time) (bool, error) {
	callCtx, cancel := context.WithTimeout(ctx, apiTimeout(s.xd.Options, false))
	defer cancel()
	req := &iwfapi.WorkflowStateDecideRequest{
		Context: workerContext(call, s), WorkflowType: s.run.WorkflowType, WorkflowStateId: s.x.StateID,
		StateInput: mapPtr(s.xd.Input, valueOut), SearchAttributes: nonEmpty(s.sas), DataObjects: nonEmpty(s.das),
		StateLocals: mapSlice(s.xd.StateLocals, kvOut), CommandResults: mapPtr(results, resultsOut),
	}
	if err := e.inline(ctx, false, s.run.WorkflowID, s.run.RunID, req); err != nil {
		return true, err
	}
	begin := time.Now()
	callCtx, span := e.startWorkerCall(callCtx, "execute", call, s)
	resp, err := e.worker.Execute(callCtx, s.rd.WorkerURL, req)
	endSpan(span, err)
	e.recordCall("execute", begin, err)
	if err == nil {
		err = checkDecision(resp)
	}
	e.recordStateCall(s, "execute", err)
	if err != nil {
		if ctx.Err() != nil {
			return true, ctx.Err()
		}
		nameTimeout(err, "StateApiExecute")
		e.attemptFailedLog(call, s, "execute", err)
		return true, e.fireTimerFailed(ctx, task, idx, call, err)
	}
	off, err := e.offload(ctx, s.run.WorkflowID, s.run.RunID, executeStored(resp)...)
	if err != nil {
		return true, err
	}
	decision := decisionIn(deref(resp.StateDecision))
	writes := upsertsIn(resp.UpsertSearchAttributes, resp.UpsertDataObjects, resp.PublishToInterStateChannel)
	// The task is taken as the call's snapshot shows the run and the
	// execution (updateTaking): the transaction reads nothing, and the
	// store may commit it with others. Should either have changed during
	// the call, it takes the task the usual way, reading them again.
	return true, e.updateTaking(WithPriority(ctx, PriorityUrgent), task, ExecWaiting, s, func(tt *taskTxn) error {
		if err := tt.fireAlone(task, idx, firedAt); err != nil {
			return err
		}
		if err := tt.keepPayloads(off, tt.run.RunID); err != nil {
			return err
		}
		return tt.applyExecuteAnswer(call, decision, writes)
	})
}

// fireAlone fires the timer of a taken timer task marked Alone, which
// moves the execution to execute without creating an execute task: the
// caller has called execute already.
func (tt *taskTxn) fireAlone(task *Task, idx record.TimerTask, firedAt time.Time) error {
	x, xd := tt.x, tt.xd
	if !firesAlone(xd, idx.Index) {
		return fmt.Errorf("engine: execution %s changed its commands while waiting", x.ExecutionID)
	}
	tt.fx.timerLateness = append(tt.fx.timerLateness, firedAt.Sub(task.DueAt))
	xd.FireAt[idx.Index] = 0
	tt.record(tt.event(x.ExecutionID, "TimerFired", map[string]any{"index": idx.Index}))
	tt.lastTimerTaken, tt.answered = x.ExecutionID, x.ExecutionID
	if _, err := tt.evaluate(x, xd); err != nil {
		return err
	}
	if x.Status != ExecExecute {
		return fmt.Errorf("engine: execution %s did not move on when its only timer fired", x.ExecutionID)
	}
	x.Data = encode(xd)
	return nil
}

// fireTimerFailed records an execute call made as its timer fired that
// failed: one transaction fires the timer and creates the execute task of
// the call's attempt, leased to this process but not scheduled, and
// attemptFailed then applies the failure to it.
func (e *Engine) fireTimerFailed(ctx context.Context, task *Task, idx record.TimerTask, call *Task, callErr error) error {
	var failed *Task
	err := e.update(WithPriority(ctx, PriorityUrgent), func(t *txn) error {
		failed = nil
		tt, err := t.lockForTask(task, ExecWaiting)
		if err != nil || tt == nil {
			return err
		}
		if err := tt.fireAlone(task, idx, call.FirstAttemptAt); err != nil {
			return err
		}
		x := tt.x
		if err := t.tx.ExecutionUpdate(t.ctx, x); err != nil {
			return err
		}
		t.fx.runs = append(t.fx.runs, tt.run.RunID)
		next := t.newTask(tt.run, x.ExecutionID, TaskExecute, t.now)
		next.Attempt, next.FirstAttemptAt = call.Attempt, call.FirstAttemptAt
		if err := t.tx.TaskInsert(t.ctx, []*Task{next}); err != nil {
			return err
		}
		failed = next
		return nil
	})
	if err != nil || failed == nil {
		return err
	}
	return e.attemptFailed(WithPriority(ctx, PriorityUrgent), failed, callErr)
}
