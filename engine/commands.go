package engine

// Command evaluation: a waiting execution's timers and channel commands,
// the messages they consume, and the results its execute call receives.

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/iwf-server/iwf-server/channels"
	"github.com/iwf-server/iwf-server/engine/internal/record"
)

// checkTriggerType names the legacy deciderTriggerType field when it
// holds an unknown value (and commandWaitingType, which wins, is absent).
func checkTriggerType(cr *record.Commands) error {
	if cr == nil || deref(cr.CommandWaitingType) != "" || cr.DeciderTriggerType == nil {
		return nil
	}
	switch *cr.DeciderTriggerType {
	case record.TriggerAllCompleted, record.TriggerAnyCompleted, record.TriggerAnyCombinationCompleted:
		return nil
	}
	return fmt.Errorf("unsupported deciderTriggerType %q (want %s, %s or %s; or set commandWaitingType)", *cr.DeciderTriggerType,
		record.TriggerAllCompleted, record.TriggerAnyCompleted, record.TriggerAnyCombinationCompleted)
}

// flatCommands lays out a command request as timers, then signals, then
// internal channels.
func flatCommands(cr *record.Commands) channels.Request {
	var req channels.Request
	if cr == nil {
		return req
	}
	for _, t := range slice(cr.TimerCommands) {
		req.Commands = append(req.Commands, channels.Command{Kind: channels.Timer, ID: deref(t.CommandID)})
	}
	for _, s := range slice(cr.SignalCommands) {
		req.Commands = append(req.Commands, channels.Command{Kind: channels.Signal, ID: deref(s.CommandID), Channel: s.SignalChannelName})
	}
	for _, c := range slice(cr.InterStateChannelCommands) {
		req.Commands = append(req.Commands, channels.Command{Kind: channels.Internal, ID: deref(c.CommandID), Channel: c.ChannelName})
	}
	switch {
	case deref(cr.CommandWaitingType) != "":
		req.WaitingType = channels.WaitingType(*cr.CommandWaitingType)
	case cr.DeciderTriggerType != nil:
		switch *cr.DeciderTriggerType {
		case record.TriggerAllCompleted:
			req.WaitingType = channels.AllCompleted
		case record.TriggerAnyCompleted:
			req.WaitingType = channels.AnyCompleted
		case record.TriggerAnyCombinationCompleted:
			req.WaitingType = channels.AnyCombinationCompleted
		default:
			req.WaitingType = channels.WaitingType(*cr.DeciderTriggerType)
		}
	}
	for _, c := range slice(cr.CommandCombinations) {
		req.Combinations = append(req.Combinations, slice(c.CommandIDs))
	}
	return req
}

func channelKind(k channels.Kind) ChannelKind {
	if k == channels.Signal {
		return ChannelSignal
	}
	return ChannelInternal
}

// evaluate advances one waiting execution: due timers fire, buffered
// messages are consumed in command order, and when the waiting condition is
// met the execution moves on to execute. It reports whether x or xd changed; the
// caller encodes xd into x.Data and writes x.
func (r *runTxn) evaluate(x *Execution, xd *record.Execution) (bool, error) {
	return r.advance(x, xd, false)
}

// register evaluates an execution whose commands were just registered:
// first every command that an already buffered message can satisfy
// consumes one, whether or not the condition is met on the way (iWF matches
// the whole buffer first), then due timers fire.
func (r *runTxn) register(x *Execution, xd *record.Execution) (bool, error) {
	return r.advance(x, xd, true)
}

func (r *runTxn) advance(x *Execution, xd *record.Execution, registering bool) (bool, error) {
	req := flatCommands(xd.Commands)
	changed := false
	if registering {
		consumed, err := r.consume(req, xd, true)
		if err != nil {
			return false, err
		}
		changed = consumed
	}
	nowMs := unixMs(r.now)
	for i, c := range req.Commands {
		if c.Kind == channels.Timer && !xd.Done[i] && xd.FireAt[i] <= nowMs && !req.Satisfied(xd.Done) {
			xd.Done[i] = true
			changed = true
		}
	}
	if !registering && !req.Satisfied(xd.Done) {
		consumed, err := r.consume(req, xd, false)
		if err != nil {
			return false, err
		}
		changed = changed || consumed
	}
	if !req.Satisfied(xd.Done) {
		return changed, nil
	}
	xd.Results = commandResults(xd)
	x.Status = ExecExecute
	if r.lastTimerTaken != x.ExecutionID {
		if err := r.tx.TaskDeleteByExecution(r.ctx, r.run.RunID, x.ExecutionID, TaskTimer); err != nil {
			return false, err
		}
	}
	r.record(r.event(x.ExecutionID, "CommandsCompleted", map[string]any{"done": xd.Done}))
	if r.answered == x.ExecutionID {
		// Its execute call has been made already (fireTimerEager).
		return true, nil
	}
	return true, r.insertTasks(r.newTask(r.run, x.ExecutionID, TaskExecute, r.now))
}

// consume takes the buffered messages that the execution's channel commands
// can use now, as package channels plans it (all of them at registration),
// and reports whether it took any.
func (r *runTxn) consume(req channels.Request, xd *record.Execution, all bool) (bool, error) {
	need := map[channels.ChannelKey]int{}
	for i, c := range req.Commands {
		if !xd.Done[i] && c.Kind != channels.Timer {
			need[channels.ChannelKey{Kind: c.Kind, Channel: c.Channel}]++
		}
	}
	heads := map[channels.ChannelKey][]*Message{}
	available := map[channels.ChannelKey]int{}
	for _, k := range req.Channels(xd.Done) {
		msgs, err := r.tx.MessagePeek(r.ctx, r.run.RunID, channelKind(k.Kind), k.Channel, need[k])
		if err != nil {
			return false, err
		}
		heads[k] = msgs
		available[k] = len(msgs)
	}
	var plan []channels.Consumption
	if all {
		plan = req.PlanAll(xd.Done, available)
	} else {
		plan = req.Plan(xd.Done, available)
	}
	if len(plan) == 0 {
		return false, nil
	}
	ids := make([]int64, 0, len(plan))
	for _, c := range plan {
		m := heads[c.Key][c.N]
		xd.Values[c.Command] = decodeValue(m.Value)
		ids = append(ids, m.ID)
	}
	return true, r.tx.MessageDelete(r.ctx, ids)
}

// commandResults builds the execute call's commandResults: one result per
// command in request order, arrays only for the kinds that were requested.
func commandResults(xd *record.Execution) *record.CommandResults {
	res := &record.CommandResults{StateStartAPISucceeded: ptr(true), StateWaitUntilFailed: ptr(false)}
	cr := xd.Commands
	if cr == nil {
		return res
	}
	i := 0
	if ts := slice(cr.TimerCommands); len(ts) > 0 {
		out := make([]record.TimerResult, 0, len(ts))
		for _, t := range ts {
			st := record.TimerScheduled
			if xd.Done[i] {
				st = record.TimerFired
			}
			out = append(out, record.TimerResult{CommandID: deref(t.CommandID), TimerStatus: st})
			i++
		}
		res.TimerResults = &out
	}
	if ss := slice(cr.SignalCommands); len(ss) > 0 {
		out := make([]record.SignalResult, 0, len(ss))
		for _, s := range ss {
			sr := record.SignalResult{CommandID: deref(s.CommandID), SignalChannelName: s.SignalChannelName, SignalRequestStatus: record.ChannelWaiting}
			if xd.Done[i] {
				sr.SignalRequestStatus = record.ChannelReceived
				sr.SignalValue = xd.Values[i]
			}
			out = append(out, sr)
			i++
		}
		res.SignalResults = &out
	}
	if cs := slice(cr.InterStateChannelCommands); len(cs) > 0 {
		out := make([]record.ChannelResult, 0, len(cs))
		for _, c := range cs {
			cr := record.ChannelResult{CommandID: deref(c.CommandID), ChannelName: c.ChannelName, RequestStatus: record.ChannelWaiting}
			if xd.Done[i] {
				cr.RequestStatus = record.ChannelReceived
				cr.Value = xd.Values[i]
			}
			out = append(out, cr)
			i++
		}
		res.InterStateChannelResults = &out
	}
	return res
}

// deliver re-evaluates the run's waiting executions after messages arrived
// (except skip, which the caller handles itself). An execution that waits
// on timers only takes no message and is left alone: its timers fire from
// their tasks. Firing a due timer here instead would race the task's owner,
// which may have called execute already (fireTimerEager): the execution
// would move on and execute would be called again, with the same attempt,
// while the first call is in flight.
func (r *runTxn) deliver(skip string) error {
	waiting, err := r.tx.ExecutionList(r.ctx, r.run.RunID, ExecWaiting)
	if err != nil {
		return err
	}
	for _, x := range waiting {
		if x.ExecutionID == skip {
			continue
		}
		xd, err := decodeExec(x)
		if err != nil {
			return err
		}
		if timersOnly(xd) {
			continue
		}
		changed, err := r.evaluate(x, xd)
		if err != nil {
			return err
		}
		if changed {
			x.Data = encode(xd)
			if err := r.tx.ExecutionUpdate(r.ctx, x); err != nil {
				return err
			}
		}
	}
	return nil
}

// fireTimer completes a timer command and re-evaluates its execution.
func (e *Engine) fireTimer(ctx context.Context, task *Task) error {
	var idx record.TimerTask
	if err := json.Unmarshal(task.Data, &idx); err != nil {
		return e.dropTask(ctx, task)
	}
	return e.update(ctx, func(t *txn) error {
		tt, err := t.lockForTask(task, ExecWaiting)
		if err != nil || tt == nil {
			return err
		}
		t.fx.timerLateness = append(t.fx.timerLateness, t.now.Sub(task.DueAt))
		x, xd := tt.x, tt.xd
		if idx.Index >= 0 && idx.Index < len(xd.Done) && !xd.Done[idx.Index] {
			// The task is due, so its timer fires even if the clock reads a
			// hair earlier than the stored firing time.
			xd.FireAt[idx.Index] = 0
		}
		tt.record(tt.event(x.ExecutionID, "TimerFired", map[string]any{"index": idx.Index}))
		if soleTimer(xd, idx.Index) {
			// Each pending timer command has one task, and this was the
			// only timer: taking its task left none to delete.
			tt.lastTimerTaken = x.ExecutionID
		}
		if _, err := tt.evaluate(x, xd); err != nil {
			return err
		}
		x.Data = encode(xd)
		t.fx.runs = append(t.fx.runs, tt.run.RunID)
		return t.tx.ExecutionUpdate(t.ctx, x)
	})
}

// timersOnly reports whether an execution waits on timer commands only.
func timersOnly(xd *record.Execution) bool {
	cr := xd.Commands
	return cr == nil || (len(slice(cr.SignalCommands)) == 0 && len(slice(cr.InterStateChannelCommands)) == 0)
}

// soleTimer reports whether command index is the execution's only timer
// command.
func soleTimer(xd *record.Execution, index int) bool {
	req := flatCommands(xd.Commands)
	n := 0
	for i, c := range req.Commands {
		if c.Kind == channels.Timer {
			if i != index {
				return false
			}
			n++
		}
	}
	return n == 1
}

// timerTasks creates the tasks of an execution's pending timer commands.
func (r *runTxn) timerTasks(x *Execution, xd *record.Execution, req channels.Request) []*Task {
	var timers []*Task
	for i, c := range req.Commands {
		if c.Kind == channels.Timer && !xd.Done[i] {
			tt := r.newTask(r.run, x.ExecutionID, TaskTimer, time.UnixMilli(xd.FireAt[i]))
			tt.Data = encode(record.TimerTask{Index: i, Alone: firesAlone(xd, i)})
			timers = append(timers, tt)
		}
	}
	return timers
}
