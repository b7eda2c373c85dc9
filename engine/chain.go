package engine

import (
	"math"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/iwf-server/iwf-server/engine/internal/record"
)

// parseCron parses a standard five-field cron schedule ("" means none).
func parseCron(spec string) (cron.Schedule, error) {
	if spec == "" {
		return nil, nil
	}
	s, err := cron.ParseStandard(spec)
	if err != nil {
		return nil, Errorf(CodeInvalidArgument, "invalid cronSchedule %q: %v", spec, err)
	}
	return s, nil
}

// chainNext starts the run that follows a closed one, in the same
// transaction: a workflow retry after a failure (same request, after
// backoff, within the workflow timeout), or else the next run of a cron
// schedule. Cancelled and terminated runs end their chain. Runs are chained
// one after another, so cron runs never overlap.
func (r *runTxn) chainNext() error {
	run, rd := r.run, r.rd
	if run.Status != RunFailed && run.Status != RunCompleted && run.Status != RunTimeout {
		return nil
	}
	req := rd.Start
	opts := deref(req.StartOptions)
	if p := opts.RetryPolicy; run.Status == RunFailed && p != nil {
		if max := deref(p.MaximumAttempts); max <= 0 || rd.RetryAttempt < int(max) {
			due := r.now.Add(workflowBackoff(p, rd.RetryAttempt))
			if rd.TimeoutAt == 0 || unixMs(due) < rd.TimeoutAt {
				next, err := r.createRun(req, runChain{due: due, timeoutAt: rd.TimeoutAt, retryAttempt: rd.RetryAttempt + 1,
					trace: rd.Trace, traceState: rd.TraceState, pause: rd.Pause, pausedFrom: run.RunID}, true)
				if err != nil {
					return err
				}
				if err := r.linkStartPayloads(next.run.RunID, &req); err != nil {
					return err
				}
				rd.RetriedBy = next.run.RunID
				r.record(r.event("", "RetriedAsNewRun", map[string]any{"runId": next.run.RunID, "due": due}))
				return nil
			}
		}
	}
	sched, err := parseCron(deref(opts.CronSchedule))
	if err != nil || sched == nil {
		return err
	}
	due := sched.Next(r.now)
	next, err := r.createRun(req, runChain{due: due, timeoutAt: deadline(due, req.WorkflowTimeoutSeconds), pause: rd.Pause, pausedFrom: run.RunID}, true)
	if err != nil {
		return err
	}
	if err := r.linkStartPayloads(next.run.RunID, &req); err != nil {
		return err
	}
	r.record(r.event("", "CronNextRun", map[string]any{"runId": next.run.RunID, "due": due}))
	return nil
}

// workflowBackoff is the wait before retry attempt+1 of a workflow retry
// policy (defaults: 1 s, ×2, capped at 100 s).
func workflowBackoff(p *record.WorkflowRetryPolicy, attempt int) time.Duration {
	initial, coef, maxInterval := 1.0, 2.0, 100.0
	if v := deref(p.InitialIntervalSeconds); v > 0 {
		initial = float64(v)
	}
	if v := deref(p.BackoffCoefficient); v >= 1 {
		coef = float64(v)
	}
	if v := deref(p.MaximumIntervalSeconds); v > 0 {
		maxInterval = float64(v)
	}
	secs := math.Min(initial*math.Pow(coef, float64(attempt-1)), maxInterval)
	return time.Duration(secs * float64(time.Second))
}
