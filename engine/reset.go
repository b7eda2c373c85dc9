package engine

import (
	"context"
	"errors"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine/internal/record"
)

// ResetWorkflow starts a new run of a workflow from an earlier point of a
// base run and ends the base run if it is still running
// (POST /api/v1/workflow/reset).
//
//   - BEGINNING: the new run starts from the original start request, and
//     every external input the base run received (signals, publishes, data
//     and search attribute writes, timer skips, config updates, RPC
//     mutations) is applied again in order, unless skipSignalReapply (or,
//     for locking RPCs, skipUpdateReapply) says not to.
//   - STATE_ID / STATE_EXECUTION_ID: the new run resumes just before the
//     decision that started the named execution (the first execution of the
//     state for STATE_ID): execution counters, results and the graceful
//     flag roll back to that point and the executions of that decision start
//     again with their ids. Data and search attributes and unconsumed channel
//     messages are those of the base run at reset time (docs/compatibility.md).
//   - HISTORY_EVENT_ID / HISTORY_EVENT_TIME name a point in this server's
//     history (see the dump): the latest execution started at or before it.
func (e *Engine) ResetWorkflow(ctx context.Context, req iwfapi.WorkflowResetRequest) (iwfapi.WorkflowResetResponse, error) {
	return e.resetWorkflow(ctx, req, nil)
}

// resetWorkflow is ResetWorkflow with then called in its transaction (see
// mutateRunThen).
func (e *Engine) resetWorkflow(ctx context.Context, req iwfapi.WorkflowResetRequest, then func(t *txn) error) (iwfapi.WorkflowResetResponse, error) {
	if req.WorkflowId == "" {
		return iwfapi.WorkflowResetResponse{}, errNoWorkflowID()
	}
	if err := checkResetPoint("", req.ResetType, req.HistoryEventId, req.HistoryEventTime, req.StateId, req.StateExecutionId); err != nil {
		return iwfapi.WorkflowResetResponse{}, err
	}
	if err := e.checkRunWorkerURL(ctx, req.WorkflowId, deref(req.WorkflowRunId)); err != nil {
		return iwfapi.WorkflowResetResponse{}, err
	}
	var newRunID string
	err := e.update(ctx, func(t *txn) error {
		newRunID = ""
		if _, err := t.tx.WorkflowLock(t.ctx, req.WorkflowId); err != nil {
			return err
		}
		id, err := resolveRun(t.ctx, t.tx, req.WorkflowId, deref(req.WorkflowRunId))
		if err != nil {
			return err
		}
		base, err := t.tx.RunLock(t.ctx, id)
		if err != nil {
			return err
		}
		brd, err := decodeRun(base)
		if err != nil {
			return err
		}
		history, err := t.tx.HistoryList(t.ctx, id, 0, 0)
		if err != nil {
			return err
		}
		point, err := t.resetPoint(base, history, req)
		if err != nil {
			return err
		}
		b := t.forRun(base, brd)
		b.actor = ActorOf(ctx)
		// The new run of a paused running run is paused too.
		var carry *record.Pause
		if base.Status == RunRunning {
			carry = brd.Pause
		}
		if base.Status == RunRunning {
			if err := b.closeRun(RunTerminated, "", "reset"); err != nil {
				return err
			}
			if err := b.save(); err != nil {
				return err
			}
		}
		var r *runTxn
		chain := runChain{due: t.now, timeoutAt: deadline(t.now, brd.Start.WorkflowTimeoutSeconds), pause: carry, pausedFrom: base.RunID}
		if point == nil {
			r, err = t.resetToBeginning(brd, history, req, chain)
		} else {
			r, err = t.resetToExecution(b, point, history, req, chain)
		}
		if err != nil {
			return err
		}
		newRunID = r.run.RunID
		// The new run shares the base run's payloads: its external
		// objects now live as long as either run.
		if err := t.tx.PayloadCopy(t.ctx, base.RunID, newRunID, t.now); err != nil {
			return err
		}
		data := map[string]any{"resetType": req.ResetType, "newRunId": newRunID}
		if b.actor != "" {
			data["actor"] = b.actor
		}
		b.record(b.event("", "Reset", data))
		if then != nil {
			return then(t)
		}
		return nil
	})
	return iwfapi.WorkflowResetResponse{WorkflowRunId: newRunID}, err
}

// maxDatetimeBytes bounds a historyEventTime: the longest it can be read
// as (RFC 3339 with nanoseconds and an offset) is 35 bytes.
const maxDatetimeBytes = 64

// checkResetPoint refuses a reset whose type lacks the point it names
// (the field names are prefixed with prefix, "reset." in a batch):
// HISTORY_EVENT_ID without a positive historyEventId, HISTORY_EVENT_TIME
// without a time it can read, STATE_ID without a stateId,
// STATE_EXECUTION_ID without a stateExecutionId; and an unknown type. A
// single reset and a batch's check their request with it before anything
// is stored.
func checkResetPoint(prefix string, rt iwfapi.WorkflowResetType, eventID *int32, eventTime, stateID, executionID *string) error {
	need := func(field, what string) error {
		return Errorf(CodeInvalidArgument, "resetType %s needs %s%s, %s", rt, prefix, field, what)
	}
	switch rt {
	case iwfapi.WorkflowResetTypeBeginning:
	case iwfapi.WorkflowResetTypeHistoryEventId:
		if deref(eventID) <= 0 {
			return need("historyEventId", "a positive history event id (see the history or the dump)")
		}
	case iwfapi.WorkflowResetTypeHistoryEventTime:
		s := deref(eventTime)
		if s == "" {
			return need("historyEventTime", "a time: RFC 3339, Unix nanoseconds or a relative time like 15m")
		}
		if len(s) > maxDatetimeBytes {
			return Errorf(CodeInvalidArgument, "%shistoryEventTime is %d bytes long; the limit is %d", prefix, len(s), maxDatetimeBytes)
		}
		if _, err := parseDatetime(s, time.Unix(0, 0)); err != nil {
			return Errorf(CodeInvalidArgument, "%shistoryEventTime: %v", prefix, err)
		}
	case iwfapi.WorkflowResetTypeStateId:
		if deref(stateID) == "" {
			return need("stateId", "the state whose first execution the reset resumes before")
		}
		return CheckName(prefix+"stateId", *stateID)
	case iwfapi.WorkflowResetTypeStateExecutionId:
		if deref(executionID) == "" {
			return need("stateExecutionId", "the state execution the reset resumes before, e.g. S1-1")
		}
		return CheckName(prefix+"stateExecutionId", *executionID)
	default:
		return Errorf(CodeInvalidArgument, "unknown %sresetType %q: one of BEGINNING, HISTORY_EVENT_ID, HISTORY_EVENT_TIME, STATE_ID, STATE_EXECUTION_ID", prefix, rt)
	}
	return nil
}

// resetPoint returns the execution a reset resumes before, or nil for the
// beginning.
func (t *txn) resetPoint(base *Run, history []*HistoryEvent, req iwfapi.WorkflowResetRequest) (*Execution, error) {
	lastStartedBefore := func(ok func(ev *HistoryEvent) bool) (*Execution, error) {
		var id string
		for _, ev := range history {
			if ev.Type == "StateExecutionStarted" && ok(ev) {
				id = ev.ExecutionID
			}
		}
		if id == "" {
			return nil, nil
		}
		return t.tx.ExecutionGet(t.ctx, base.RunID, id)
	}
	switch req.ResetType {
	case iwfapi.WorkflowResetTypeBeginning:
		return nil, nil
	case iwfapi.WorkflowResetTypeStateId:
		execs, err := t.tx.ExecutionList(t.ctx, base.RunID)
		if err != nil {
			return nil, err
		}
		for _, x := range execs {
			if x.StateID == deref(req.StateId) {
				return x, nil
			}
		}
		return nil, Errorf(CodeInvalidArgument, "run %s never started state %q", base.RunID, deref(req.StateId))
	case iwfapi.WorkflowResetTypeStateExecutionId:
		x, err := t.tx.ExecutionGet(t.ctx, base.RunID, deref(req.StateExecutionId))
		if errors.Is(err, ErrNotFound) {
			return nil, Errorf(CodeInvalidArgument, "run %s has no state execution %q", base.RunID, deref(req.StateExecutionId))
		}
		return x, err
	case iwfapi.WorkflowResetTypeHistoryEventId:
		limit := int64(deref(req.HistoryEventId))
		return lastStartedBefore(func(ev *HistoryEvent) bool { return ev.ID <= limit })
	case iwfapi.WorkflowResetTypeHistoryEventTime:
		at, err := parseDatetime(deref(req.HistoryEventTime), t.now)
		if err != nil {
			return nil, Errorf(CodeInvalidArgument, "historyEventTime: %v", err)
		}
		return lastStartedBefore(func(ev *HistoryEvent) bool { return !ev.At.After(at) })
	}
	return nil, Errorf(CodeInvalidArgument, "unsupported resetType %q", req.ResetType)
}

// resetToBeginning starts a new run from the base run's start request and
// applies the base run's external inputs again.
func (t *txn) resetToBeginning(brd *record.Run, history []*HistoryEvent, req iwfapi.WorkflowResetRequest, chain runChain) (*runTxn, error) {
	start := brd.Start
	r, err := t.createRun(start, chain, true)
	if err != nil {
		return nil, err
	}
	for _, ev := range history {
		in, ok := decodeExternalInput(ev)
		if !ok {
			continue
		}
		if in.RPC != nil && in.RPC.Locking {
			if deref(req.SkipUpdateReapply) {
				continue
			}
		} else if deref(req.SkipSignalReapply) {
			continue
		}
		if err := r.applyInput(in, true); err != nil {
			return nil, err
		}
	}
	return r, r.save()
}

// resetToExecution starts a new run at the checkpoint of the decision that
// started point (the reset point), as iWF's reset replays a workflow to the
// point and re-applies what came after it:
//
//   - the states of that decision start again with their ids;
//   - the signal buffer is the one at the reset point: the signals received
//     before it, less those consumed by executions started before it;
//   - the signals and RPC mutations received after the point are applied
//     again (see laterInputs);
//   - data and search attributes and unconsumed internal-channel messages
//     are those of the base run at reset time (docs/compatibility.md).
func (t *txn) resetToExecution(b *runTxn, point *Execution, history []*HistoryEvent, req iwfapi.WorkflowResetRequest, chain runChain) (*runTxn, error) {
	pd, err := decodeExec(point)
	if err != nil {
		return nil, err
	}
	plan, err := t.resetPlan(b.run.RunID, pd.Batch)
	if err != nil {
		return nil, err
	}
	if plan.checkpoint == nil {
		return nil, Errorf(CodeInternal, "state execution %s has no checkpoint to reset to", point.ExecutionID)
	}
	brd := b.rd
	start := brd.Start
	start.StartStateID = nil
	r, err := t.createRun(start, chain, false)
	if err != nil {
		return nil, err
	}
	cp := plan.checkpoint
	r.rd.Start, r.rd.Config = brd.Start, brd.Config
	r.rd.Counters, r.rd.Graceful = cp.Counters, cp.Graceful
	r.rd.Outputs = brd.Outputs[:min(cp.Outputs, len(brd.Outputs))]
	earlier, later, published := splitInputs(history, pd.Batch, plan.consumed, req)
	if err := copyRunState(t.ctx, t.tx, b.run.RunID, r.run.RunID, t.now, published); err != nil {
		return nil, err
	}
	for _, in := range earlier {
		if err := r.applyInput(in, true); err != nil {
			return nil, err
		}
	}
	if err := r.startStates(plan.moves, t.now); err != nil {
		return nil, err
	}
	for _, in := range later {
		if err := r.applyInput(in, true); err != nil {
			return nil, err
		}
	}
	return r, r.save()
}

// resetPlan is what a reset to a batch of executions needs from the base
// run's executions.
type resetPlan struct {
	checkpoint *record.Checkpoint
	moves      []record.Movement // the batch's executions, to start again
	// consumed counts, per signal channel, the messages that executions
	// started before the batch consumed.
	consumed map[string]int
}

func (t *txn) resetPlan(baseRunID, batch string) (resetPlan, error) {
	plan := resetPlan{consumed: map[string]int{}}
	execs, err := t.tx.ExecutionList(t.ctx, baseRunID)
	if err != nil {
		return plan, err
	}
	before := true
	for _, x := range execs {
		xd, err := decodeExec(x)
		if err != nil {
			return plan, err
		}
		if xd.Batch == batch {
			before = false
			if xd.Checkpoint != nil {
				plan.checkpoint = xd.Checkpoint
			}
			m := record.Movement{StateID: x.StateID, StateInput: xd.Input, StateOptions: xd.Options}
			if xd.WaitForKey != "" {
				m.WaitForKey = ptr(xd.WaitForKey)
			}
			plan.moves = append(plan.moves, m)
			continue
		}
		if before && xd.Commands != nil {
			timers := len(slice(xd.Commands.TimerCommands))
			for i, c := range slice(xd.Commands.SignalCommands) {
				if timers+i < len(xd.Done) && xd.Done[timers+i] {
					plan.consumed[c.SignalChannelName]++
				}
			}
		}
	}
	return plan, nil
}

// splitInputs sorts the base run's signals and RPC mutations around the
// reset point, the decision that started batch:
//
//   - earlier: the signals received before the point that were still
//     buffered at it (FIFO per channel: the first consumed[channel] of each
//     channel were consumed before the point);
//   - later: the signals and RPC mutations received after the point, which
//     iWF applies again — RPC mutations are signals there too — unless
//     skipSignalReapply says not to (skipUpdateReapply for locking RPCs);
//   - published: per internal channel, the messages the later RPC mutations
//     published. The base run's newest unconsumed messages that many are the
//     same messages, which the new run gets from the mutations (or, skipped,
//     not at all) instead of from the copied buffer.
func splitInputs(history []*HistoryEvent, batch string, consumed map[string]int, req iwfapi.WorkflowResetRequest) (earlier, later []record.Input, published map[string]int) {
	published = map[string]int{}
	skipped := map[string]int{}
	after := false
	for _, ev := range history {
		if ev.Type == "StateExecutionStarted" && ev.ExecutionID == batch {
			after = true
			continue
		}
		in, ok := decodeExternalInput(ev)
		if !ok {
			continue
		}
		switch {
		case !after && in.Signal != nil:
			if ch := in.Signal.SignalChannelName; skipped[ch] < consumed[ch] {
				skipped[ch]++
			} else {
				earlier = append(earlier, in)
			}
		case after && in.Signal != nil:
			if !deref(req.SkipSignalReapply) {
				later = append(later, in)
			}
		case after && in.RPC != nil:
			for _, p := range slice(in.RPC.Publish) {
				published[p.ChannelName]++
			}
			skip := deref(req.SkipSignalReapply)
			if in.RPC.Locking {
				skip = deref(req.SkipUpdateReapply)
			}
			if !skip {
				later = append(later, in)
			}
		}
	}
	return earlier, later, published
}

// copyRunState copies user data and search attributes and unconsumed
// internal-channel messages from one run to another, except the newest
// skip[channel] messages of each channel. (Signal buffers are rebuilt from
// the history: see resetToExecution.)
func copyRunState(ctx context.Context, tx Tx, from, to string, now time.Time, skip map[string]int) error {
	das, err := tx.DataAttributeGet(ctx, from, nil)
	if err != nil {
		return err
	}
	if len(das) > 0 {
		if err := tx.DataAttributeUpsert(ctx, to, das); err != nil {
			return err
		}
	}
	sas, err := tx.SearchAttributeGet(ctx, from, nil)
	if err != nil {
		return err
	}
	var user []*SearchAttribute
	for _, a := range sas {
		if !isSystemSearchAttribute(a.Key) {
			user = append(user, a)
		}
	}
	if len(user) > 0 {
		if err := tx.SearchAttributeUpsert(ctx, to, user); err != nil {
			return err
		}
	}
	for _, kind := range []ChannelKind{ChannelInternal} {
		counts, err := tx.MessageCounts(ctx, from, kind)
		if err != nil {
			return err
		}
		for ch := range counts {
			msgs, err := tx.MessagePeek(ctx, from, kind, ch, 0)
			if err != nil {
				return err
			}
			msgs = msgs[:max(0, len(msgs)-skip[ch])]
			if len(msgs) == 0 {
				continue
			}
			copies := make([]*Message, len(msgs))
			for i, m := range msgs {
				copies[i] = &Message{RunID: to, Kind: kind, Channel: ch, Value: m.Value, CreatedAt: now}
			}
			if err := tx.MessageAppend(ctx, copies); err != nil {
				return err
			}
		}
	}
	return nil
}
