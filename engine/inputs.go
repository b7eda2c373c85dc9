package engine

// External inputs: signals, publishes, attribute writes, timer skips,
// config updates and RPC mutations that reach a run from outside. Each is
// applied in one transaction and recorded in the run's history with its
// payload (a record.Input), so that a reset can apply it again.

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/iwf-server/iwf-server/engine/internal/record"
)

// externalInputEvent is the history event type of external inputs.
const externalInputEvent = "ExternalInput"

// applyExternal applies one external input to a running run.
func (e *Engine) applyExternal(ctx context.Context, workflowID, runID string, in record.Input) error {
	return e.applyExternalThen(ctx, workflowID, runID, in, nil)
}

// applyExternalThen is applyExternal with then called in its transaction
// (see mutateRunThen).
func (e *Engine) applyExternalThen(ctx context.Context, workflowID, runID string, in record.Input, then func(t *txn) error) error {
	in.Actor = ActorOf(ctx)
	if e.payloadsOn() {
		// offload replaces references in place: the caller's input (a
		// batch's, given to run after run) is left as it was.
		in = copyValues(in)
	}
	off, err := e.offload(ctx, workflowID, runID, &in)
	if err != nil {
		return err
	}
	return e.mutateRunThen(ctx, workflowID, runID, func(r *runTxn) error {
		if err := r.applyInput(in, false); err != nil {
			return err
		}
		return r.keepPayloads(off, r.run.RunID)
	}, then)
}

// applyInput applies an external input and records it. With replay (a
// reset applying inputs again), a timer skip for an execution that has not
// reached its timers yet is kept until it does, instead of being rejected.
func (r *runTxn) applyInput(in record.Input, replay bool) error {
	deliver := false
	switch {
	case in.Signal != nil:
		msg := &Message{RunID: r.run.RunID, Kind: ChannelSignal, Channel: in.Signal.SignalChannelName, Value: encodeValue(in.Signal.SignalValue), CreatedAt: r.now}
		if err := r.tx.MessageAppend(r.ctx, []*Message{msg}); err != nil {
			return err
		}
		deliver = true
	case in.Publish != nil:
		if err := r.publish("", slice(in.Publish.Messages)); err != nil {
			return err
		}
		deliver = true
	case in.SetData != nil:
		if err := r.applyUpserts("", upserts{dataAttrs: slice(in.SetData.Objects)}); err != nil {
			return err
		}
	case in.SetSearch != nil:
		// A replayed input was within the limit when it was first applied.
		if !replay {
			if err := checkSearchAttributeCount(r.ctx, r.tx, r.run.RunID, slice(in.SetSearch.SearchAttributes)); err != nil {
				return err
			}
		}
		if err := r.applyUpserts("", upserts{searchAttrs: slice(in.SetSearch.SearchAttributes)}); err != nil {
			return err
		}
	case in.SkipTimer != nil:
		applied, err := r.skipTimer(*in.SkipTimer)
		if err != nil && !(replay && CodeOf(err) == CodeInvalidArgument) {
			return err
		}
		if replay && !applied {
			r.rd.PendingSkips = append(r.rd.PendingSkips, *in.SkipTimer)
		}
	case in.Config != nil:
		c := in.Config.WorkflowConfig
		c.OptimizeTimer = nil
		r.rd.Config = mergeConfig(r.rd.Config, &c)
	case in.RPC != nil:
		m := in.RPC
		writes := upserts{searchAttrs: slice(m.UpsertSearchAttributes), dataAttrs: slice(m.UpsertDataAttributes), publishes: slice(m.Publish)}
		if err := r.applyUpserts("", writes); err != nil {
			return err
		}
		deliver = len(writes.publishes) > 0
		if m.Decision != nil {
			if err := r.startStates(slice(m.Decision.NextStates), r.now); err != nil {
				return err
			}
		}
	default:
		return errors.New("engine: empty external input")
	}
	r.record(r.event("", externalInputEvent, in))
	if deliver {
		return r.deliver("")
	}
	return nil
}

// skipTimer marks a pending timer command as fired. It reports whether a
// pending timer was found and skipped.
func (r *runTxn) skipTimer(req record.SkipTimer) (bool, error) {
	notFound := Errorf(CodeInvalidArgument, "invalid request - requested timer command doesn't exist")
	x, err := r.tx.ExecutionGet(r.ctx, r.run.RunID, req.WorkflowStateExecutionID)
	if errors.Is(err, ErrNotFound) {
		return false, notFound
	}
	if err != nil {
		return false, err
	}
	xd, err := decodeExec(x)
	if err != nil {
		return false, err
	}
	idx, pending, err := timerIndex(x, xd, req)
	if err != nil || !pending {
		return false, err
	}
	xd.FireAt[idx] = 0
	if _, err := r.evaluate(x, xd); err != nil {
		return false, err
	}
	x.Data = encode(xd)
	return true, r.tx.ExecutionUpdate(r.ctx, x)
}

// timerIndex finds the timer a skip request names: by id, the first timer
// with that commandId (pending or not); by index, a timer that must still be
// pending.
func timerIndex(x *Execution, xd *record.Execution, req record.SkipTimer) (idx int, pending bool, err error) {
	notFound := Errorf(CodeInvalidArgument, "invalid request - requested timer command doesn't exist")
	var timers []record.TimerCommand
	if xd.Commands != nil {
		timers = slice(xd.Commands.TimerCommands)
	}
	waiting := x.Status == ExecWaiting
	if id := deref(req.TimerCommandID); id != "" {
		for i, t := range timers {
			if deref(t.CommandID) == id {
				return i, waiting && !xd.Done[i], nil
			}
		}
		return 0, false, notFound
	}
	i := int(deref(req.TimerCommandIndex))
	if i < 0 || i >= len(timers) || !waiting || xd.Done[i] {
		return 0, false, notFound
	}
	return i, true, nil
}

// applyPendingSkips applies timer skips kept by a reset for an execution
// that has just started waiting.
func applyPendingSkips(rd *record.Run, x *Execution, xd *record.Execution) {
	kept := rd.PendingSkips[:0]
	for _, req := range rd.PendingSkips {
		if req.WorkflowStateExecutionID != x.ExecutionID {
			kept = append(kept, req)
			continue
		}
		if idx, pending, err := timerIndex(x, xd, req); err == nil && pending {
			xd.FireAt[idx] = 0
		}
	}
	rd.PendingSkips = kept
}

func decodeExternalInput(ev *HistoryEvent) (record.Input, bool) {
	var in record.Input
	if ev.Type != externalInputEvent || json.Unmarshal(ev.Data, &in) != nil {
		return in, false
	}
	return in, true
}
