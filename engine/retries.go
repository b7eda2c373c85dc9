package engine

// Retries of state API calls: the effective retry policy, backoff, and what
// happens when the policy is exhausted (proceed, or fail the workflow).

import (
	"context"
	"errors"
	"math"
	"sync"
	"time"

	"github.com/iwf-server/iwf-server/engine/internal/record"
)

// retryPolicy returns the effective retry policy of one state API (the
// legacy field wins when present).
func retryPolicy(o *record.StateOptions, waitUntil bool) *record.RetryPolicy {
	if o == nil {
		return nil
	}
	if waitUntil {
		if o.StartAPIRetryPolicy != nil {
			return o.StartAPIRetryPolicy
		}
		return o.WaitUntilAPIRetryPolicy
	}
	if o.DecideAPIRetryPolicy != nil {
		return o.DecideAPIRetryPolicy
	}
	return o.ExecuteAPIRetryPolicy
}

// nextBackoff returns the wait before attempt+1, at least minWait, or
// ok=false when the policy allows no further attempt.
func nextBackoff(p *record.RetryPolicy, attempt int, firstAttempt, now time.Time, minWait time.Duration) (time.Duration, bool) {
	initial, coef, maxInterval := 1.0, 2.0, 100.0
	var maxAttempts, maxDuration int32
	if p != nil {
		if p.InitialIntervalSeconds != nil && *p.InitialIntervalSeconds > 0 {
			initial = float64(*p.InitialIntervalSeconds)
		}
		if p.BackoffCoefficient != nil && *p.BackoffCoefficient >= 1 {
			coef = float64(*p.BackoffCoefficient)
		}
		if p.MaximumIntervalSeconds != nil && *p.MaximumIntervalSeconds > 0 {
			maxInterval = float64(*p.MaximumIntervalSeconds)
		}
		maxAttempts, maxDuration = deref(p.MaximumAttempts), deref(p.MaximumAttemptsDurationSeconds)
	}
	if maxAttempts > 0 && attempt >= int(maxAttempts) {
		return 0, false
	}
	secs := math.Min(initial*math.Pow(coef, float64(attempt-1)), maxInterval)
	wait := time.Duration(secs * float64(time.Second))
	if wait < minWait {
		wait = minWait
	}
	if maxDuration > 0 && now.Add(wait).Sub(firstAttempt) >= time.Duration(maxDuration)*time.Second {
		return 0, false
	}
	return wait, true
}

// attemptFailedLog logs a failed state API attempt at warn level, so that an
// operator sees a failing worker without reading histories. Per workflow at
// most one line per failureLogInterval is written; the lines left out are
// counted in the next one (the history has every attempt).
func (e *Engine) attemptFailedLog(t *Task, s *apiSnapshot, api string, err error) {
	suppressed, ok := e.failureLogs.allow(s.run.WorkflowID, e.cfg.Clock.Now())
	if !ok {
		return
	}
	ev := e.log.Warn().Str("workflowId", s.run.WorkflowID).Str("runId", s.run.RunID).
		Str("stateExecutionId", s.x.ExecutionID).Str("api", api).Int("attempt", t.Attempt)
	var ce *WorkerCallError
	if errors.As(err, &ce) && ce.Status != 0 {
		ev = ev.Int("status", ce.Status)
	}
	if suppressed > 0 {
		ev = ev.Int("suppressed", suppressed)
	}
	ev.Str("error", truncate(err.Error(), 300)).Msg("worker call failed")
}

// failureLogInterval is how often a workflow's failed worker calls are
// logged at most.
const failureLogInterval = 10 * time.Second

// logLimiter lets one log line per key through per failureLogInterval and
// counts the others. It keeps at most maxKeys keys.
type logLimiter struct {
	mu   sync.Mutex
	last map[string]limitEntry
}

type limitEntry struct {
	at         time.Time
	suppressed int
}

const maxLimiterKeys = 10_000

// allow reports whether a line for key may be written at now, and how many
// were held back since the last one.
func (l *logLimiter) allow(key string, now time.Time) (int, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.last == nil || len(l.last) >= maxLimiterKeys {
		l.last = map[string]limitEntry{}
	}
	e, seen := l.last[key]
	if seen && now.Sub(e.at) < failureLogInterval {
		e.suppressed++
		l.last[key] = e
		return 0, false
	}
	l.last[key] = limitEntry{at: now}
	return e.suppressed, true
}

// attemptFailed records a failed state API attempt: it schedules the next
// attempt with backoff, or, when the retry policy is exhausted, applies the
// failure policy (proceed, or fail the workflow).
func (e *Engine) attemptFailed(ctx context.Context, task *Task, callErr error) error {
	waitUntil := task.Kind == TaskWaitUntil
	want := ExecExecute
	if waitUntil {
		want = ExecWaitUntil
	}
	msg := callErr.Error()
	var ce *WorkerCallError
	errors.As(callErr, &ce)
	failure := record.Failure{API: string(want), Attempt: task.Attempt, Error: truncate(msg, 1000)}
	var retryAfter time.Duration
	nonRetryable := false
	if ce != nil {
		failure.Status = ce.Status
		retryAfter, nonRetryable = min(ce.RetryAfter, MaxRetryAfter), ce.NonRetryable
	}
	return e.update(ctx, func(t *txn) error {
		run, err := t.tx.RunLock(t.ctx, task.RunID)
		if err != nil || run.Status != RunRunning {
			if errors.Is(err, ErrNotFound) {
				err = nil
			}
			return err
		}
		x, err := t.tx.ExecutionGet(t.ctx, task.RunID, task.ExecutionID)
		if err != nil || x.Status != want {
			if errors.Is(err, ErrNotFound) {
				err = nil
			}
			return err
		}
		xd, err := decodeExec(x)
		if err != nil {
			return err
		}
		rd, err := decodeRun(run)
		if err != nil {
			return err
		}
		wait, retry := time.Duration(0), false
		if !nonRetryable {
			wait, retry = nextBackoff(retryPolicy(xd.Options, waitUntil), task.Attempt, task.FirstAttemptAt, t.now, retryAfter)
		}
		// Like an activity's retries on iWF, which end at its
		// schedule-to-close timeout (the workflow's run timeout): an attempt
		// that would start at or after the workflow's deadline is not made,
		// so the failure policy applies with this attempt's error.
		atDeadline := retry && rd.TimeoutAt > 0 && unixMs(t.now.Add(wait)) >= rd.TimeoutAt
		data := map[string]any{"attempt": task.Attempt, "error": failure.Error}
		if atDeadline {
			data["retriesEndAt"] = "workflowTimeout"
		}
		if failure.Status != 0 {
			data["status"] = failure.Status
		}
		if nonRetryable {
			data["nonRetryable"] = true
		}
		if retryAfter > 0 {
			data["retryAfterMs"] = retryAfter.Milliseconds()
		}
		t.record(&HistoryEvent{RunID: run.RunID, At: t.now, Type: string(task.Kind) + "AttemptFailed", ExecutionID: x.ExecutionID,
			Data: encode(data)})
		failure.At = unixMs(t.now)
		xd.LastFailure = &failure
		x.Data = encode(xd)
		if retry && !atDeadline {
			if err := t.tx.ExecutionUpdate(t.ctx, x); err != nil {
				return err
			}
			return t.reschedule(task, t.now.Add(wait), task.Attempt+1)
		}
		removed, err := t.tx.TaskDelete(t.ctx, task.ID, e.cfg.NodeID)
		if err != nil || !removed {
			return err
		}
		tt := &taskTxn{runTxn: t.forRun(run, rd), x: x, xd: xd}
		unlock(rd, apiLockHolder(task.ExecutionID, task.Kind))
		return tt.attemptsExhausted(waitUntil, msg)
	})
}

// attemptsExhausted applies a state API's failure policy once its retry
// policy allows no further attempt.
func (tt *taskTxn) attemptsExhausted(waitUntil bool, msg string) error {
	x, xd := tt.x, tt.xd
	o := deref(xd.Options)
	if waitUntil {
		proceed := deref(o.WaitUntilAPIFailurePolicy) == record.WaitUntilProceedOnFailure
		if o.StartAPIFailurePolicy != nil {
			proceed = *o.StartAPIFailurePolicy == record.StartAPIProceedToDecide
		}
		if proceed {
			xd.Results = &record.CommandResults{StateStartAPISucceeded: ptr(false), StateWaitUntilFailed: ptr(true)}
			x.Status = ExecExecute
			x.Data = encode(xd)
			if err := tt.tx.ExecutionUpdate(tt.ctx, x); err != nil {
				return err
			}
			if err := tt.insertTasks(tt.newTask(tt.run, x.ExecutionID, TaskExecute, tt.now)); err != nil {
				return err
			}
			return tt.save()
		}
	} else if deref(o.ExecuteAPIFailurePolicy) == record.ExecuteProceedToConfigured && deref(o.ExecuteAPIFailureProceedStateID) != "" {
		x.Status = ExecFailed
		finished(tt.rd, x, xd)
		tt.stateEnded(x)
		if err := tt.tx.ExecutionUpdate(tt.ctx, x); err != nil {
			return err
		}
		move := record.Movement{StateID: *o.ExecuteAPIFailureProceedStateID, StateInput: xd.Input, StateOptions: o.ExecuteAPIFailureProceedStateOptions}
		if err := tt.startStates([]record.Movement{move}, tt.now); err != nil {
			return err
		}
		return tt.save()
	}
	x.Status = ExecFailed
	finished(tt.rd, x, xd)
	tt.stateEnded(x)
	if err := tt.tx.ExecutionUpdate(tt.ctx, x); err != nil {
		return err
	}
	if err := tt.closeRun(RunFailed, errStateAPIFail, msg); err != nil {
		return err
	}
	return tt.save()
}
