package engine

// DescribeWorkflow: a run's summary and the state executions in progress,
// with their attempts, last failures and awaited commands (an extension of
// this server, POST /api/v1/workflow/describe).

import (
	"context"
	"sort"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine/internal/record"
)

// DescribeWorkflow returns a run's summary and its pending state
// executions: for each, the phase, the attempt number and due time of its
// next worker call, its last failed call, and the commands it awaits.
func (e *Engine) DescribeWorkflow(ctx context.Context, req iwfapi.WorkflowDescribeRequest) (iwfapi.WorkflowDescribeResponse, error) {
	var resp iwfapi.WorkflowDescribeResponse
	var pendingCalls map[string]*Task
	err := e.storeView(ctx, func(ctx context.Context, tx ReadTx) error {
		pendingCalls = nil
		run, rd, err := readRun(ctx, tx, req.WorkflowId, deref(req.WorkflowRunId))
		if err != nil {
			return err
		}
		id := run.RunID
		resp = describeRun(run, rd)
		if run.Status != RunRunning {
			return nil
		}
		if p := e.runPauseOf(run.WorkflowType, rd); p != nil {
			resp.Paused = &iwfapi.WorkflowPauseInfo{Scope: p.Scope, PausedBy: nonEmptyPtr(p.By), Reason: nonEmptyPtr(p.Reason)}
			if !p.At.IsZero() {
				resp.Paused.PausedTimestampMs = ptr(unixMs(p.At))
			}
		}
		xs, err := tx.ExecutionList(ctx, id, LiveStatuses...)
		if err != nil {
			return err
		}
		tasks, err := tx.TaskList(ctx, id)
		if err != nil {
			return err
		}
		calls := map[string]*Task{}
		for _, t := range tasks {
			if t.Kind == TaskWaitUntil || t.Kind == TaskExecute {
				calls[t.ExecutionID] = t
			}
		}
		for _, x := range xs {
			xd, err := decodeExec(x)
			if err != nil {
				return err
			}
			resp.PendingStates = append(resp.PendingStates, describeExecution(x, xd, calls[x.ExecutionID]))
		}
		if e.limiter.active() {
			pendingCalls = calls
		}
		sort.SliceStable(resp.PendingStates, func(i, j int) bool {
			return executionOrder(resp.PendingStates[i].StateExecutionId) < executionOrder(resp.PendingStates[j].StateExecutionId)
		})
		return nil
	})
	if err == nil && len(pendingCalls) > 0 {
		err = e.describeLimitWaits(ctx, resp.PendingStates, pendingCalls)
	}
	if err == nil {
		err = e.inline(ctx, true, req.WorkflowId, resp.WorkflowRunId, &resp)
	}
	return resp, err
}

// describeLimitWaits marks the pending states whose next call waits for a
// concurrency or rate limit, as the store's queues show it (on
// PostgreSQL, whichever node the call waits on).
func (e *Engine) describeLimitWaits(ctx context.Context, pending []iwfapi.PendingStateExecution, calls map[string]*Task) error {
	ids := make([]int64, 0, len(calls))
	for _, t := range calls {
		ids = append(ids, t.ID)
	}
	waits, err := e.limiter.ps.PermitWaiting(ctx, ids)
	if err != nil {
		return err
	}
	for i := range pending {
		p := &pending[i]
		t := calls[p.StateExecutionId]
		if t == nil || p.Phase == iwfapi.PendingStateExecutionPhaseWAITINGCOMMANDS {
			continue
		}
		if w, ok := waits[t.ID]; ok {
			p.WaitingForLimit = ptr(w.Key)
			p.WaitingForLimitSinceTimestampMs = ptr(unixMs(w.Since))
		}
	}
	return nil
}

// executionOrder sorts execution ids ("S1-2") by state id, then number.
func executionOrder(id string) string {
	i := len(id)
	for i > 0 && id[i-1] >= '0' && id[i-1] <= '9' {
		i--
	}
	// Pad the number so that "S-10" sorts after "S-9".
	const width = 12
	n := id[i:]
	for len(n) < width {
		n = "0" + n
	}
	return id[:i] + n
}

// describeRun is the summary part of a describe answer.
func describeRun(run *Run, rd *record.Run) iwfapi.WorkflowDescribeResponse {
	resp := iwfapi.WorkflowDescribeResponse{
		WorkflowId:         run.WorkflowID,
		WorkflowRunId:      run.RunID,
		WorkflowType:       run.WorkflowType,
		Status:             iwfapi.WorkflowStatus(run.Status),
		WorkerUrl:          rd.WorkerURL,
		StartedTimestampMs: unixMs(run.StartedAt),
		PendingStates:      []iwfapi.PendingStateExecution{},
	}
	if !run.ClosedAt.IsZero() {
		resp.ClosedTimestampMs = ptr(unixMs(run.ClosedAt))
	}
	if rd.TimeoutAt != 0 {
		resp.TimeoutTimestampMs = ptr(rd.TimeoutAt)
	}
	if rd.RetryAttempt > 0 {
		resp.RetryAttempt = ptr(int32(rd.RetryAttempt))
	}
	if rd.RetriedBy != "" {
		resp.RetriedByRunId = ptr(rd.RetriedBy)
	}
	if rd.ErrorType != "" {
		resp.ErrorType = ptr(rd.ErrorType)
	}
	if rd.ErrorMsg != "" {
		resp.ErrorMessage = ptr(rd.ErrorMsg)
	}
	return resp
}

// describeExecution describes one live execution; call is its pending
// waitUntil or execute task, if any.
func describeExecution(x *Execution, xd *record.Execution, call *Task) iwfapi.PendingStateExecution {
	p := iwfapi.PendingStateExecution{StateExecutionId: x.ExecutionID, StateId: x.StateID}
	switch x.Status {
	case ExecWaitUntil:
		p.Phase = iwfapi.PendingStateExecutionPhaseWAITUNTIL
	case ExecExecute:
		p.Phase = iwfapi.PendingStateExecutionPhaseEXECUTE
	default:
		p.Phase = iwfapi.PendingStateExecutionPhaseWAITINGCOMMANDS
	}
	if call != nil && x.Status != ExecWaiting {
		p.Attempt = ptr(int32(call.Attempt))
		if call.DueAt.Equal(parkedDue) {
			p.HeldByPause = ptr(true)
		} else {
			p.NextAttemptTimestampMs = ptr(unixMs(call.DueAt))
		}
		if !call.FirstAttemptAt.IsZero() {
			p.FirstAttemptTimestampMs = ptr(unixMs(call.FirstAttemptAt))
		}
	}
	if f := xd.LastFailure; f != nil && f.API == string(x.Status) {
		af := iwfapi.AttemptFailure{Api: iwfapi.AttemptFailureApi(f.API), Attempt: int32(f.Attempt), TimestampMs: f.At, Error: f.Error}
		if f.Status != 0 {
			af.HttpStatus = ptr(int32(f.Status))
		}
		p.LastFailure = &af
	}
	if c := xd.Commands; c != nil && x.Status != ExecWaitUntil {
		if c.CommandWaitingType != nil {
			p.CommandWaitingType = ptr(iwfapi.CommandWaitingType(*c.CommandWaitingType))
		}
		p.Commands = describeCommands(c, xd)
	}
	return p
}

// describeCommands lists an execution's commands in flattened order
// (timers, signals, internal channels) with their completion.
func describeCommands(c *record.Commands, xd *record.Execution) *[]iwfapi.PendingCommand {
	var out []iwfapi.PendingCommand
	add := func(pc iwfapi.PendingCommand, id *string) {
		if deref(id) != "" {
			pc.CommandId = id
		}
		i := len(out)
		pc.Done = i < len(xd.Done) && xd.Done[i]
		out = append(out, pc)
	}
	for i, t := range slice(c.TimerCommands) {
		pc := iwfapi.PendingCommand{Kind: iwfapi.PendingCommandKindTIMER}
		if i < len(xd.FireAt) {
			pc.FiringTimestampMs = ptr(xd.FireAt[i])
		}
		add(pc, t.CommandID)
	}
	for _, s := range slice(c.SignalCommands) {
		add(iwfapi.PendingCommand{Kind: iwfapi.PendingCommandKindSIGNAL, ChannelName: ptr(s.SignalChannelName)}, s.CommandID)
	}
	for _, ch := range slice(c.InterStateChannelCommands) {
		add(iwfapi.PendingCommand{Kind: iwfapi.PendingCommandKindINTERNALCHANNEL, ChannelName: ptr(ch.ChannelName)}, ch.CommandID)
	}
	if out == nil {
		return nil
	}
	return &out
}
