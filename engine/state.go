package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/channels"
)

// defaultAPITimeout is the per-attempt timeout of waitUntil and execute.
const defaultAPITimeout = 30 * time.Second

// newTask builds a task of run; it is leased to this process when it is due
// soon, so that this process runs it right after the commit.
func (e *Engine) newTask(run *Run, executionID string, kind TaskKind, due time.Time) *Task {
	now := e.cfg.Clock.Now()
	t := &Task{
		RunID:          run.RunID,
		WorkflowID:     run.WorkflowID,
		ExecutionID:    executionID,
		Kind:           kind,
		DueAt:          due,
		Attempt:        1,
		FirstAttemptAt: due,
	}
	e.leaseLocally(t, now)
	return t
}

// leaseLocally leases t to this process if it is due within the local
// horizon; otherwise it leaves it for the poller.
func (e *Engine) leaseLocally(t *Task, now time.Time) {
	// Stores keep milliseconds: round up so that memory and store agree and
	// a task never runs before its stored due time.
	if r := t.DueAt.Truncate(time.Millisecond); !r.Equal(t.DueAt) {
		t.DueAt = r.Add(time.Millisecond)
	}
	if t.DueAt.Sub(now) <= e.localHorizon() {
		t.LeaseOwner = e.cfg.NodeID
		base := t.DueAt
		if base.Before(now) {
			base = now
		}
		t.LeaseExpiresAt = base.Add(e.cfg.LeaseDuration)
	} else {
		t.LeaseOwner = ""
		t.LeaseExpiresAt = time.Time{}
	}
}

func (e *Engine) insertTasks(ctx context.Context, tx Tx, fx *txEffects, tasks ...*Task) error {
	if err := tx.TaskInsert(ctx, tasks); err != nil {
		return err
	}
	for _, t := range tasks {
		if t.LeaseOwner == e.cfg.NodeID {
			fx.tasks = append(fx.tasks, t)
		}
	}
	return nil
}

func (e *Engine) event(run *Run, executionID, typ string, data any) *HistoryEvent {
	ev := &HistoryEvent{RunID: run.RunID, At: e.cfg.Clock.Now(), Type: typ, ExecutionID: executionID}
	if data != nil {
		ev.Data = encode(data)
	}
	return ev
}

func skipsWaitUntil(o *iwfapi.WorkflowStateOptions) bool {
	if o == nil {
		return false
	}
	if o.SkipStartApi != nil {
		return *o.SkipStartApi
	}
	return deref(o.SkipWaitUntil)
}

// startStates creates one state execution per movement, in order, with
// execution ids <stateId>-<n>, and their first tasks.
func (e *Engine) startStates(ctx context.Context, tx Tx, fx *txEffects, run *Run, rd *runData, moves []iwfapi.StateMovement, due time.Time) error {
	if len(moves) == 0 {
		return nil
	}
	now := e.cfg.Clock.Now()
	cp := &checkpoint{Counters: maps.Clone(rd.Counters), Outputs: len(rd.Outputs), Graceful: rd.Graceful}
	batch := ""
	execs := make([]*Execution, 0, len(moves))
	tasks := make([]*Task, 0, len(moves))
	events := make([]*HistoryEvent, 0, len(moves))
	for _, m := range moves {
		rd.Counters[m.StateId]++
		id := m.StateId + "-" + strconv.Itoa(rd.Counters[m.StateId])
		xd := execData{Input: m.StateInput, Options: m.StateOptions, WaitForKey: deref(m.WaitForKey)}
		if batch == "" {
			batch, xd.Checkpoint = id, cp
		}
		xd.Batch = batch
		x := &Execution{RunID: run.RunID, ExecutionID: id, StateID: m.StateId, CreatedAt: now}
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
			rd.Executing[m.StateId]++
		}
		x.Data = encode(xd)
		execs = append(execs, x)
		tasks = append(tasks, e.newTask(run, id, kind, due))
		events = append(events, e.event(run, id, "StateExecutionStarted", map[string]any{"stateId": m.StateId, "skipWaitUntil": kind == TaskExecute}))
	}
	if err := tx.ExecutionInsert(ctx, execs); err != nil {
		return err
	}
	fx.record(events...)
	return e.insertTasks(ctx, tx, fx, tasks...)
}

// closeRun ends a run: live executions are abandoned, pending tasks and
// timers dropped. The caller saves the run.
func (e *Engine) closeRun(ctx context.Context, tx Tx, fx *txEffects, run *Run, rd *runData, status RunStatus, errType, errMsg string) error {
	run.Status = status
	run.ClosedAt = e.cfg.Clock.Now()
	fx.closed = append(fx.closed, status)
	rd.ErrorType, rd.ErrorMsg = errType, errMsg
	rd.Executing = nil
	rd.Locks = nil
	live, err := tx.ExecutionList(ctx, run.RunID, LiveStatuses...)
	if err != nil {
		return err
	}
	for _, x := range live {
		x.Status = ExecAbandoned
		if err := tx.ExecutionUpdate(ctx, x); err != nil {
			return err
		}
	}
	if err := tx.TaskDeleteByRun(ctx, run.RunID); err != nil {
		return err
	}
	data := map[string]any{"status": status}
	if errType != "" {
		data["errorType"] = errType
	}
	if errMsg != "" {
		data["errorMessage"] = errMsg
	}
	fx.record(e.event(run, "", "WorkflowClosed", data))
	return e.chainNext(ctx, tx, fx, run, rd)
}

// publish appends internal-channel messages in order.
func (e *Engine) publish(ctx context.Context, tx Tx, fx *txEffects, run *Run, executionID string, msgs []iwfapi.InterStateChannelPublishing) error {
	if len(msgs) == 0 {
		return nil
	}
	now := e.cfg.Clock.Now()
	rows := make([]*Message, 0, len(msgs))
	names := make([]string, 0, len(msgs))
	for _, m := range msgs {
		if m.ChannelName == "" {
			return Errorf(CodeInvalidArgument, "an internal channel message needs a channelName")
		}
		v, err := encodeValue(m.Value)
		if err != nil {
			return err
		}
		rows = append(rows, &Message{RunID: run.RunID, Kind: ChannelInternal, Channel: m.ChannelName, Value: v, CreatedAt: now})
		names = append(names, m.ChannelName)
	}
	if err := tx.MessageAppend(ctx, rows); err != nil {
		return err
	}
	fx.record(e.event(run, executionID, "InternalMessagesPublished", map[string]any{"channels": names}))
	return nil
}

// flatCommands lays out a command request as timers, then signals, then
// internal channels.
func flatCommands(cr *iwfapi.CommandRequest) channels.Request {
	var req channels.Request
	if cr == nil {
		return req
	}
	for _, t := range slice(cr.TimerCommands) {
		req.Commands = append(req.Commands, channels.Command{Kind: channels.Timer, ID: deref(t.CommandId)})
	}
	for _, s := range slice(cr.SignalCommands) {
		req.Commands = append(req.Commands, channels.Command{Kind: channels.Signal, ID: deref(s.CommandId), Channel: s.SignalChannelName})
	}
	for _, c := range slice(cr.InterStateChannelCommands) {
		req.Commands = append(req.Commands, channels.Command{Kind: channels.Internal, ID: deref(c.CommandId), Channel: c.ChannelName})
	}
	switch {
	case cr.CommandWaitingType != nil && *cr.CommandWaitingType != "":
		req.WaitingType = channels.WaitingType(*cr.CommandWaitingType)
	case cr.DeciderTriggerType != nil:
		switch *cr.DeciderTriggerType {
		case iwfapi.DeciderTriggerTypeAllCommandCompleted:
			req.WaitingType = channels.AllCompleted
		case iwfapi.DeciderTriggerTypeAnyCommandCompleted:
			req.WaitingType = channels.AnyCompleted
		case iwfapi.DeciderTriggerTypeAnyCommandCombinationCompleted:
			req.WaitingType = channels.AnyCombinationCompleted
		default:
			req.WaitingType = channels.WaitingType(*cr.DeciderTriggerType)
		}
	}
	for _, c := range slice(cr.CommandCombinations) {
		req.Combinations = append(req.Combinations, slice(c.CommandIds))
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
func (e *Engine) evaluate(ctx context.Context, tx Tx, fx *txEffects, run *Run, x *Execution, xd *execData) (bool, error) {
	req := flatCommands(xd.Commands)
	nowMs := unixMs(e.cfg.Clock.Now())
	changed := false
	for i, c := range req.Commands {
		if c.Kind == channels.Timer && !xd.Done[i] && xd.FireAt[i] <= nowMs && !req.Satisfied(xd.Done) {
			xd.Done[i] = true
			changed = true
		}
	}
	if !req.Satisfied(xd.Done) {
		need := map[channels.ChannelKey]int{}
		for i, c := range req.Commands {
			if !xd.Done[i] && c.Kind != channels.Timer {
				need[channels.ChannelKey{Kind: c.Kind, Channel: c.Channel}]++
			}
		}
		heads := map[channels.ChannelKey][]*Message{}
		available := map[channels.ChannelKey]int{}
		for _, k := range req.Channels(xd.Done) {
			msgs, err := tx.MessagePeek(ctx, run.RunID, channelKind(k.Kind), k.Channel, need[k])
			if err != nil {
				return false, err
			}
			heads[k] = msgs
			available[k] = len(msgs)
		}
		plan := req.Plan(xd.Done, available)
		if len(plan) > 0 {
			ids := make([]int64, 0, len(plan))
			for _, c := range plan {
				m := heads[c.Key][c.N]
				xd.Values[c.Command] = decodeValue(m.Value)
				ids = append(ids, m.ID)
			}
			if err := tx.MessageDelete(ctx, ids); err != nil {
				return false, err
			}
			changed = true
		}
	}
	if !req.Satisfied(xd.Done) {
		return changed, nil
	}
	xd.Results = commandResults(xd)
	x.Status = ExecExecute
	if err := tx.TaskDeleteByExecution(ctx, run.RunID, x.ExecutionID, TaskTimer); err != nil {
		return false, err
	}
	fx.record(e.event(run, x.ExecutionID, "CommandsCompleted", map[string]any{"done": xd.Done}))
	return true, e.insertTasks(ctx, tx, fx, e.newTask(run, x.ExecutionID, TaskExecute, e.cfg.Clock.Now()))
}

// commandResults builds the execute call's commandResults: one result per
// command in request order, arrays only for the kinds that were requested.
func commandResults(xd *execData) *iwfapi.CommandResults {
	res := &iwfapi.CommandResults{StateStartApiSucceeded: ptr(true), StateWaitUntilFailed: ptr(false)}
	cr := xd.Commands
	if cr == nil {
		return res
	}
	i := 0
	if ts := slice(cr.TimerCommands); len(ts) > 0 {
		out := make([]iwfapi.TimerResult, 0, len(ts))
		for _, t := range ts {
			st := iwfapi.TimerStatusScheduled
			if xd.Done[i] {
				st = iwfapi.TimerStatusFired
			}
			out = append(out, iwfapi.TimerResult{CommandId: deref(t.CommandId), TimerStatus: st})
			i++
		}
		res.TimerResults = &out
	}
	if ss := slice(cr.SignalCommands); len(ss) > 0 {
		out := make([]iwfapi.SignalResult, 0, len(ss))
		for _, s := range ss {
			r := iwfapi.SignalResult{CommandId: deref(s.CommandId), SignalChannelName: s.SignalChannelName, SignalRequestStatus: iwfapi.ChannelRequestStatusWaiting}
			if xd.Done[i] {
				r.SignalRequestStatus = iwfapi.ChannelRequestStatusReceived
				r.SignalValue = xd.Values[i]
			}
			out = append(out, r)
			i++
		}
		res.SignalResults = &out
	}
	if cs := slice(cr.InterStateChannelCommands); len(cs) > 0 {
		out := make([]iwfapi.InterStateChannelResult, 0, len(cs))
		for _, c := range cs {
			r := iwfapi.InterStateChannelResult{CommandId: deref(c.CommandId), ChannelName: c.ChannelName, RequestStatus: iwfapi.ChannelRequestStatusWaiting}
			if xd.Done[i] {
				r.RequestStatus = iwfapi.ChannelRequestStatusReceived
				r.Value = xd.Values[i]
			}
			out = append(out, r)
			i++
		}
		res.InterStateChannelResults = &out
	}
	return res
}

// deliver re-evaluates the run's waiting executions after messages arrived
// (except skip, which the caller handles itself).
func (e *Engine) deliver(ctx context.Context, tx Tx, fx *txEffects, run *Run, skip string) error {
	waiting, err := tx.ExecutionList(ctx, run.RunID, ExecWaiting)
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
		changed, err := e.evaluate(ctx, tx, fx, run, x, xd)
		if err != nil {
			return err
		}
		if changed {
			x.Data = encode(xd)
			if err := tx.ExecutionUpdate(ctx, x); err != nil {
				return err
			}
		}
	}
	return nil
}

// processTask runs one due task. It returns an error when the task should be
// tried again later by this process (store trouble); everything else is
// recorded in the store.
func (e *Engine) processTask(ctx context.Context, t *Task) error {
	var err error
	switch t.Kind {
	case TaskWaitUntil, TaskExecute:
		err = e.callStateAPI(ctx, t)
	case TaskTimer:
		err = e.fireTimer(ctx, t)
	case TaskTimeout:
		err = e.fireTimeout(ctx, t)
	default:
		err = e.update(ctx, func(ctx context.Context, tx Tx, fx *txEffects) error {
			_, err := tx.TaskDelete(ctx, t.ID, e.cfg.NodeID)
			return err
		})
	}
	if err != nil && ctx.Err() == nil {
		e.log.Error().Err(err).Str("workflowId", t.WorkflowID).Str("runId", t.RunID).
			Str("stateExecutionId", t.ExecutionID).Str("task", string(t.Kind)).Msg("task failed; retrying")
	}
	return err
}

// staleTask drops a task whose execution or run has moved on.
func (e *Engine) staleTask(ctx context.Context, t *Task) error {
	return e.update(ctx, func(ctx context.Context, tx Tx, fx *txEffects) error {
		_, err := tx.TaskDelete(ctx, t.ID, e.cfg.NodeID)
		return err
	})
}

// lockForTask locks the task's run and checks that the task is still ours
// and its execution still in the expected phase. ok=false means the task is
// stale and has been dropped.
func (e *Engine) lockForTask(ctx context.Context, tx Tx, t *Task, want ExecutionStatus) (run *Run, rd *runData, x *Execution, xd *execData, ok bool, err error) {
	run, err = tx.RunLock(ctx, t.RunID)
	if errors.Is(err, ErrNotFound) {
		_, err = tx.TaskDelete(ctx, t.ID, e.cfg.NodeID)
		return nil, nil, nil, nil, false, err
	}
	if err != nil {
		return nil, nil, nil, nil, false, err
	}
	removed, err := tx.TaskDelete(ctx, t.ID, e.cfg.NodeID)
	if err == nil && !removed {
		e.log.Debug().Str("workflowId", t.WorkflowID).Str("runId", t.RunID).Str("stateExecutionId", t.ExecutionID).
			Str("task", string(t.Kind)).Int("attempt", t.Attempt).Msg("dropping a stale result: the task is gone or leased to another process")
	}
	if err != nil || !removed || run.Status != RunRunning {
		return nil, nil, nil, nil, false, err
	}
	if t.ExecutionID != "" {
		x, err = tx.ExecutionGet(ctx, t.RunID, t.ExecutionID)
		if errors.Is(err, ErrNotFound) {
			return nil, nil, nil, nil, false, nil
		}
		if err != nil || x.Status != want {
			return nil, nil, nil, nil, false, err
		}
		if xd, err = decodeExec(x); err != nil {
			return nil, nil, nil, nil, false, err
		}
	}
	rd, err = decodeRun(run)
	if err != nil {
		return nil, nil, nil, nil, false, err
	}
	return run, rd, x, xd, true, nil
}

// fireTimer completes a timer command and re-evaluates its execution.
func (e *Engine) fireTimer(ctx context.Context, t *Task) error {
	var idx struct {
		Index int `json:"index"`
	}
	if err := json.Unmarshal(t.Data, &idx); err != nil {
		return e.staleTask(ctx, t)
	}
	return e.update(ctx, func(ctx context.Context, tx Tx, fx *txEffects) error {
		run, _, x, xd, ok, err := e.lockForTask(ctx, tx, t, ExecWaiting)
		if err != nil || !ok {
			return err
		}
		e.metrics.timersFired.inc()
		e.metrics.timerLateness.observe(e.cfg.Clock.Now().Sub(t.DueAt))
		if idx.Index >= 0 && idx.Index < len(xd.Done) && !xd.Done[idx.Index] {
			// The task is due, so its timer fires even if the clock reads a
			// hair earlier than the stored firing time.
			xd.FireAt[idx.Index] = 0
		}
		fx.record(e.event(run, x.ExecutionID, "TimerFired", map[string]any{"index": idx.Index}))
		if _, err := e.evaluate(ctx, tx, fx, run, x, xd); err != nil {
			return err
		}
		x.Data = encode(xd)
		fx.runs = append(fx.runs, run.RunID)
		return tx.ExecutionUpdate(ctx, x)
	})
}

// fireTimeout ends a run whose workflow timeout expired.
func (e *Engine) fireTimeout(ctx context.Context, t *Task) error {
	return e.update(ctx, func(ctx context.Context, tx Tx, fx *txEffects) error {
		run, rd, _, _, ok, err := e.lockForTask(ctx, tx, t, "")
		if err != nil || !ok {
			return err
		}
		if err := e.closeRun(ctx, tx, fx, run, rd, RunTimeout, "", ""); err != nil {
			return err
		}
		return e.saveRun(ctx, tx, fx, run, rd)
	})
}

// apiSnapshot is what a state API call needs, read before the call.
type apiSnapshot struct {
	run *Run
	rd  *runData
	x   *Execution
	xd  *execData
	das []iwfapi.KeyValue
	sas []iwfapi.SearchAttribute
}

// loadingPolicies returns the effective data and search attribute loading
// policies of one state API: per-API field > generic field > legacy field.
func loadingPolicies(o *iwfapi.WorkflowStateOptions, waitUntil bool) (da, sa *iwfapi.PersistenceLoadingPolicy) {
	if o == nil {
		return nil, nil
	}
	if waitUntil {
		da, sa = o.WaitUntilApiDataAttributesLoadingPolicy, o.WaitUntilApiSearchAttributesLoadingPolicy
	} else {
		da, sa = o.ExecuteApiDataAttributesLoadingPolicy, o.ExecuteApiSearchAttributesLoadingPolicy
	}
	if da == nil {
		da = o.DataAttributesLoadingPolicy
	}
	if da == nil {
		da = o.DataObjectsLoadingPolicy
	}
	if sa == nil {
		sa = o.SearchAttributesLoadingPolicy
	}
	return da, sa
}

// loadKeys returns the keys a policy loads: nil for all, an empty slice for
// none.
func loadKeys(p *iwfapi.PersistenceLoadingPolicy) []string {
	if p == nil || p.PersistenceLoadingType == nil {
		return nil
	}
	switch *p.PersistenceLoadingType {
	case iwfapi.PersistenceLoadingTypeLoadNone:
		return []string{}
	case iwfapi.PersistenceLoadingTypeLoadPartialWithoutLocking:
		return append([]string{}, slice(p.PartialLoadingKeys)...)
	case iwfapi.PersistenceLoadingTypeLoadPartialWithExclusiveLock:
		return append(append([]string{}, slice(p.PartialLoadingKeys)...), slice(p.LockingKeys)...)
	}
	return nil
}

func loadDataAttributes(ctx context.Context, tx ReadTx, runID string, p *iwfapi.PersistenceLoadingPolicy) ([]iwfapi.KeyValue, error) {
	keys := loadKeys(p)
	if keys != nil && len(keys) == 0 {
		return nil, nil
	}
	attrs, err := tx.DataAttributeGet(ctx, runID, keys)
	if err != nil {
		return nil, err
	}
	return fromStoreDataAttributes(attrs), nil
}

func loadSearchAttributes(ctx context.Context, tx ReadTx, runID string, p *iwfapi.PersistenceLoadingPolicy) ([]iwfapi.SearchAttribute, error) {
	keys := loadKeys(p)
	if keys != nil && len(keys) == 0 {
		return nil, nil
	}
	attrs, err := tx.SearchAttributeGet(ctx, runID, keys)
	if err != nil {
		return nil, err
	}
	out := make([]iwfapi.SearchAttribute, 0, len(attrs))
	for _, a := range attrs {
		if isSystemSearchAttribute(a.Key) {
			continue
		}
		var sa iwfapi.SearchAttribute
		if err := json.Unmarshal(a.Raw, &sa); err != nil {
			return nil, err
		}
		out = append(out, sa)
	}
	return out, nil
}

func (e *Engine) snapshot(ctx context.Context, t *Task, want ExecutionStatus) (*apiSnapshot, error) {
	var s *apiSnapshot
	err := e.store.View(ctx, func(ctx context.Context, tx ReadTx) error {
		run, err := tx.RunGet(ctx, t.RunID)
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		x, err := tx.ExecutionGet(ctx, t.RunID, t.ExecutionID)
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if run.Status != RunRunning || x.Status != want {
			return nil
		}
		rd, err := decodeRun(run)
		if err != nil {
			return err
		}
		xd, err := decodeExec(x)
		if err != nil {
			return err
		}
		daPolicy, saPolicy := loadingPolicies(xd.Options, want == ExecWaitUntil)
		das, err := loadDataAttributes(ctx, tx, run.RunID, daPolicy)
		if err != nil {
			return err
		}
		sas, err := loadSearchAttributes(ctx, tx, run.RunID, saPolicy)
		if err != nil {
			return err
		}
		s = &apiSnapshot{run: run, rd: rd, x: x, xd: xd, das: das, sas: sas}
		return nil
	})
	return s, err
}

func nonEmpty[T any](s []T) *[]T {
	if len(s) == 0 {
		return nil
	}
	return &s
}

// apiTimeout returns the per-attempt timeout of one state API.
func apiTimeout(o *iwfapi.WorkflowStateOptions, waitUntil bool) time.Duration {
	var secs int32
	if o != nil {
		if waitUntil {
			secs = deref(o.WaitUntilApiTimeoutSeconds)
			if o.StartApiTimeoutSeconds != nil {
				secs = *o.StartApiTimeoutSeconds
			}
		} else {
			secs = deref(o.ExecuteApiTimeoutSeconds)
			if o.DecideApiTimeoutSeconds != nil {
				secs = *o.DecideApiTimeoutSeconds
			}
		}
	}
	if secs <= 0 {
		return defaultAPITimeout
	}
	return time.Duration(secs) * time.Second
}

// callStateAPI makes one attempt of a waitUntil or execute call and records
// its outcome.
func (e *Engine) callStateAPI(ctx context.Context, t *Task) error {
	waitUntil := t.Kind == TaskWaitUntil
	want := ExecExecute
	if waitUntil {
		want = ExecWaitUntil
	}
	s, err := e.snapshot(ctx, t, want)
	if err != nil {
		return err
	}
	if s == nil {
		return e.staleTask(ctx, t)
	}
	if keys := lockKeys(loadingPolicies(s.xd.Options, waitUntil)); len(keys) > 0 && !holdsAll(s.rd, keys, apiLockHolder(t.ExecutionID, t.Kind)) {
		acquired, err := e.acquireAPILocks(ctx, t, keys)
		if err != nil || !acquired {
			return err
		}
		// Load again: the previous holder may have written the keys.
		if s, err = e.snapshot(ctx, t, want); err != nil {
			return err
		}
		if s == nil {
			return e.staleTask(ctx, t)
		}
	}
	wctx := iwfapi.Context{
		WorkflowId:               s.run.WorkflowID,
		WorkflowRunId:            s.run.RunID,
		WorkflowStartedTimestamp: s.run.StartedAt.Unix(),
		StateExecutionId:         ptr(s.x.ExecutionID),
		FirstAttemptTimestamp:    ptr(t.FirstAttemptAt.Unix()),
		Attempt:                  ptr(int32(t.Attempt)),
	}
	callCtx, cancel := context.WithTimeout(ctx, apiTimeout(s.xd.Options, waitUntil))
	defer cancel()
	log := e.log.With().Str("workflowId", s.run.WorkflowID).Str("runId", s.run.RunID).Str("stateExecutionId", s.x.ExecutionID).Int("attempt", t.Attempt).Logger()
	if waitUntil {
		begin := time.Now()
		resp, err := e.worker.WaitUntil(callCtx, s.rd.WorkerURL, &iwfapi.WorkflowStateStartRequest{
			Context: wctx, WorkflowType: s.run.WorkflowType, WorkflowStateId: s.x.StateID,
			StateInput: s.xd.Input, SearchAttributes: nonEmpty(s.sas), DataObjects: nonEmpty(s.das),
		})
		e.recordCall("waitUntil", begin, err)
		if err == nil {
			if verr := flatCommands(resp.CommandRequest).Validate(); verr != nil {
				err = fmt.Errorf("err msg: %v, response: %s", verr, encode(resp))
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			log.Debug().Err(err).Msg("waitUntil attempt failed")
			return e.attemptFailed(ctx, t, err)
		}
		return e.applyWaitUntil(ctx, t, resp)
	}
	begin := time.Now()
	resp, err := e.worker.Execute(callCtx, s.rd.WorkerURL, &iwfapi.WorkflowStateDecideRequest{
		Context: wctx, WorkflowType: s.run.WorkflowType, WorkflowStateId: s.x.StateID,
		StateInput: s.xd.Input, SearchAttributes: nonEmpty(s.sas), DataObjects: nonEmpty(s.das),
		StateLocals: s.xd.StateLocals, CommandResults: s.xd.Results,
	})
	e.recordCall("execute", begin, err)
	if err == nil {
		if d := resp.StateDecision; d == nil || (len(slice(d.NextStates)) == 0 && d.ConditionalClose == nil) {
			err = fmt.Errorf("err msg: empty state decision is no longer supported. If it's from old SDKs then upgrade the SDK to newer versions, response: %s", encode(resp))
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		log.Debug().Err(err).Msg("execute attempt failed")
		return e.attemptFailed(ctx, t, err)
	}
	return e.applyExecute(ctx, t, resp)
}

// applyUpserts applies a worker answer's search and data attribute upserts
// and internal channel publishes, in that order. A search attribute the
// server cannot index fails the workflow (invalid user code).
func (e *Engine) applyUpserts(ctx context.Context, tx Tx, fx *txEffects, run *Run, executionID string, sas []iwfapi.SearchAttribute, das []iwfapi.KeyValue, pubs []iwfapi.InterStateChannelPublishing) error {
	if len(sas) > 0 {
		attrs, err := e.toStoreSearchAttributes(sas)
		if err != nil {
			return err
		}
		if err := tx.SearchAttributeUpsert(ctx, run.RunID, attrs); err != nil {
			return err
		}
	}
	if len(das) > 0 {
		attrs, err := toStoreDataAttributes(das)
		if err != nil {
			return err
		}
		if err := tx.DataAttributeUpsert(ctx, run.RunID, attrs); err != nil {
			return err
		}
	}
	return e.publish(ctx, tx, fx, run, executionID, pubs)
}

// failForInvalidAnswer turns a domain error found while applying a worker
// answer into a workflow failure; other errors pass through.
func (e *Engine) failForInvalidAnswer(ctx context.Context, tx Tx, fx *txEffects, run *Run, rd *runData, err error) error {
	var de *Error
	if errors.As(err, &de) && de.Code == CodeInvalidArgument {
		if cerr := e.closeRun(ctx, tx, fx, run, rd, RunFailed, errInvalidUserCode, de.Message); cerr != nil {
			return cerr
		}
		return e.saveRun(ctx, tx, fx, run, rd)
	}
	return err
}

func (e *Engine) applyWaitUntil(ctx context.Context, t *Task, resp *iwfapi.WorkflowStateStartResponse) error {
	return e.update(ctx, func(ctx context.Context, tx Tx, fx *txEffects) error {
		run, rd, x, xd, ok, err := e.lockForTask(ctx, tx, t, ExecWaitUntil)
		if err != nil || !ok {
			return err
		}
		unlock(rd, apiLockHolder(t.ExecutionID, t.Kind))
		if err := e.applyUpserts(ctx, tx, fx, run, x.ExecutionID, slice(resp.UpsertSearchAttributes), slice(resp.UpsertDataObjects), slice(resp.PublishToInterStateChannel)); err != nil {
			return e.failForInvalidAnswer(ctx, tx, fx, run, rd, err)
		}
		now := e.cfg.Clock.Now()
		xd.Commands = resp.CommandRequest
		xd.StateLocals = resp.UpsertStateLocals
		req := flatCommands(resp.CommandRequest)
		n := len(req.Commands)
		xd.Done, xd.Values, xd.FireAt = make([]bool, n), make([]*iwfapi.EncodedObject, n), make([]int64, n)
		if resp.CommandRequest != nil {
			for i, tc := range slice(resp.CommandRequest.TimerCommands) {
				switch {
				case tc.DurationSeconds != nil:
					xd.FireAt[i] = unixMs(now.Add(time.Duration(*tc.DurationSeconds) * time.Second))
				case tc.FiringUnixTimestampSeconds != nil:
					xd.FireAt[i] = *tc.FiringUnixTimestampSeconds * 1000
				}
			}
		}
		x.Status = ExecWaiting
		if len(rd.PendingSkips) > 0 {
			applyPendingSkips(rd, x, xd)
		}
		fx.record(e.event(run, x.ExecutionID, "WaitUntilCompleted", map[string]any{"attempt": t.Attempt, "commands": n}))
		if _, err := e.evaluate(ctx, tx, fx, run, x, xd); err != nil {
			return err
		}
		if x.Status == ExecWaiting {
			var timers []*Task
			for i, c := range req.Commands {
				if c.Kind == channels.Timer && !xd.Done[i] {
					tt := e.newTask(run, x.ExecutionID, TaskTimer, time.UnixMilli(xd.FireAt[i]))
					tt.Data = encode(map[string]int{"index": i})
					timers = append(timers, tt)
				}
			}
			if len(timers) > 0 {
				if err := e.insertTasks(ctx, tx, fx, timers...); err != nil {
					return err
				}
			}
		}
		x.Data = encode(xd)
		if err := tx.ExecutionUpdate(ctx, x); err != nil {
			return err
		}
		if len(slice(resp.PublishToInterStateChannel)) > 0 {
			if err := e.deliver(ctx, tx, fx, run, x.ExecutionID); err != nil {
				return err
			}
		}
		return e.saveRun(ctx, tx, fx, run, rd)
	})
}

// completionKey is the key under which a watched execution's completion is
// published for waitForStateCompletion.
func completionKeys(rd *runData, x *Execution, xd *execData) string {
	watched := false
	for _, id := range slice(rd.Start.WaitForCompletionStateExecutionIds) {
		if id == x.ExecutionID {
			watched = true
		}
	}
	for _, id := range slice(rd.Start.WaitForCompletionStateIds) {
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

func (e *Engine) applyExecute(ctx context.Context, t *Task, resp *iwfapi.WorkflowStateDecideResponse) error {
	return e.update(ctx, func(ctx context.Context, tx Tx, fx *txEffects) error {
		run, rd, x, xd, ok, err := e.lockForTask(ctx, tx, t, ExecExecute)
		if err != nil || !ok {
			return err
		}
		if key := completionKeys(rd, x, xd); key != "" {
			if rd.Completions == nil {
				rd.Completions = map[string]iwfapi.StateCompletionOutput{}
			}
			rd.Completions[key] = iwfapi.StateCompletionOutput{CompletedStateId: x.StateID, CompletedStateExecutionId: x.ExecutionID}
		}
		unlock(rd, apiLockHolder(t.ExecutionID, t.Kind))
		if err := e.applyUpserts(ctx, tx, fx, run, x.ExecutionID, slice(resp.UpsertSearchAttributes), slice(resp.UpsertDataObjects), slice(resp.PublishToInterStateChannel)); err != nil {
			return e.failForInvalidAnswer(ctx, tx, fx, run, rd, err)
		}
		x.Status = ExecCompleted
		finished(rd, x, xd)
		if err := tx.ExecutionUpdate(ctx, x); err != nil {
			return err
		}
		fx.record(e.event(run, x.ExecutionID, "ExecuteCompleted", map[string]any{"attempt": t.Attempt, "decision": resp.StateDecision}))
		if len(slice(resp.PublishToInterStateChannel)) > 0 {
			if err := e.deliver(ctx, tx, fx, run, ""); err != nil {
				return err
			}
		}
		if err := e.applyDecision(ctx, tx, fx, run, rd, x, xd, resp.StateDecision); err != nil {
			return err
		}
		return e.saveRun(ctx, tx, fx, run, rd)
	})
}

func (e *Engine) addOutput(rd *runData, x *Execution, out *iwfapi.EncodedObject) {
	if out == nil {
		return
	}
	rd.Outputs = append(rd.Outputs, iwfapi.StateCompletionOutput{CompletedStateId: x.StateID, CompletedStateExecutionId: x.ExecutionID, CompletedStateOutput: out})
}

// applyDecision processes an execute answer's state decision (iWF §5.6–5.7).
func (e *Engine) applyDecision(ctx context.Context, tx Tx, fx *txEffects, run *Run, rd *runData, x *Execution, xd *execData, d *iwfapi.StateDecision) error {
	moves := slice(d.NextStates)
	invalid := func(msg string) error {
		return e.closeRun(ctx, tx, fx, run, rd, RunFailed, errInvalidUserCode, msg)
	}
	if cc := d.ConditionalClose; cc != nil {
		var kind ChannelKind
		switch deref(cc.ConditionalCloseType) {
		case iwfapi.WorkflowConditionalCloseTypeForceCompleteOnInternalChannelEmpty:
			kind = ChannelInternal
		case iwfapi.WorkflowConditionalCloseTypeForceCompleteOnSignalChannelEmpty:
			kind = ChannelSignal
		default:
			return invalid(fmt.Sprintf("invalid state decisions. Unsupported ConditionalCloseType %s", deref(cc.ConditionalCloseType)))
		}
		head, err := tx.MessagePeek(ctx, run.RunID, kind, deref(cc.ChannelName), 1)
		if err != nil {
			return err
		}
		if len(head) == 0 {
			e.addOutput(rd, x, cc.CloseInput)
			return e.closeRun(ctx, tx, fx, run, rd, RunCompleted, "", "")
		}
		for _, m := range moves {
			if isReserved(m.StateId) {
				return invalid("invalid ConditionUnmetDecision with stateId: " + m.StateId)
			}
		}
		return e.startStates(ctx, tx, fx, run, rd, moves, e.cfg.Clock.Now())
	}
	for _, m := range moves {
		if isReserved(m.StateId) && len(moves) > 1 {
			return invalid("invalid state decisions. Closing workflow decision cannot be combined with other state decisions")
		}
	}
	if len(moves) == 1 && isReserved(moves[0].StateId) {
		m := moves[0]
		switch m.StateId {
		case GracefulCompletingState:
			e.addOutput(rd, x, m.StateInput)
			rd.Graceful = true
			return e.completeIfIdle(ctx, tx, fx, run, rd)
		case ForceCompletingState:
			e.addOutput(rd, x, m.StateInput)
			return e.closeRun(ctx, tx, fx, run, rd, RunCompleted, "", "")
		case ForceFailingState:
			e.addOutput(rd, x, m.StateInput)
			return e.closeRun(ctx, tx, fx, run, rd, RunFailed, errStateDecisionFailing, "")
		case DeadEndState:
			return e.completeIfIdle(ctx, tx, fx, run, rd)
		default:
			return invalid("invalid state decisions. Unknown reserved stateId " + m.StateId)
		}
	}
	return e.startStates(ctx, tx, fx, run, rd, moves, e.cfg.Clock.Now())
}

// completeIfIdle completes the run when graceful completion was requested and
// no execution is live any more.
func (e *Engine) completeIfIdle(ctx context.Context, tx Tx, fx *txEffects, run *Run, rd *runData) error {
	if !rd.Graceful || run.Status != RunRunning {
		return nil
	}
	n, err := tx.ExecutionCount(ctx, run.RunID, LiveStatuses...)
	if err != nil || n > 0 {
		return err
	}
	return e.closeRun(ctx, tx, fx, run, rd, RunCompleted, "", "")
}

// retryPolicy returns the effective retry policy of one state API (the
// legacy field wins when present).
func retryPolicy(o *iwfapi.WorkflowStateOptions, waitUntil bool) *iwfapi.RetryPolicy {
	if o == nil {
		return nil
	}
	if waitUntil {
		if o.StartApiRetryPolicy != nil {
			return o.StartApiRetryPolicy
		}
		return o.WaitUntilApiRetryPolicy
	}
	if o.DecideApiRetryPolicy != nil {
		return o.DecideApiRetryPolicy
	}
	return o.ExecuteApiRetryPolicy
}

// nextBackoff returns the wait before attempt+1, or ok=false when the policy
// allows no further attempt.
func nextBackoff(p *iwfapi.RetryPolicy, attempt int, firstAttempt, now time.Time) (time.Duration, bool) {
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
	if maxDuration > 0 && now.Add(wait).Sub(firstAttempt) >= time.Duration(maxDuration)*time.Second {
		return 0, false
	}
	return wait, true
}

// attemptFailed records a failed state API attempt: it schedules the next
// attempt with backoff, or, when the retry policy is exhausted, applies the
// failure policy (proceed, or fail the workflow).
func (e *Engine) attemptFailed(ctx context.Context, t *Task, callErr error) error {
	waitUntil := t.Kind == TaskWaitUntil
	want := ExecExecute
	if waitUntil {
		want = ExecWaitUntil
	}
	return e.update(ctx, func(ctx context.Context, tx Tx, fx *txEffects) error {
		run, err := tx.RunLock(ctx, t.RunID)
		if err != nil || run.Status != RunRunning {
			if errors.Is(err, ErrNotFound) {
				err = nil
			}
			return err
		}
		x, err := tx.ExecutionGet(ctx, t.RunID, t.ExecutionID)
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
		now := e.cfg.Clock.Now()
		msg := callErr.Error()
		fx.record(e.event(run, x.ExecutionID, string(t.Kind)+"AttemptFailed", map[string]any{"attempt": t.Attempt, "error": truncate(msg, 1000)}))
		if wait, retry := nextBackoff(retryPolicy(xd.Options, waitUntil), t.Attempt, t.FirstAttemptAt, now); retry {
			next := *t
			next.DueAt = now.Add(wait)
			next.Attempt = t.Attempt + 1
			e.leaseLocally(&next, now)
			ok, err := tx.TaskReschedule(ctx, &next, e.cfg.NodeID)
			if err != nil || !ok {
				return err
			}
			if next.LeaseOwner == e.cfg.NodeID {
				fx.tasks = append(fx.tasks, &next)
			}
			return nil
		}
		removed, err := tx.TaskDelete(ctx, t.ID, e.cfg.NodeID)
		if err != nil || !removed {
			return err
		}
		rd, err := decodeRun(run)
		if err != nil {
			return err
		}
		unlock(rd, apiLockHolder(t.ExecutionID, t.Kind))
		o := deref(xd.Options)
		if waitUntil {
			proceed := deref(o.WaitUntilApiFailurePolicy) == iwfapi.WaitUntilApiFailurePolicyProceedOnFailure
			if o.StartApiFailurePolicy != nil {
				proceed = *o.StartApiFailurePolicy == iwfapi.StartApiFailurePolicyProceedToDecideOnStartApiFailure
			}
			if proceed {
				xd.Results = &iwfapi.CommandResults{StateStartApiSucceeded: ptr(false), StateWaitUntilFailed: ptr(true)}
				x.Status = ExecExecute
				x.Data = encode(xd)
				if err := tx.ExecutionUpdate(ctx, x); err != nil {
					return err
				}
				if err := e.insertTasks(ctx, tx, fx, e.newTask(run, x.ExecutionID, TaskExecute, now)); err != nil {
					return err
				}
				return e.saveRun(ctx, tx, fx, run, rd)
			}
		} else if deref(o.ExecuteApiFailurePolicy) == iwfapi.ExecuteApiFailurePolicyProceedToConfiguredState && deref(o.ExecuteApiFailureProceedStateId) != "" {
			x.Status = ExecFailed
			finished(rd, x, xd)
			if err := tx.ExecutionUpdate(ctx, x); err != nil {
				return err
			}
			move := iwfapi.StateMovement{StateId: *o.ExecuteApiFailureProceedStateId, StateInput: xd.Input, StateOptions: o.ExecuteApiFailureProceedStateOptions}
			if err := e.startStates(ctx, tx, fx, run, rd, []iwfapi.StateMovement{move}, now); err != nil {
				return err
			}
			return e.saveRun(ctx, tx, fx, run, rd)
		}
		x.Status = ExecFailed
		if err := tx.ExecutionUpdate(ctx, x); err != nil {
			return err
		}
		if err := e.closeRun(ctx, tx, fx, run, rd, RunFailed, errStateAPIFail, msg); err != nil {
			return err
		}
		return e.saveRun(ctx, tx, fx, run, rd)
	})
}

// countsAsExecuting says whether a new execution is listed in the system
// search attribute IwfExecutingStateIds under the run's executingStateIdMode.
func countsAsExecuting(c iwfapi.WorkflowConfig, skipWaitUntil bool) bool {
	if deref(c.DisableSystemSearchAttribute) {
		return false
	}
	switch deref(c.ExecutingStateIdMode) {
	case iwfapi.ExecutingStateIdModeDisabled:
		return false
	case iwfapi.ExecutingStateIdModeEnabledForAll:
		return true
	default:
		return !skipWaitUntil
	}
}

// finished takes an execution that leaves the live phases out of the
// executing-state count.
func finished(rd *runData, x *Execution, xd *execData) {
	if xd.Counted && rd.Executing[x.StateID] > 0 {
		rd.Executing[x.StateID]--
		if rd.Executing[x.StateID] == 0 {
			delete(rd.Executing, x.StateID)
		}
	}
}

// executingStateIDs writes IwfExecutingStateIds when the set of counted
// executing stateIds changed since it was last written.
func (e *Engine) executingStateIDs(ctx context.Context, tx Tx, run *Run, rd *runData) error {
	ids := make([]string, 0, len(rd.Executing))
	for id := range rd.Executing {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	if slices.Equal(ids, rd.ExecutingWritten) {
		return nil
	}
	rd.ExecutingWritten = ids
	sa := iwfapi.SearchAttribute{Key: ptr(SystemSAExecutingStateIDs), ValueType: ptr(iwfapi.SearchAttributeValueTypeKeywordArray), StringArrayValue: &ids}
	return tx.SearchAttributeUpsert(ctx, run.RunID, []*SearchAttribute{{Key: SystemSAExecutingStateIDs, ValueType: "KEYWORD_ARRAY", Raw: encode(sa), Strings: ids}})
}

// recordCall counts a worker call and its latency.
func (e *Engine) recordCall(api string, begin time.Time, err error) {
	e.metrics.apiSeconds.observe(time.Since(begin), api)
	outcome := "ok"
	if err != nil {
		outcome = "error"
	}
	e.metrics.apiCalls.inc(api, outcome)
}
