package engine

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/iwf-server/iwf-server/api/iwfapi"
)

// externalInput is one input that reached a run from outside: an API call
// or the mutations of an RPC answer. Each is applied in one transaction and
// recorded in the run's history with its payload, so that a reset can apply
// it again to the new run. Exactly one field is set.
type externalInput struct {
	Signal    *iwfapi.WorkflowSignalRequest              `json:"signal,omitempty"`
	Publish   *iwfapi.PublishToInternalChannelRequest    `json:"publish,omitempty"`
	SetData   *iwfapi.WorkflowSetDataObjectsRequest      `json:"setDataAttributes,omitempty"`
	SetSearch *iwfapi.WorkflowSetSearchAttributesRequest `json:"setSearchAttributes,omitempty"`
	SkipTimer *iwfapi.WorkflowSkipTimerRequest           `json:"skipTimer,omitempty"`
	Config    *iwfapi.WorkflowConfigUpdateRequest        `json:"configUpdate,omitempty"`
	RPC       *rpcMutation                               `json:"rpc,omitempty"`
}

// rpcMutation is what an RPC answer changes in a run.
type rpcMutation struct {
	Name                   string                                `json:"rpcName"`
	Locking                bool                                  `json:"locking,omitempty"`
	UpsertSearchAttributes *[]iwfapi.SearchAttribute             `json:"upsertSearchAttributes,omitempty"`
	UpsertDataAttributes   *[]iwfapi.KeyValue                    `json:"upsertDataAttributes,omitempty"`
	Publish                *[]iwfapi.InterStateChannelPublishing `json:"publishToInterStateChannel,omitempty"`
	Decision               *iwfapi.StateDecision                 `json:"stateDecision,omitempty"`
}

// externalInputEvent is the history event type of external inputs.
const externalInputEvent = "ExternalInput"

// applyExternal applies one external input to a running run.
func (e *Engine) applyExternal(ctx context.Context, workflowID, runID string, in externalInput) error {
	return e.mutateRun(ctx, workflowID, runID, func(ctx context.Context, tx Tx, fx *txEffects, run *Run, rd *runData) error {
		return e.applyInput(ctx, tx, fx, run, rd, in, false)
	})
}

// applyInput applies an external input and records it. With replay (a
// reset applying inputs again), a timer skip for an execution that has not
// reached its timers yet is kept until it does, instead of being rejected.
func (e *Engine) applyInput(ctx context.Context, tx Tx, fx *txEffects, run *Run, rd *runData, in externalInput, replay bool) error {
	now := e.cfg.Clock.Now()
	deliver := false
	switch {
	case in.Signal != nil:
		value, err := encodeValue(in.Signal.SignalValue)
		if err != nil {
			return err
		}
		msg := &Message{RunID: run.RunID, Kind: ChannelSignal, Channel: in.Signal.SignalChannelName, Value: value, CreatedAt: now}
		if err := tx.MessageAppend(ctx, []*Message{msg}); err != nil {
			return err
		}
		deliver = true
	case in.Publish != nil:
		if err := e.publish(ctx, tx, fx, run, "", slice(in.Publish.Messages)); err != nil {
			return err
		}
		deliver = true
	case in.SetData != nil:
		attrs, err := toStoreDataAttributes(slice(in.SetData.Objects))
		if err != nil {
			return err
		}
		if len(attrs) > 0 {
			if err := tx.DataAttributeUpsert(ctx, run.RunID, attrs); err != nil {
				return err
			}
		}
	case in.SetSearch != nil:
		attrs, err := e.toStoreSearchAttributes(slice(in.SetSearch.SearchAttributes))
		if err != nil {
			return err
		}
		if len(attrs) > 0 {
			if err := tx.SearchAttributeUpsert(ctx, run.RunID, attrs); err != nil {
				return err
			}
		}
	case in.SkipTimer != nil:
		applied, err := e.skipTimer(ctx, tx, fx, run, *in.SkipTimer)
		if err != nil && !(replay && CodeOf(err) == CodeInvalidArgument) {
			return err
		}
		if replay && !applied {
			rd.PendingSkips = append(rd.PendingSkips, *in.SkipTimer)
		}
	case in.Config != nil:
		c := in.Config.WorkflowConfig
		c.OptimizeTimer = nil
		rd.Config = mergeConfig(rd.Config, &c)
	case in.RPC != nil:
		m := in.RPC
		if err := e.applyUpserts(ctx, tx, fx, run, "", slice(m.UpsertSearchAttributes), slice(m.UpsertDataAttributes), slice(m.Publish)); err != nil {
			return err
		}
		deliver = len(slice(m.Publish)) > 0
		if m.Decision != nil {
			if err := e.startStates(ctx, tx, fx, run, rd, slice(m.Decision.NextStates), now); err != nil {
				return err
			}
		}
	default:
		return errors.New("engine: empty external input")
	}
	fx.record(e.event(run, "", externalInputEvent, in))
	if deliver {
		return e.deliver(ctx, tx, fx, run, "")
	}
	return nil
}

// skipTimer marks a pending timer command as fired. It reports whether a
// pending timer was found and skipped.
func (e *Engine) skipTimer(ctx context.Context, tx Tx, fx *txEffects, run *Run, req iwfapi.WorkflowSkipTimerRequest) (bool, error) {
	notFound := Errorf(CodeInvalidArgument, "invalid request - requested timer command doesn't exist")
	x, err := tx.ExecutionGet(ctx, run.RunID, req.WorkflowStateExecutionId)
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
	if _, err := e.evaluate(ctx, tx, fx, run, x, xd); err != nil {
		return false, err
	}
	x.Data = encode(xd)
	return true, tx.ExecutionUpdate(ctx, x)
}

// timerIndex finds the timer a skip request names: by id, the first timer
// with that commandId (pending or not); by index, a timer that must still be
// pending.
func timerIndex(x *Execution, xd *execData, req iwfapi.WorkflowSkipTimerRequest) (idx int, pending bool, err error) {
	notFound := Errorf(CodeInvalidArgument, "invalid request - requested timer command doesn't exist")
	var timers []iwfapi.TimerCommand
	if xd.Commands != nil {
		timers = slice(xd.Commands.TimerCommands)
	}
	waiting := x.Status == ExecWaiting
	if id := deref(req.TimerCommandId); id != "" {
		for i, t := range timers {
			if deref(t.CommandId) == id {
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
func applyPendingSkips(rd *runData, x *Execution, xd *execData) {
	kept := rd.PendingSkips[:0]
	for _, req := range rd.PendingSkips {
		if req.WorkflowStateExecutionId != x.ExecutionID {
			kept = append(kept, req)
			continue
		}
		if idx, pending, err := timerIndex(x, xd, req); err == nil && pending {
			xd.FireAt[idx] = 0
		}
	}
	rd.PendingSkips = kept
}

func decodeExternalInput(ev *HistoryEvent) (externalInput, bool) {
	var in externalInput
	if ev.Type != externalInputEvent || json.Unmarshal(ev.Data, &in) != nil {
		return in, false
	}
	return in, true
}
