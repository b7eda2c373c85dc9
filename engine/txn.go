package engine

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/iwf-server/iwf-server/engine/internal/record"
)

// txn is one attempt of one engine transaction: the store transaction, the
// time it runs at, and what it did that matters after its commit. The
// methods that make up the state machine hang off txn (and runTxn, for the
// run a step changes) instead of taking (ctx, tx, effects, run, …) lists.
//
// A store may run a transaction function more than once (see Store.Update),
// so a txn is built afresh for every attempt and nothing it collects leaves
// it before the commit: e.update applies the effects once, afterwards.
type txn struct {
	e   *Engine
	ctx context.Context
	tx  Tx
	now time.Time // read once: every step of a transaction sees one time
	fx  txEffects
}

// runTxn is a txn working on one run, whose record it has decoded. The
// run's row is written back by save (or by createRun for a new run).
type runTxn struct {
	*txn
	run *Run
	rd  *record.Run
	// lastTimerTaken names an execution whose only timer command's task
	// this transaction has taken: it has no timer task left to delete.
	lastTimerTaken string
	// answered names an execution whose execute answer this transaction
	// applies as its commands complete: it needs no execute task.
	answered string
	// actor, when set, is who closes the run (a stop or a reset): its
	// WorkflowClosed event records it.
	actor string
}

// txEffects collects what a transaction did that matters after its commit.
type txEffects struct {
	tasks []*Task  // tasks leased to this process, to schedule
	runs  []string // runs (and workflow keys) whose waiters must wake
	// closedRuns are the runs this transaction closed, as it wrote them,
	// in the order of their saves (a later save of the same run replaces
	// an earlier one): those it leaves closed are handed to the waiters
	// it wakes (notifier.notifyCommit).
	closedRuns []*Run
	events     []*HistoryEvent // history to append, in order, at the end
	started    int             // runs created
	closed     []RunStatus     // runs closed
	// timerLateness has one entry per fired timer: how late it fired.
	timerLateness []time.Duration
	// stale lists tasks whose result was dropped because another process
	// holds them or they are gone (logged at debug level).
	stale []*Task
	// states are the state executions that ended, whose spans are
	// emitted after the commit (tracing on only).
	states []endedState
}

// update runs fn in a store transaction and, after the commit, schedules the
// tasks it leased to this process, wakes long polls on changed runs and
// records metrics. fn may run more than once; only the last run's effects
// count.
//
// An attempt that saved runs counts, before its commit, as pending on the
// keys of their workflows (notifier.pend): the commit then settles them
// with the runs it left open, and a failure abandons them.
func (e *Engine) update(ctx context.Context, fn func(t *txn) error) error {
	var (
		last   *txn
		pended []string // the workflow keys the last attempt counted as pending
	)
	begin := time.Now()
	err := e.storeUpdate(ctx, func(ctx context.Context, tx Tx) error {
		e.waits.abandon(pended) // an earlier attempt's, which did not commit
		pended = nil
		t := &txn{e: e, ctx: ctx, tx: tx, now: e.cfg.Clock.Now()}
		last = t
		if err := fn(t); err != nil {
			return err
		}
		if len(t.fx.events) > 0 {
			if err := tx.HistoryAppend(ctx, t.fx.events); err != nil {
				return err
			}
		}
		t.prefetchCalls()
		pended = e.waits.pend(workflowKeys(t.fx.runs))
		return nil
	})
	e.metrics.txSeconds.observe(time.Since(begin))
	if err != nil {
		e.waits.abandon(pended)
		return err
	}
	e.committed(&last.fx, pended)
	return nil
}

// workflowKeys returns the workflow keys among the keys of changed runs,
// each once.
func workflowKeys(keys []string) []string {
	var out []string
	for _, k := range keys {
		if strings.HasPrefix(k, workflowKeyPrefix) && !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

// maxPrefetch bounds the worker-call reads one commit carries (a decision
// may start many parallel states); the calls beyond it read for themselves.
const maxPrefetch = 8

// prefetchCalls asks a store that can (CallPrefetcher) to read, right after
// the commit, what the waitUntil and execute calls this transaction makes
// due at once will be sent.
func (t *txn) prefetchCalls() {
	pf, ok := t.tx.(CallPrefetcher)
	if !ok {
		return
	}
	n := 0
	epoch := t.e.pauses.epoch.Load()
	for _, task := range t.fx.tasks {
		if n == maxPrefetch {
			return
		}
		if (task.Kind != TaskWaitUntil && task.Kind != TaskExecute) || runAt(task).After(t.now) {
			continue
		}
		n++
		pf.ReadForCallAfterCommit(task.RunID, task.ExecutionID, func(cr *CallRead) { task.prefetched, task.prefetchEpoch = cr, epoch })
	}
}

// committed applies a committed transaction's effects, once. pended are
// the workflow keys its commit settles (notifier.pend).
func (e *Engine) committed(fx *txEffects, pended []string) {
	if fx.started > 0 {
		e.metrics.started.add(int64(fx.started))
	}
	for _, s := range fx.closed {
		e.metrics.closed.inc(string(s))
	}
	for _, late := range fx.timerLateness {
		e.metrics.timersFired.inc()
		e.metrics.timerLateness.observe(late)
	}
	if len(fx.stale) > 0 {
		e.metrics.stale.add(int64(len(fx.stale)))
	}
	for _, t := range fx.stale {
		e.log.Debug().Str("workflowId", t.WorkflowID).Str("runId", t.RunID).Str("stateExecutionId", t.ExecutionID).
			Str("task", string(t.Kind)).Int("attempt", t.Attempt).Msg("dropped a stale result: the task is gone or leased to another process")
	}
	for i := range fx.states {
		e.emitState(&fx.states[i])
	}
	// The hook runs before anything can observe the commit through this
	// process (a woken long poll, the next task): a test that saw the
	// outcome finds the commit in its log.
	if e.cfg.OnCommit != nil && len(fx.events) > 0 {
		e.cfg.OnCommit(fx.events)
	}
	e.disp.schedule(fx.tasks...)
	var closed map[string]*Run
	for _, r := range fx.closedRuns {
		if closed == nil {
			closed = make(map[string]*Run, 2*len(fx.closedRuns))
		}
		if r.Status == RunRunning {
			delete(closed, r.RunID)
			delete(closed, workflowKey(r.WorkflowID))
			continue
		}
		closed[r.RunID], closed[workflowKey(r.WorkflowID)] = r, r
	}
	// fx.runs pairs each run saved with its workflow's key; the last run
	// saved of a workflow is the one its mark follows. Marks settle before
	// the waiters wake: a getWithWait that subscribes after this wake-up
	// finds the mark of a closed run gone, and reads.
	for _, k := range pended {
		open := ""
		for i := len(fx.runs) - 1; i > 0; i-- {
			if fx.runs[i] == k {
				if id := fx.runs[i-1]; closed[id] == nil {
					open = id
				}
				break
			}
		}
		e.waits.settle(k, open)
	}
	for _, k := range fx.runs {
		e.waits.notifyCommit(k, closed[k])
	}
	if e.feed != nil && len(fx.runs) > 0 {
		e.feed.PublishChanges(Changes{Keys: fx.runs})
	}
}

// forRun returns a runTxn of this transaction for a run and its record.
func (t *txn) forRun(run *Run, rd *record.Run) *runTxn {
	return &runTxn{txn: t, run: run, rd: rd}
}

// record queues history events; update appends them, in order, with one
// statement at the end of the transaction.
func (t *txn) record(events ...*HistoryEvent) {
	t.fx.events = append(t.fx.events, events...)
}

// event builds a history event of the run.
func (r *runTxn) event(executionID, typ string, data any) *HistoryEvent {
	ev := &HistoryEvent{RunID: r.run.RunID, At: r.now, Type: typ, ExecutionID: executionID}
	if data != nil {
		ev.Data = encode(data)
	}
	return ev
}

// save writes the run's row (its status and record) and wakes its waiters.
func (r *runTxn) save() error {
	if err := r.executingStateIDs(); err != nil {
		return err
	}
	r.run.Data = encode(r.rd)
	r.fx.runs = append(r.fx.runs, r.run.RunID, workflowKey(r.run.WorkflowID))
	if r.run.Status != RunRunning || slices.ContainsFunc(r.fx.closedRuns, func(c *Run) bool { return c.RunID == r.run.RunID }) {
		// The last save of a run counts: one saved again as running
		// after a close is handed to nobody.
		saved := *r.run
		r.fx.closedRuns = append(r.fx.closedRuns, &saved)
	}
	return r.tx.RunUpdate(r.ctx, r.run)
}
