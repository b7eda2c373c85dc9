package httpapi

// The batch endpoints' wire types and the engine's batch types, mapped
// both ways. The engine neither takes nor stores the wire's shapes, so
// that regenerating the API changes no batch row.

import (
	"strings"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine"
)

// batchRequestIn is a batch/start body as the engine takes it.
func batchRequestIn(req iwfapi.BatchStartRequest) engine.BatchRequest {
	out := engine.BatchRequest{Query: req.Query, Operation: engine.BatchOperation(req.Operation), Reason: deref(req.Reason),
		RPS: deref(req.Rps), SignalChannel: deref(req.SignalChannelName), WorkerURL: deref(req.WorkerUrl)}
	if v := req.SignalValue; v != nil {
		out.SignalValue = &engine.EncodedValue{Encoding: v.Encoding, Data: v.Data, ExtPath: v.ExtPath, ExtStoreID: v.ExtStoreId}
	}
	if r := req.Reset; r != nil {
		out.Reset = &engine.BatchReset{ResetType: string(r.ResetType), HistoryEventID: r.HistoryEventId, HistoryEventTime: r.HistoryEventTime,
			StateID: r.StateId, StateExecutionID: r.StateExecutionId, SkipSignalReapply: r.SkipSignalReapply, SkipUpdateReapply: r.SkipUpdateReapply}
	}
	if st := req.SkipTimer; st != nil {
		out.SkipTimer = &engine.BatchSkipTimer{StateExecutionID: st.WorkflowStateExecutionId, TimerCommandID: st.TimerCommandId, TimerCommandIndex: st.TimerCommandIndex}
	}
	return out
}

// batchInfoOut is a batch as the API shows it: the state in capitals,
// times in unix milliseconds, absent texts left out.
func batchInfoOut(b engine.BatchInfo) iwfapi.BatchInfo {
	out := iwfapi.BatchInfo{BatchId: b.ID, Query: b.Query, Operation: iwfapi.BatchOperation(b.Operation), Rps: b.RPS,
		State: iwfapi.BatchState(strings.ToUpper(string(b.State))), Matched: b.Matched, Done: b.Done, Failed: b.Failed,
		Pending: b.Pending, CreatedBy: b.CreatedBy, CreatedTimestampMs: b.CreatedAt.UnixMilli(), UpdatedTimestampMs: b.UpdatedAt.UnixMilli(),
		Reason: nonEmpty(b.Reason), Message: nonEmpty(b.Message), SignalChannelName: nonEmpty(b.SignalChannel), WorkerUrl: nonEmpty(b.WorkerURL)}
	if !b.ClosedAt.IsZero() {
		out.ClosedTimestampMs = ptr(b.ClosedAt.UnixMilli())
	}
	if r := b.Reset; r != nil {
		out.Reset = &iwfapi.BatchResetOptions{ResetType: iwfapi.WorkflowResetType(r.ResetType), HistoryEventId: r.HistoryEventID,
			HistoryEventTime: r.HistoryEventTime, StateId: r.StateID, StateExecutionId: r.StateExecutionID,
			SkipSignalReapply: r.SkipSignalReapply, SkipUpdateReapply: r.SkipUpdateReapply}
	}
	if st := b.SkipTimer; st != nil {
		out.SkipTimer = &iwfapi.BatchSkipTimerOptions{WorkflowStateExecutionId: st.StateExecutionID, TimerCommandId: st.TimerCommandID, TimerCommandIndex: st.TimerCommandIndex}
	}
	return out
}

// batchDescriptionOut is a batch/describe answer.
func batchDescriptionOut(d engine.BatchDescription) iwfapi.BatchDescribeResponse {
	out := iwfapi.BatchDescribeResponse{Batch: batchInfoOut(d.Batch), Failures: make([]iwfapi.BatchFailure, 0, len(d.Failures)),
		FailuresNextPageToken: nonEmpty(d.FailuresNextPageToken)}
	for _, f := range d.Failures {
		out.Failures = append(out.Failures, iwfapi.BatchFailure{WorkflowId: f.WorkflowID, WorkflowRunId: f.RunID, Reason: f.Reason})
	}
	return out
}

// batchPageOut is a batch/list answer.
func batchPageOut(p engine.BatchPage) iwfapi.BatchListResponse {
	out := iwfapi.BatchListResponse{Batches: make([]iwfapi.BatchInfo, 0, len(p.Batches)), NextPageToken: nonEmpty(p.NextPageToken)}
	for _, b := range p.Batches {
		out.Batches = append(out.Batches, batchInfoOut(b))
	}
	return out
}

// nonEmpty is s, or nil when it is empty.
func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// pauseInfoOut is a paused scope as the API shows it.
func pauseInfoOut(p engine.PauseInfo) iwfapi.PauseScopeInfo {
	return iwfapi.PauseScopeInfo{WorkflowType: nonEmpty(p.WorkflowType), WorkerHost: nonEmpty(p.WorkerHost), Reason: nonEmpty(p.Reason),
		PausedBy: p.By, PausedTimestampMs: p.At.UnixMilli(), HeldCalls: int64(p.Held)}
}

// scopeText names a scope in the audit log: type:NAME or host:HOST:PORT,
// as the request gave it.
func scopeText(s engine.PauseScope) string {
	switch {
	case s.WorkflowType != "":
		return "type:" + s.WorkflowType
	case s.WorkerHost != "":
		return "host:" + s.WorkerHost
	}
	return ""
}
