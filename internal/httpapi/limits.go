package httpapi

// The limit endpoints (/api/v1/limit/*) and workflow/stats, extensions of
// this server: the wire types mapped to the engine's and back, so that the
// engine neither takes nor stores the wire's shapes.

import (
	"context"
	"strconv"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine"
)

// ListLimits serves POST /api/v1/limit/list, an extension of this server.
func (s *Server) ListLimits(ctx context.Context, _ iwfapi.ListLimitsRequestObject) (iwfapi.ListLimitsResponseObject, error) {
	ls, err := s.svc.ListLimits(ctx)
	if err != nil {
		return nil, err
	}
	out := iwfapi.LimitListResponse{Limits: make([]iwfapi.Limit, 0, len(ls))}
	for _, l := range ls {
		out.Limits = append(out.Limits, limitOut(l))
	}
	return iwfapi.ListLimits200JSONResponse(out), nil
}

// SetLimit serves POST /api/v1/limit/set, an extension of this server.
func (s *Server) SetLimit(ctx context.Context, req iwfapi.SetLimitRequestObject) (iwfapi.SetLimitResponseObject, error) {
	l, err := s.svc.SetLimit(ctx, engine.LimitChange{Kind: engine.LimitKind(req.Body.Kind), Target: req.Body.Target, Value: req.Body.Value})
	if err != nil {
		return nil, err
	}
	infoFrom(ctx).resultLimit = l.Key() + "=" + strconv.FormatFloat(l.Value, 'g', -1, 64)
	return iwfapi.SetLimit200JSONResponse(limitOut(l)), nil
}

// DeleteLimit serves POST /api/v1/limit/delete, an extension of this
// server.
func (s *Server) DeleteLimit(ctx context.Context, req iwfapi.DeleteLimitRequestObject) (iwfapi.DeleteLimitResponseObject, error) {
	l, err := s.svc.DeleteLimit(ctx, engine.LimitKind(req.Body.Kind), req.Body.Target)
	if err != nil {
		return nil, err
	}
	infoFrom(ctx).resultLimit = l.Key() + " removed"
	return iwfapi.DeleteLimit200JSONResponse(limitOut(l)), nil
}

// limitOut is a limit as the API shows it.
func limitOut(l engine.Limit) iwfapi.Limit {
	return iwfapi.Limit{Kind: iwfapi.LimitKind(l.Kind), Target: l.Target, Value: l.Value, Paused: l.Value == 0,
		Source: l.Source, UpdatedBy: nonEmpty(l.UpdatedBy), UpdatedTimestampMs: l.UpdatedAt.UnixMilli()}
}

// GetWorkflowStats serves POST /api/v1/workflow/stats, an extension of
// this server.
func (s *Server) GetWorkflowStats(ctx context.Context, req iwfapi.GetWorkflowStatsRequestObject) (iwfapi.GetWorkflowStatsResponseObject, error) {
	a, err := s.svc.StateStats(ctx, engine.StateStatsRequest{WorkflowType: req.Body.WorkflowType, MaxRuns: int(deref(req.Body.MaxRuns))})
	if err != nil {
		return nil, err
	}
	return iwfapi.GetWorkflowStats200JSONResponse(stateStatsOut(a)), nil
}

// statePhases are the engine's phases as the API names them
// (TestStatePhasesMapped: each of engine.StatePhases, each once).
var statePhases = map[engine.StatePhase]iwfapi.StatePhase{
	engine.PhaseWaitUntil:       iwfapi.StatePhaseWaitUntil,
	engine.PhaseWaitingCommands: iwfapi.StatePhaseWaitingCommands,
	engine.PhaseExecute:         iwfapi.StatePhaseExecute,
	engine.PhaseRetrying:        iwfapi.StatePhaseRetrying,
	engine.PhasePaused:          iwfapi.StatePhasePaused,
}

// stateStatsOut is a StateStats answer as the API shows it.
func stateStatsOut(a engine.StateStatsAnswer) iwfapi.WorkflowStatsResponse {
	out := iwfapi.WorkflowStatsResponse{WorkflowType: a.WorkflowType, Runs: int32(a.Runs), Truncated: a.Truncated,
		WaitingRead: int32(a.WaitingRead), WaitingTruncated: a.WaitingTruncated, States: make([]iwfapi.StateUse, 0, len(a.States))}
	for _, u := range a.States {
		su := iwfapi.StateUse{StateId: u.StateID, Executions: int32(u.Executions), Runs: int32(u.Runs),
			Phases: make([]iwfapi.StatePhaseCount, 0, len(u.Phases)), Waits: make([]iwfapi.StateCommandWait, 0, len(u.Waits))}
		for _, p := range u.Phases {
			su.Phases = append(su.Phases, iwfapi.StatePhaseCount{Phase: statePhases[p.Phase], Count: int32(p.Count),
				OldestWorkflowId: p.Oldest.WorkflowID, OldestWorkflowRunId: p.Oldest.RunID, OldestStateExecutionId: p.Oldest.ExecutionID,
				OldestSinceTimestampMs: p.Oldest.Since.UnixMilli()})
		}
		for _, w := range u.Waits {
			su.Waits = append(su.Waits, iwfapi.StateCommandWait{Kind: iwfapi.StateCommandWaitKind(w.Kind), Name: nonEmpty(w.Name), Executions: int32(w.Executions)})
		}
		out.States = append(out.States, su)
	}
	return out
}
