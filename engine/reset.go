package engine

import (
	"context"
	"errors"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
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
	if req.WorkflowId == "" {
		return iwfapi.WorkflowResetResponse{}, errNoWorkflowID()
	}
	var out iwfapi.WorkflowResetResponse
	err := e.update(ctx, func(ctx context.Context, tx Tx, fx *txEffects) error {
		if _, err := tx.WorkflowLock(ctx, req.WorkflowId); err != nil {
			return err
		}
		id, err := resolveRun(ctx, tx, req.WorkflowId, deref(req.WorkflowRunId))
		if err != nil {
			return err
		}
		base, err := tx.RunLock(ctx, id)
		if err != nil {
			return err
		}
		brd, err := decodeRun(base)
		if err != nil {
			return err
		}
		history, err := tx.HistoryList(ctx, id, 0, 0)
		if err != nil {
			return err
		}
		point, err := resetPoint(ctx, tx, base, history, req)
		if err != nil {
			return err
		}
		if base.Status == RunRunning {
			if err := e.closeRun(ctx, tx, fx, base, brd, RunTerminated, "", "reset"); err != nil {
				return err
			}
			if err := e.saveRun(ctx, tx, fx, base, brd); err != nil {
				return err
			}
		}
		var run *Run
		if point == nil {
			run, err = e.resetToBeginning(ctx, tx, fx, brd, history, req)
		} else {
			run, err = e.resetToExecution(ctx, tx, fx, base, brd, point)
		}
		if err != nil {
			return err
		}
		out.WorkflowRunId = run.RunID
		fx.record(e.event(base, "", "Reset", map[string]any{"resetType": req.ResetType, "newRunId": run.RunID}))
		return nil
	})
	return out, err
}

// resetPoint returns the execution a reset resumes before, or nil for the
// beginning.
func resetPoint(ctx context.Context, tx Tx, base *Run, history []*HistoryEvent, req iwfapi.WorkflowResetRequest) (*Execution, error) {
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
		return tx.ExecutionGet(ctx, base.RunID, id)
	}
	switch req.ResetType {
	case iwfapi.WorkflowResetTypeBeginning:
		return nil, nil
	case iwfapi.WorkflowResetTypeStateId:
		execs, err := tx.ExecutionList(ctx, base.RunID)
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
		x, err := tx.ExecutionGet(ctx, base.RunID, deref(req.StateExecutionId))
		if errors.Is(err, ErrNotFound) {
			return nil, Errorf(CodeInvalidArgument, "run %s has no state execution %q", base.RunID, deref(req.StateExecutionId))
		}
		return x, err
	case iwfapi.WorkflowResetTypeHistoryEventId:
		limit := int64(deref(req.HistoryEventId))
		return lastStartedBefore(func(ev *HistoryEvent) bool { return ev.ID <= limit })
	case iwfapi.WorkflowResetTypeHistoryEventTime:
		at, err := parseDatetime(deref(req.HistoryEventTime), time.Now())
		if err != nil {
			return nil, Errorf(CodeInvalidArgument, "historyEventTime: %v", err)
		}
		return lastStartedBefore(func(ev *HistoryEvent) bool { return !ev.At.After(at) })
	}
	return nil, Errorf(CodeInvalidArgument, "unsupported resetType %q", req.ResetType)
}

func (e *Engine) resetToBeginning(ctx context.Context, tx Tx, fx *txEffects, brd *runData, history []*HistoryEvent, req iwfapi.WorkflowResetRequest) (*Run, error) {
	start := brd.Start
	opts := deref(start.WorkflowStartOptions)
	das, err := toStoreDataAttributes(slice(opts.DataAttributes))
	if err != nil {
		return nil, err
	}
	sas, err := e.toStoreSearchAttributes(slice(opts.SearchAttributes))
	if err != nil {
		return nil, err
	}
	now := e.cfg.Clock.Now()
	run, rd, err := e.createRun(ctx, tx, fx, start, runChain{due: now, timeoutAt: deadline(now, start.WorkflowTimeoutSeconds)}, das, sas)
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
		if err := e.applyInput(ctx, tx, fx, run, rd, in, true); err != nil {
			return nil, err
		}
	}
	return run, e.saveRun(ctx, tx, fx, run, rd)
}

func (e *Engine) resetToExecution(ctx context.Context, tx Tx, fx *txEffects, base *Run, brd *runData, point *Execution) (*Run, error) {
	pd, err := decodeExec(point)
	if err != nil {
		return nil, err
	}
	execs, err := tx.ExecutionList(ctx, base.RunID)
	if err != nil {
		return nil, err
	}
	var cp *checkpoint
	var moves []iwfapi.StateMovement
	for _, x := range execs {
		xd, err := decodeExec(x)
		if err != nil {
			return nil, err
		}
		if xd.Batch != pd.Batch {
			continue
		}
		if xd.Checkpoint != nil {
			cp = xd.Checkpoint
		}
		m := iwfapi.StateMovement{StateId: x.StateID, StateInput: xd.Input, StateOptions: xd.Options}
		if xd.WaitForKey != "" {
			m.WaitForKey = ptr(xd.WaitForKey)
		}
		moves = append(moves, m)
	}
	if cp == nil {
		return nil, Errorf(CodeInternal, "state execution %s has no checkpoint to reset to", point.ExecutionID)
	}
	start := brd.Start
	start.StartStateId = nil
	now := e.cfg.Clock.Now()
	run, rd, err := e.createRun(ctx, tx, fx, start, runChain{due: now, timeoutAt: deadline(now, start.WorkflowTimeoutSeconds)}, nil, nil)
	if err != nil {
		return nil, err
	}
	rd.Start = brd.Start
	rd.Config = brd.Config
	rd.Counters = cp.Counters
	rd.Outputs = brd.Outputs[:min(cp.Outputs, len(brd.Outputs))]
	rd.Graceful = cp.Graceful
	if err := copyRunState(ctx, tx, base.RunID, run.RunID, now); err != nil {
		return nil, err
	}
	if err := e.startStates(ctx, tx, fx, run, rd, moves, now); err != nil {
		return nil, err
	}
	return run, e.saveRun(ctx, tx, fx, run, rd)
}

// copyRunState copies user data and search attributes and unconsumed
// channel messages from one run to another.
func copyRunState(ctx context.Context, tx Tx, from, to string, now time.Time) error {
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
	for _, kind := range []ChannelKind{ChannelSignal, ChannelInternal} {
		counts, err := tx.MessageCounts(ctx, from, kind)
		if err != nil {
			return err
		}
		for ch := range counts {
			msgs, err := tx.MessagePeek(ctx, from, kind, ch, 0)
			if err != nil {
				return err
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
