package httpapi

import (
	"context"
	"net/http"
	"os"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/auth"
)

// Server implements the generated strict-server interface: every handler
// hands the decoded request to the Service and wraps its answer in the
// generated response type. Errors are returned as they are; the strict
// server passes them to the error table (handleServiceError).
type Server struct {
	svc Service
	log errorLogger
}

// errorLogger logs failed health checks.
type errorLogger func(err error)

var _ iwfapi.StrictServerInterface = (*Server)(nil)

// NewServer returns a Server that serves the API with svc.
func NewServer(svc Service) *Server { return &Server{svc: svc, log: func(error) {}} }

// emptyResponse is the "{}" body of the endpoints without a result.
var emptyResponse = iwfapi.EmptyResponse{}

// StartWorkflow serves POST /api/v1/workflow/start.
func (s *Server) StartWorkflow(ctx context.Context, req iwfapi.StartWorkflowRequestObject) (iwfapi.StartWorkflowResponseObject, error) {
	resp, err := s.svc.StartWorkflow(ctx, *req.Body)
	if err != nil {
		return nil, err
	}
	infoFrom(ctx).resultRunID = deref(resp.WorkflowRunId)
	return iwfapi.StartWorkflow200JSONResponse(resp), nil
}

// SignalWorkflow serves POST /api/v1/workflow/signal.
func (s *Server) SignalWorkflow(ctx context.Context, req iwfapi.SignalWorkflowRequestObject) (iwfapi.SignalWorkflowResponseObject, error) {
	if err := s.svc.SignalWorkflow(ctx, *req.Body); err != nil {
		return nil, err
	}
	return iwfapi.SignalWorkflow200JSONResponse(emptyResponse), nil
}

// PublishToInternalChannel serves POST /api/v1/workflow/publishToInternalChannel.
func (s *Server) PublishToInternalChannel(ctx context.Context, req iwfapi.PublishToInternalChannelRequestObject) (iwfapi.PublishToInternalChannelResponseObject, error) {
	if err := s.svc.PublishToInternalChannel(ctx, *req.Body); err != nil {
		return nil, err
	}
	return iwfapi.PublishToInternalChannel200JSONResponse(emptyResponse), nil
}

// StopWorkflow serves POST /api/v1/workflow/stop.
func (s *Server) StopWorkflow(ctx context.Context, req iwfapi.StopWorkflowRequestObject) (iwfapi.StopWorkflowResponseObject, error) {
	if err := s.svc.StopWorkflow(ctx, *req.Body); err != nil {
		return nil, err
	}
	return iwfapi.StopWorkflow200JSONResponse(emptyResponse), nil
}

// GetWorkflowDataObjects serves POST /api/v1/workflow/dataobjects/get.
func (s *Server) GetWorkflowDataObjects(ctx context.Context, req iwfapi.GetWorkflowDataObjectsRequestObject) (iwfapi.GetWorkflowDataObjectsResponseObject, error) {
	resp, err := s.svc.GetDataAttributes(ctx, *req.Body)
	if err != nil {
		return nil, err
	}
	return iwfapi.GetWorkflowDataObjects200JSONResponse(resp), nil
}

// SetWorkflowDataObjects serves POST /api/v1/workflow/dataobjects/set.
func (s *Server) SetWorkflowDataObjects(ctx context.Context, req iwfapi.SetWorkflowDataObjectsRequestObject) (iwfapi.SetWorkflowDataObjectsResponseObject, error) {
	if err := s.svc.SetDataAttributes(ctx, *req.Body); err != nil {
		return nil, err
	}
	return iwfapi.SetWorkflowDataObjects200JSONResponse(emptyResponse), nil
}

// GetWorkflowSearchAttributes serves POST /api/v1/workflow/searchattributes/get.
func (s *Server) GetWorkflowSearchAttributes(ctx context.Context, req iwfapi.GetWorkflowSearchAttributesRequestObject) (iwfapi.GetWorkflowSearchAttributesResponseObject, error) {
	resp, err := s.svc.GetSearchAttributes(ctx, *req.Body)
	if err != nil {
		return nil, err
	}
	return iwfapi.GetWorkflowSearchAttributes200JSONResponse(resp), nil
}

// SetWorkflowSearchAttributes serves POST /api/v1/workflow/searchattributes/set.
func (s *Server) SetWorkflowSearchAttributes(ctx context.Context, req iwfapi.SetWorkflowSearchAttributesRequestObject) (iwfapi.SetWorkflowSearchAttributesResponseObject, error) {
	if err := s.svc.SetSearchAttributes(ctx, *req.Body); err != nil {
		return nil, err
	}
	return iwfapi.SetWorkflowSearchAttributes200JSONResponse(emptyResponse), nil
}

// LoadEncodedObject serves POST /api/v1/workflow/encodedobject/load: the
// encoded object with its data, loaded from the external store when it
// refers to one. iWF does not route this path; without external storage
// (Options.ExternalStorage) NewHandler answers it 404 before validation,
// as iWF does.
func (s *Server) LoadEncodedObject(ctx context.Context, req iwfapi.LoadEncodedObjectRequestObject) (iwfapi.LoadEncodedObjectResponseObject, error) {
	obj, err := s.svc.LoadEncodedObject(ctx, *req.Body)
	if err != nil {
		return nil, err
	}
	return iwfapi.LoadEncodedObject200JSONResponse(obj), nil
}

// encodedObjectLoadDetail explains the 404 of encodedobject/load.
const encodedObjectLoadDetail = "not found: /api/v1/workflow/encodedobject/load is not offered by this server (no external payload storage)"

// GetWorkflow serves POST /api/v1/workflow/get.
func (s *Server) GetWorkflow(ctx context.Context, req iwfapi.GetWorkflowRequestObject) (iwfapi.GetWorkflowResponseObject, error) {
	resp, err := s.svc.GetWorkflow(ctx, *req.Body)
	if err != nil {
		return nil, err
	}
	return iwfapi.GetWorkflow200JSONResponse(resp), nil
}

// GetWorkflowWithWait serves POST /api/v1/workflow/getWithWait.
func (s *Server) GetWorkflowWithWait(ctx context.Context, req iwfapi.GetWorkflowWithWaitRequestObject) (iwfapi.GetWorkflowWithWaitResponseObject, error) {
	resp, err := s.svc.GetWorkflowWithWait(ctx, *req.Body)
	if err != nil {
		return nil, err
	}
	return iwfapi.GetWorkflowWithWait200JSONResponse(resp), nil
}

// SearchWorkflows serves POST /api/v1/workflow/search.
func (s *Server) SearchWorkflows(ctx context.Context, req iwfapi.SearchWorkflowsRequestObject) (iwfapi.SearchWorkflowsResponseObject, error) {
	resp, err := s.svc.SearchWorkflows(ctx, *req.Body)
	if err != nil {
		return nil, err
	}
	return iwfapi.SearchWorkflows200JSONResponse(resp), nil
}

// ResetWorkflow serves POST /api/v1/workflow/reset.
func (s *Server) ResetWorkflow(ctx context.Context, req iwfapi.ResetWorkflowRequestObject) (iwfapi.ResetWorkflowResponseObject, error) {
	resp, err := s.svc.ResetWorkflow(ctx, *req.Body)
	if err != nil {
		return nil, err
	}
	infoFrom(ctx).resultRunID = resp.WorkflowRunId
	return iwfapi.ResetWorkflow200JSONResponse(resp), nil
}

// ExecuteWorkflowRpc serves POST /api/v1/workflow/rpc.
func (s *Server) ExecuteWorkflowRpc(ctx context.Context, req iwfapi.ExecuteWorkflowRpcRequestObject) (iwfapi.ExecuteWorkflowRpcResponseObject, error) { //nolint:revive // generated name
	resp, err := s.svc.InvokeRPC(ctx, *req.Body)
	if err != nil {
		return nil, err
	}
	return iwfapi.ExecuteWorkflowRpc200JSONResponse(resp), nil
}

// SkipTimer serves POST /api/v1/workflow/timer/skip.
func (s *Server) SkipTimer(ctx context.Context, req iwfapi.SkipTimerRequestObject) (iwfapi.SkipTimerResponseObject, error) {
	if err := s.svc.SkipTimer(ctx, *req.Body); err != nil {
		return nil, err
	}
	return iwfapi.SkipTimer200JSONResponse(emptyResponse), nil
}

// UpdateWorkflowConfig serves POST /api/v1/workflow/config/update.
func (s *Server) UpdateWorkflowConfig(ctx context.Context, req iwfapi.UpdateWorkflowConfigRequestObject) (iwfapi.UpdateWorkflowConfigResponseObject, error) {
	if err := s.svc.UpdateConfig(ctx, *req.Body); err != nil {
		return nil, err
	}
	return iwfapi.UpdateWorkflowConfig200JSONResponse(emptyResponse), nil
}

// DumpWorkflowInternal serves POST /api/v1/workflow/internal/dump.
func (s *Server) DumpWorkflowInternal(ctx context.Context, req iwfapi.DumpWorkflowInternalRequestObject) (iwfapi.DumpWorkflowInternalResponseObject, error) {
	resp, err := s.svc.DumpWorkflow(ctx, *req.Body)
	if err != nil {
		return nil, err
	}
	return iwfapi.DumpWorkflowInternal200JSONResponse(resp), nil
}

// GetWorkflowHistory serves POST /api/v1/workflow/history, an extension of
// this server.
func (s *Server) GetWorkflowHistory(ctx context.Context, req iwfapi.GetWorkflowHistoryRequestObject) (iwfapi.GetWorkflowHistoryResponseObject, error) {
	resp, err := s.svc.WorkflowHistory(ctx, *req.Body)
	if err != nil {
		return nil, err
	}
	return iwfapi.GetWorkflowHistory200JSONResponse(resp), nil
}

// DescribeWorkflow serves POST /api/v1/workflow/describe, an extension of
// this server.
func (s *Server) DescribeWorkflow(ctx context.Context, req iwfapi.DescribeWorkflowRequestObject) (iwfapi.DescribeWorkflowResponseObject, error) {
	resp, err := s.svc.DescribeWorkflow(ctx, *req.Body)
	if err != nil {
		return nil, err
	}
	return iwfapi.DescribeWorkflow200JSONResponse(resp), nil
}

// StartBatch serves POST /api/v1/batch/start, an extension of this server.
// The access table lets an operator through; what the operation needs on
// one run is checked here, once the body is decoded (auth.BatchNeed).
func (s *Server) StartBatch(ctx context.Context, req iwfapi.StartBatchRequestObject) (iwfapi.StartBatchResponseObject, error) {
	if err := auth.AllowBatch(ctx, string(req.Body.Operation)); err != nil {
		return nil, err
	}
	resp, err := s.svc.StartBatch(ctx, batchRequestIn(*req.Body))
	if err != nil {
		return nil, err
	}
	infoFrom(ctx).resultBatchID = resp.ID
	return iwfapi.StartBatch200JSONResponse{BatchId: resp.ID, Matched: resp.Matched}, nil
}

// DescribeBatch serves POST /api/v1/batch/describe, an extension of this
// server.
func (s *Server) DescribeBatch(ctx context.Context, req iwfapi.DescribeBatchRequestObject) (iwfapi.DescribeBatchResponseObject, error) {
	resp, err := s.svc.DescribeBatch(ctx, engine.BatchDescribeRequest{ID: req.Body.BatchId,
		FailuresPageSize: int(deref(req.Body.FailuresPageSize)), FailuresPageToken: deref(req.Body.FailuresPageToken)})
	if err != nil {
		return nil, err
	}
	return iwfapi.DescribeBatch200JSONResponse(batchDescriptionOut(resp)), nil
}

// ListBatches serves POST /api/v1/batch/list, an extension of this server.
func (s *Server) ListBatches(ctx context.Context, req iwfapi.ListBatchesRequestObject) (iwfapi.ListBatchesResponseObject, error) {
	resp, err := s.svc.ListBatches(ctx, engine.BatchListRequest{PageSize: int(deref(req.Body.PageSize)), PageToken: deref(req.Body.NextPageToken)})
	if err != nil {
		return nil, err
	}
	return iwfapi.ListBatches200JSONResponse(batchPageOut(resp)), nil
}

// CancelBatch serves POST /api/v1/batch/cancel, an extension of this server.
func (s *Server) CancelBatch(ctx context.Context, req iwfapi.CancelBatchRequestObject) (iwfapi.CancelBatchResponseObject, error) {
	resp, err := s.svc.CancelBatch(ctx, req.Body.BatchId)
	if err != nil {
		return nil, err
	}
	return iwfapi.CancelBatch200JSONResponse(batchInfoOut(resp)), nil
}

// PauseWorkflow serves POST /api/v1/workflow/pause, an extension of this
// server.
func (s *Server) PauseWorkflow(ctx context.Context, req iwfapi.PauseWorkflowRequestObject) (iwfapi.PauseWorkflowResponseObject, error) {
	b := req.Body
	if err := s.svc.PauseWorkflow(ctx, engine.PauseRequest{WorkflowID: b.WorkflowId, RunID: deref(b.WorkflowRunId), Reason: deref(b.Reason)}); err != nil {
		return nil, err
	}
	return iwfapi.PauseWorkflow200JSONResponse(emptyResponse), nil
}

// ResumeWorkflow serves POST /api/v1/workflow/resume, an extension of this
// server.
func (s *Server) ResumeWorkflow(ctx context.Context, req iwfapi.ResumeWorkflowRequestObject) (iwfapi.ResumeWorkflowResponseObject, error) {
	b := req.Body
	if err := s.svc.ResumeWorkflow(ctx, engine.ResumeRequest{WorkflowID: b.WorkflowId, RunID: deref(b.WorkflowRunId)}); err != nil {
		return nil, err
	}
	return iwfapi.ResumeWorkflow200JSONResponse(emptyResponse), nil
}

// ListPauses serves POST /api/v1/pause/list, an extension of this server.
func (s *Server) ListPauses(ctx context.Context, _ iwfapi.ListPausesRequestObject) (iwfapi.ListPausesResponseObject, error) {
	ps, err := s.svc.ListPauses(ctx)
	if err != nil {
		return nil, err
	}
	out := iwfapi.PauseListResponse{Pauses: make([]iwfapi.PauseScopeInfo, 0, len(ps))}
	for _, p := range ps {
		out.Pauses = append(out.Pauses, pauseInfoOut(p))
	}
	return iwfapi.ListPauses200JSONResponse(out), nil
}

// SetPause serves POST /api/v1/pause/set, an extension of this server.
func (s *Server) SetPause(ctx context.Context, req iwfapi.SetPauseRequestObject) (iwfapi.SetPauseResponseObject, error) {
	b := req.Body
	scope := engine.PauseScope{WorkflowType: deref(b.WorkflowType), WorkerHost: deref(b.WorkerHost)}
	infoFrom(ctx).scope = scopeText(scope)
	p, err := s.svc.SetPause(ctx, engine.ScopePauseRequest{Scope: scope, Reason: deref(b.Reason)})
	if err != nil {
		return nil, err
	}
	return iwfapi.SetPause200JSONResponse(pauseInfoOut(p)), nil
}

// DeletePause serves POST /api/v1/pause/delete, an extension of this server.
func (s *Server) DeletePause(ctx context.Context, req iwfapi.DeletePauseRequestObject) (iwfapi.DeletePauseResponseObject, error) {
	b := req.Body
	scope := engine.PauseScope{WorkflowType: deref(b.WorkflowType), WorkerHost: deref(b.WorkerHost)}
	infoFrom(ctx).scope = scopeText(scope)
	r, err := s.svc.DeletePause(ctx, engine.ScopeResumeRequest{Scope: scope, RPS: deref(b.Rps)})
	if err != nil {
		return nil, err
	}
	out := iwfapi.PauseDeleteResponse{Resumed: int64(r.Resumed)}
	if !r.LastDue.IsZero() {
		out.LastDueTimestampMs = ptr(r.LastDue.UnixMilli())
	}
	return iwfapi.DeletePause200JSONResponse(out), nil
}

// WaitForStateCompletion serves POST /api/v1/workflow/waitForStateCompletion.
func (s *Server) WaitForStateCompletion(ctx context.Context, req iwfapi.WaitForStateCompletionRequestObject) (iwfapi.WaitForStateCompletionResponseObject, error) {
	resp, err := s.svc.WaitForStateCompletion(ctx, *req.Body)
	if err != nil {
		return nil, err
	}
	return iwfapi.WaitForStateCompletion200JSONResponse(resp), nil
}

// TriggerContinueAsNew serves POST /api/v1/workflow/triggerContinueAsNew.
func (s *Server) TriggerContinueAsNew(ctx context.Context, req iwfapi.TriggerContinueAsNewRequestObject) (iwfapi.TriggerContinueAsNewResponseObject, error) {
	if err := s.svc.TriggerContinueAsNew(ctx, *req.Body); err != nil {
		return nil, err
	}
	return iwfapi.TriggerContinueAsNew200JSONResponse(emptyResponse), nil
}

// HealthCheck serves GET /info/healthcheck: iWF's HealthInfo when the
// Service is healthy, 503 with an ErrorResponse otherwise.
func (s *Server) HealthCheck(ctx context.Context, _ iwfapi.HealthCheckRequestObject) (iwfapi.HealthCheckResponseObject, error) {
	if err := s.svc.Healthy(ctx); err != nil {
		s.log(err)
		return healthCheckUnavailable{}, nil
	}
	hostname, _ := os.Hostname()
	return iwfapi.HealthCheck200JSONResponse{Condition: ptr("OK"), Hostname: &hostname, Duration: ptr(int32(0))}, nil
}

// healthCheckUnavailable is the 503 answer of a failed health check. The
// spec declares only 200 for the health check, so the type is ours.
type healthCheckUnavailable struct{}

// VisitHealthCheckResponse implements iwfapi.HealthCheckResponseObject.
func (healthCheckUnavailable) VisitHealthCheckResponse(w http.ResponseWriter) error {
	writeJSON(w, http.StatusServiceUnavailable, iwfapi.ErrorResponse{
		Detail:    ptr("unhealthy: the store does not answer"),
		SubStatus: ptr(iwfapi.ErrorSubStatusUncategorized),
	})
	return nil
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
