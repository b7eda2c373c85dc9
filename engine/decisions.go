package engine

// Applying worker answers: a waitUntil answer's commands, an execute
// answer's state decision, and what both write (attributes, publishes).

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine/internal/record"
)

// upserts are the writes of a worker answer, in the order they apply.
type upserts struct {
	searchAttrs []record.SearchAttribute
	dataAttrs   []record.KeyValue
	publishes   []record.Publish
}

func upsertsIn(sas *[]iwfapi.SearchAttribute, das *[]iwfapi.KeyValue, pubs *[]iwfapi.InterStateChannelPublishing) upserts {
	return upserts{
		searchAttrs: slice(mapSlice(sas, searchAttributeIn)),
		dataAttrs:   slice(mapSlice(das, kvIn)),
		publishes:   slice(mapSlice(pubs, publishIn)),
	}
}

func skipsWaitUntil(o *record.StateOptions) bool {
	if o == nil {
		return false
	}
	if o.SkipStartAPI != nil {
		return *o.SkipStartAPI
	}
	return deref(o.SkipWaitUntil)
}

// startStates creates one state execution per movement, in order, with
// execution ids <stateId>-<n>, and their first tasks.
func (r *runTxn) startStates(moves []record.Movement, due time.Time) error {
	if len(moves) == 0 {
		return nil
	}
	rd := r.rd
	cp := &record.Checkpoint{Counters: maps.Clone(rd.Counters), Outputs: len(rd.Outputs), Graceful: rd.Graceful}
	batch := ""
	execs := make([]*Execution, 0, len(moves))
	tasks := make([]*Task, 0, len(moves))
	events := make([]*HistoryEvent, 0, len(moves))
	for _, m := range moves {
		rd.Counters[m.StateID]++
		id := m.StateID + "-" + strconv.Itoa(rd.Counters[m.StateID])
		xd := record.Execution{V: record.FormatVersion, Input: m.StateInput, Options: m.StateOptions, WaitForKey: deref(m.WaitForKey)}
		if batch == "" {
			batch, xd.Checkpoint = id, cp
		}
		xd.Batch = batch
		x := &Execution{RunID: r.run.RunID, ExecutionID: id, StateID: m.StateID, CreatedAt: r.now}
		kind := TaskWaitUntil
		x.Status = ExecWaitUntil
		skip := skipsWaitUntil(m.StateOptions)
		if skip {
			kind, x.Status = TaskExecute, ExecExecute
		}
		if xd.Counted = countsAsExecuting(rd.Config, skip); xd.Counted {
			if rd.Executing == nil {
				rd.Executing = map[string]int{}
			}
			rd.Executing[m.StateID]++
		}
		x.Data = encode(xd)
		execs = append(execs, x)
		tasks = append(tasks, r.newTask(r.run, id, kind, due))
		events = append(events, r.event(id, "StateExecutionStarted", map[string]any{"stateId": m.StateID, "skipWaitUntil": kind == TaskExecute}))
	}
	if err := r.tx.ExecutionInsert(r.ctx, execs); err != nil {
		return err
	}
	if rd.LiveCounted {
		rd.Live += len(execs)
	}
	r.record(events...)
	return r.insertTasks(tasks...)
}

// closeRun ends a run: live executions are abandoned, pending tasks and
// timers dropped, and the run that follows it (retry, cron) created. The
// caller saves the run.
func (r *runTxn) closeRun(status RunStatus, errType, errMsg string) error {
	live, err := r.tx.ExecutionList(r.ctx, r.run.RunID, LiveStatuses...)
	if err != nil {
		return err
	}
	r.verifyLiveCount(live)
	return r.closeRunLive(live, status, errType, errMsg)
}

// checkLiveCount, set by the package's tests, makes every list of a run's
// live executions check the run's live count against it.
var checkLiveCount bool

// verifyLiveCount panics, when checkLiveCount is set, if the run counts
// its live executions and the count differs from what the store listed.
func (r *runTxn) verifyLiveCount(live []*Execution) {
	if checkLiveCount && r.rd.LiveCounted && r.rd.Live != len(live) {
		panic(fmt.Sprintf("run %s counts %d live executions, the store lists %d", r.run.RunID, r.rd.Live, len(live)))
	}
}

// closeRunLive is closeRun for a caller that has just listed the run's live
// executions in this transaction.
func (r *runTxn) closeRunLive(live []*Execution, status RunStatus, errType, errMsg string) error {
	r.run.Status = status
	r.run.ClosedAt = r.now
	r.fx.closed = append(r.fx.closed, status)
	r.rd.ErrorType, r.rd.ErrorMsg = errType, errMsg
	r.rd.Executing = nil
	r.rd.Locks = nil
	r.rd.Live = 0
	for _, x := range live {
		x.Status = ExecAbandoned
		if err := r.tx.ExecutionUpdate(r.ctx, x); err != nil {
			return err
		}
	}
	if err := r.tx.TaskDeleteByRun(r.ctx, r.run.RunID); err != nil {
		return err
	}
	data := map[string]any{"status": status}
	if errType != "" {
		data["errorType"] = errType
	}
	if errMsg != "" {
		data["errorMessage"] = errMsg
	}
	if r.actor != "" {
		data["actor"] = r.actor
	}
	r.record(r.event("", "WorkflowClosed", data))
	return r.chainNext()
}

// publish appends internal-channel messages in order.
func (r *runTxn) publish(executionID string, msgs []record.Publish) error {
	if len(msgs) == 0 {
		return nil
	}
	rows := make([]*Message, 0, len(msgs))
	names := make([]string, 0, len(msgs))
	for _, m := range msgs {
		if m.ChannelName == "" {
			return Errorf(CodeInvalidArgument, "an internal channel message needs a channelName")
		}
		if err := CheckName("channelName", m.ChannelName); err != nil {
			return err
		}
		rows = append(rows, &Message{RunID: r.run.RunID, Kind: ChannelInternal, Channel: m.ChannelName, Value: encodeValue(m.Value), CreatedAt: r.now})
		names = append(names, m.ChannelName)
	}
	if err := r.tx.MessageAppend(r.ctx, rows); err != nil {
		return err
	}
	r.record(r.event(executionID, "InternalMessagesPublished", map[string]any{"channels": names}))
	return nil
}

// applyUpserts applies a worker answer's search and data attribute upserts
// and internal channel publishes, in that order. A search attribute the
// server cannot index fails the workflow (invalid user code).
func (r *runTxn) applyUpserts(executionID string, u upserts) error {
	if len(u.searchAttrs) > 0 {
		attrs, err := r.e.toStoreSearchAttributes(u.searchAttrs, r.now)
		if err != nil {
			return err
		}
		if err := r.tx.SearchAttributeUpsert(r.ctx, r.run.RunID, attrs); err != nil {
			return err
		}
	}
	if len(u.dataAttrs) > 0 {
		attrs, err := toStoreDataAttributes(u.dataAttrs)
		if err != nil {
			return err
		}
		if err := r.tx.DataAttributeUpsert(r.ctx, r.run.RunID, attrs); err != nil {
			return err
		}
	}
	return r.publish(executionID, u.publishes)
}

// failForInvalidAnswer turns a domain error found while applying a worker
// answer into a workflow failure; other errors pass through.
func (r *runTxn) failForInvalidAnswer(err error) error {
	var de *Error
	if errors.As(err, &de) && de.Code == CodeInvalidArgument {
		if cerr := r.closeRun(RunFailed, errInvalidUserCode, de.Message); cerr != nil {
			return cerr
		}
		return r.save()
	}
	return err
}

// applyWaitUntil applies a waitUntil answer: its writes, its commands, and
// whatever of them the buffers and the clock already satisfy.
func (e *Engine) applyWaitUntil(ctx context.Context, task *Task, s *apiSnapshot, resp *iwfapi.WorkflowStateStartResponse) error {
	// The answer's big payloads go to the external store first; a store
	// that cannot take them fails the task, which calls again.
	off, err := e.offload(ctx, s.run.WorkflowID, s.run.RunID, resp.UpsertDataObjects, resp.UpsertStateLocals, resp.PublishToInterStateChannel)
	if err != nil {
		return err
	}
	commands := mapPtr(resp.CommandRequest, commandsIn)
	locals := mapSlice(resp.UpsertStateLocals, kvIn)
	writes := upsertsIn(resp.UpsertSearchAttributes, resp.UpsertDataObjects, resp.PublishToInterStateChannel)
	return e.updateTaking(ctx, task, ExecWaitUntil, s, func(tt *taskTxn) error {
		t := tt.txn
		x, xd := tt.x, tt.xd
		unlock(tt.rd, apiLockHolder(task.ExecutionID, task.Kind))
		if err := tt.applyUpserts(x.ExecutionID, writes); err != nil {
			return tt.failForInvalidAnswer(err)
		}
		if err := tt.keepPayloads(off, tt.run.RunID); err != nil {
			return err
		}
		xd.Commands, xd.StateLocals = commands, locals
		req := flatCommands(commands)
		n := len(req.Commands)
		xd.Done, xd.Values, xd.FireAt = make([]bool, n), make([]*record.Value, n), make([]int64, n)
		if commands != nil {
			for i, tc := range slice(commands.TimerCommands) {
				xd.FireAt[i] = timerFireAt(tc, t.now)
			}
		}
		x.Status = ExecWaiting
		if len(tt.rd.PendingSkips) > 0 {
			applyPendingSkips(tt.rd, x, xd)
		}
		tt.record(tt.event(x.ExecutionID, "WaitUntilCompleted", map[string]any{"attempt": task.Attempt, "commands": n}))
		if _, err := tt.register(x, xd); err != nil {
			return err
		}
		if x.Status == ExecWaiting {
			if timers := tt.timerTasks(x, xd, req); len(timers) > 0 {
				if err := tt.insertTasks(timers...); err != nil {
					return err
				}
			}
		}
		x.Data = encode(xd)
		if err := t.tx.ExecutionUpdate(t.ctx, x); err != nil {
			return err
		}
		if len(writes.publishes) > 0 {
			if err := tt.deliver(x.ExecutionID); err != nil {
				return err
			}
		}
		return tt.save()
	})
}

// The range of timer commands: a duration of at most 100 years (a
// time.Duration holds 292), a firing time between the Unix epoch and the
// end of year 9999. Computed naively, a time beyond these overflows and the
// timer would fire at once.
const (
	maxTimerDurationSeconds = 100 * 365 * 24 * 3600
	maxTimerFiringSeconds   = 253402300799 // 9999-12-31T23:59:59Z
)

// checkTimers rejects timer commands outside the supported range; the
// waitUntil answer then counts as a failed attempt, like any invalid
// answer.
func checkTimers(c *record.Commands) error {
	if c == nil {
		return nil
	}
	for _, tc := range slice(c.TimerCommands) {
		if d := tc.DurationSeconds; d != nil && (*d < 0 || *d > maxTimerDurationSeconds) {
			return fmt.Errorf("timer command %q: durationSeconds %d is outside the supported range 0..%d", deref(tc.CommandID), *d, int64(maxTimerDurationSeconds))
		}
		if f := tc.FiringUnixTimestampSeconds; f != nil && (*f < 0 || *f > maxTimerFiringSeconds) {
			return fmt.Errorf("timer command %q: firingUnixTimestampSeconds %d is outside the supported range 0..%d", deref(tc.CommandID), *f, int64(maxTimerFiringSeconds))
		}
	}
	return nil
}

// timerFireAt is when a timer command fires (unix ms).
func timerFireAt(tc record.TimerCommand, now time.Time) int64 {
	switch {
	case tc.DurationSeconds != nil:
		// Rounded up: stored in milliseconds, a timer never fires before
		// its duration has passed.
		return unixMs(ceilMillisecond(now.Add(time.Duration(*tc.DurationSeconds) * time.Second)))
	case tc.FiringUnixTimestampSeconds != nil:
		return *tc.FiringUnixTimestampSeconds * 1000
	}
	return 0
}

// completionKey is the key under which a watched execution's completion is
// published for waitForStateCompletion ("" when nobody watches it).
func completionKey(rd *record.Run, x *Execution, xd *record.Execution) string {
	watched := false
	for _, id := range slice(rd.Start.WaitForCompletionStateExecutionIDs) {
		if id == x.ExecutionID {
			watched = true
		}
	}
	for _, id := range slice(rd.Start.WaitForCompletionStateIDs) {
		if id == x.StateID {
			watched = true
		}
	}
	if !watched {
		return ""
	}
	if xd.WaitForKey != "" {
		return "key:" + x.StateID + ":" + xd.WaitForKey
	}
	return "id:" + x.ExecutionID
}

// applyExecute applies an execute answer: its writes and its decision.
func (e *Engine) applyExecute(ctx context.Context, task *Task, s *apiSnapshot, resp *iwfapi.WorkflowStateDecideResponse) error {
	off, err := e.offload(ctx, s.run.WorkflowID, s.run.RunID, executeStored(resp)...)
	if err != nil {
		return err
	}
	decision := decisionIn(deref(resp.StateDecision))
	writes := upsertsIn(resp.UpsertSearchAttributes, resp.UpsertDataObjects, resp.PublishToInterStateChannel)
	return e.updateTaking(ctx, task, ExecExecute, s, func(tt *taskTxn) error {
		if err := tt.keepPayloads(off, tt.run.RunID); err != nil {
			return err
		}
		return tt.applyExecuteAnswer(task, decision, writes)
	})
}

// executeStored are the parts of an execute answer that hold the payloads
// the engine stores (its recordEvents and state locals it does not).
func executeStored(resp *iwfapi.WorkflowStateDecideResponse) []any {
	return []any{resp.UpsertDataObjects, resp.PublishToInterStateChannel, resp.StateDecision}
}

// applyExecuteAnswer applies an execute answer to the execution of tt, in
// phase execute: the answer's writes, the execution's completion and the
// decision; then it saves the run.
func (tt *taskTxn) applyExecuteAnswer(task *Task, decision record.Decision, writes upserts) error {
	t := tt.txn
	x, xd := tt.x, tt.xd
	if key := completionKey(tt.rd, x, xd); key != "" {
		if tt.rd.Completions == nil {
			tt.rd.Completions = map[string]record.StateOutput{}
		}
		tt.rd.Completions[key] = record.StateOutput{CompletedStateID: x.StateID, CompletedStateExecutionID: x.ExecutionID}
	}
	unlock(tt.rd, apiLockHolder(task.ExecutionID, task.Kind))
	if err := tt.applyUpserts(x.ExecutionID, writes); err != nil {
		return tt.failForInvalidAnswer(err)
	}
	x.Status = ExecCompleted
	finished(tt.rd, x, xd)
	tt.stateEnded(x)
	if err := t.tx.ExecutionUpdate(t.ctx, x); err != nil {
		return err
	}
	tt.record(tt.event(x.ExecutionID, "ExecuteCompleted", map[string]any{"attempt": task.Attempt, "decision": decision}))
	if len(writes.publishes) > 0 {
		if err := tt.deliver(""); err != nil {
			return err
		}
	}
	if err := tt.applyDecision(x, decision); err != nil {
		return err
	}
	return tt.save()
}

// addOutput appends a state's output to the run's results.
func (r *runTxn) addOutput(x *Execution, out *record.Value) {
	if out == nil {
		return
	}
	r.rd.Outputs = append(r.rd.Outputs, record.StateOutput{CompletedStateID: x.StateID, CompletedStateExecutionID: x.ExecutionID, CompletedStateOutput: out})
}

// applyDecision processes an execute answer's state decision (iWF §5.6–5.7).
func (r *runTxn) applyDecision(x *Execution, d record.Decision) error {
	moves := slice(d.NextStates)
	if cc := d.ConditionalClose; cc != nil {
		return r.conditionalClose(x, cc, moves)
	}
	for _, m := range moves {
		if err := CheckName("stateId", m.StateID); err != nil {
			return r.invalidDecision("invalid state decisions. " + err.Error())
		}
		if isReserved(m.StateID) && len(moves) > 1 {
			return r.invalidDecision("invalid state decisions. Closing workflow decision cannot be combined with other state decisions")
		}
	}
	if len(moves) == 1 && isReserved(moves[0].StateID) {
		m := moves[0]
		switch m.StateID {
		case GracefulCompletingState:
			r.addOutput(x, m.StateInput)
			r.rd.Graceful = true
			return r.completeIfIdle()
		case ForceCompletingState:
			r.addOutput(x, m.StateInput)
			return r.closeRun(RunCompleted, "", "")
		case ForceFailingState:
			r.addOutput(x, m.StateInput)
			return r.closeRun(RunFailed, errStateDecisionFailing, "")
		case DeadEndState:
			return r.completeIfIdle()
		default:
			return r.invalidDecision("invalid state decisions. Unknown reserved stateId " + m.StateID)
		}
	}
	return r.startStates(moves, r.now)
}

// conditionalClose completes the run when the named channel is empty, and
// otherwise starts the decision's next states.
func (r *runTxn) conditionalClose(x *Execution, cc *record.ConditionalClose, moves []record.Movement) error {
	var kind ChannelKind
	switch deref(cc.ConditionalCloseType) {
	case record.CloseOnInternalChannelEmpty:
		kind = ChannelInternal
	case record.CloseOnSignalChannelEmpty:
		kind = ChannelSignal
	default:
		return r.invalidDecision(fmt.Sprintf("invalid state decisions. Unsupported ConditionalCloseType %s", deref(cc.ConditionalCloseType)))
	}
	head, err := r.tx.MessagePeek(r.ctx, r.run.RunID, kind, deref(cc.ChannelName), 1)
	if err != nil {
		return err
	}
	if len(head) == 0 {
		r.addOutput(x, cc.CloseInput)
		return r.closeRun(RunCompleted, "", "")
	}
	for _, m := range moves {
		if isReserved(m.StateID) {
			return r.invalidDecision("invalid ConditionUnmetDecision with stateId: " + m.StateID)
		}
	}
	return r.startStates(moves, r.now)
}

// invalidDecision fails the run for a decision the engine cannot apply.
func (r *runTxn) invalidDecision(msg string) error {
	return r.closeRun(RunFailed, errInvalidUserCode, msg)
}

// completeIfIdle completes the run when graceful completion was requested and
// no execution is live any more.
func (r *runTxn) completeIfIdle() error {
	if !r.rd.Graceful || r.run.Status != RunRunning {
		return nil
	}
	if r.rd.LiveCounted && r.rd.Live >= 0 && !checkLiveCount {
		// The run counts its live executions: no statement is needed to
		// tell whether it is idle. (A count below zero would be a bug: the
		// list below then decides.)
		if r.rd.Live > 0 {
			return nil
		}
		return r.closeRunLive(nil, RunCompleted, "", "")
	}
	// One statement both tells whether the run is idle and, when it is,
	// gives closeRun its (empty) list of live executions.
	live, err := r.tx.ExecutionList(r.ctx, r.run.RunID, LiveStatuses...)
	if err != nil {
		return err
	}
	r.verifyLiveCount(live)
	if len(live) > 0 {
		return nil
	}
	return r.closeRunLive(live, RunCompleted, "", "")
}
