package httpapi

import (
	"context"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine"
)

// Service is what the REST API needs from the engine: one method per
// endpoint, taking and returning the generated wire types, but for the
// batch calls, which take and answer the engine's own (mapped from and to
// the wire in batch.go). Errors should be *engine.Error values; their code
// selects the HTTP status and the iWF subStatus (see errorTable). Any other
// error is answered as an internal error (500) and logged.
type Service interface {
	// StartWorkflow serves POST /api/v1/workflow/start.
	StartWorkflow(ctx context.Context, req iwfapi.WorkflowStartRequest) (iwfapi.WorkflowStartResponse, error)
	// SignalWorkflow serves POST /api/v1/workflow/signal.
	SignalWorkflow(ctx context.Context, req iwfapi.WorkflowSignalRequest) error
	// PublishToInternalChannel serves POST /api/v1/workflow/publishToInternalChannel.
	PublishToInternalChannel(ctx context.Context, req iwfapi.PublishToInternalChannelRequest) error
	// StopWorkflow serves POST /api/v1/workflow/stop.
	StopWorkflow(ctx context.Context, req iwfapi.WorkflowStopRequest) error
	// GetDataAttributes serves POST /api/v1/workflow/dataobjects/get.
	GetDataAttributes(ctx context.Context, req iwfapi.WorkflowGetDataObjectsRequest) (iwfapi.WorkflowGetDataObjectsResponse, error)
	// SetDataAttributes serves POST /api/v1/workflow/dataobjects/set.
	SetDataAttributes(ctx context.Context, req iwfapi.WorkflowSetDataObjectsRequest) error
	// GetSearchAttributes serves POST /api/v1/workflow/searchattributes/get.
	GetSearchAttributes(ctx context.Context, req iwfapi.WorkflowGetSearchAttributesRequest) (iwfapi.WorkflowGetSearchAttributesResponse, error)
	// SetSearchAttributes serves POST /api/v1/workflow/searchattributes/set.
	SetSearchAttributes(ctx context.Context, req iwfapi.WorkflowSetSearchAttributesRequest) error
	// GetWorkflow serves POST /api/v1/workflow/get.
	GetWorkflow(ctx context.Context, req iwfapi.WorkflowGetRequest) (iwfapi.WorkflowGetResponse, error)
	// GetWorkflowWithWait serves POST /api/v1/workflow/getWithWait.
	GetWorkflowWithWait(ctx context.Context, req iwfapi.WorkflowGetRequest) (iwfapi.WorkflowGetResponse, error)
	// SearchWorkflows serves POST /api/v1/workflow/search.
	SearchWorkflows(ctx context.Context, req iwfapi.WorkflowSearchRequest) (iwfapi.WorkflowSearchResponse, error)
	// ResetWorkflow serves POST /api/v1/workflow/reset.
	ResetWorkflow(ctx context.Context, req iwfapi.WorkflowResetRequest) (iwfapi.WorkflowResetResponse, error)
	// InvokeRPC serves POST /api/v1/workflow/rpc.
	InvokeRPC(ctx context.Context, req iwfapi.WorkflowRpcRequest) (iwfapi.WorkflowRpcResponse, error)
	// SkipTimer serves POST /api/v1/workflow/timer/skip.
	SkipTimer(ctx context.Context, req iwfapi.WorkflowSkipTimerRequest) error
	// UpdateConfig serves POST /api/v1/workflow/config/update.
	UpdateConfig(ctx context.Context, req iwfapi.WorkflowConfigUpdateRequest) error
	// WorkflowHistory serves POST /api/v1/workflow/history (our extension).
	WorkflowHistory(ctx context.Context, req iwfapi.WorkflowHistoryRequest) (iwfapi.WorkflowHistoryResponse, error)
	// DescribeWorkflow serves POST /api/v1/workflow/describe (our extension).
	DescribeWorkflow(ctx context.Context, req iwfapi.WorkflowDescribeRequest) (iwfapi.WorkflowDescribeResponse, error)
	// DumpWorkflow serves POST /api/v1/workflow/internal/dump.
	DumpWorkflow(ctx context.Context, req iwfapi.WorkflowDumpRequest) (iwfapi.WorkflowDumpResponse, error)
	// WaitForStateCompletion serves POST /api/v1/workflow/waitForStateCompletion.
	WaitForStateCompletion(ctx context.Context, req iwfapi.WorkflowWaitForStateCompletionRequest) (iwfapi.WorkflowWaitForStateCompletionResponse, error)
	// LoadEncodedObject serves POST /api/v1/workflow/encodedobject/load
	// when Options.ExternalStorage is set.
	LoadEncodedObject(ctx context.Context, obj iwfapi.EncodedObject) (iwfapi.EncodedObject, error)
	// TriggerContinueAsNew serves POST /api/v1/workflow/triggerContinueAsNew.
	TriggerContinueAsNew(ctx context.Context, req iwfapi.TriggerContinueAsNewRequest) error
	// StartBatch serves POST /api/v1/batch/start (our extension).
	StartBatch(ctx context.Context, req engine.BatchRequest) (engine.BatchStarted, error)
	// DescribeBatch serves POST /api/v1/batch/describe (our extension).
	DescribeBatch(ctx context.Context, req engine.BatchDescribeRequest) (engine.BatchDescription, error)
	// ListBatches serves POST /api/v1/batch/list (our extension).
	ListBatches(ctx context.Context, req engine.BatchListRequest) (engine.BatchPage, error)
	// CancelBatch serves POST /api/v1/batch/cancel (our extension).
	CancelBatch(ctx context.Context, batchID string) (engine.BatchInfo, error)
	// PauseWorkflow serves POST /api/v1/workflow/pause (our extension).
	PauseWorkflow(ctx context.Context, req engine.PauseRequest) error
	// ResumeWorkflow serves POST /api/v1/workflow/resume (our extension).
	ResumeWorkflow(ctx context.Context, req engine.ResumeRequest) error
	// ListPauses serves POST /api/v1/pause/list (our extension).
	ListPauses(ctx context.Context) ([]engine.PauseInfo, error)
	// SetPause serves POST /api/v1/pause/set (our extension).
	SetPause(ctx context.Context, req engine.ScopePauseRequest) (engine.PauseInfo, error)
	// DeletePause serves POST /api/v1/pause/delete (our extension).
	DeletePause(ctx context.Context, req engine.ScopeResumeRequest) (engine.ScopeResumed, error)
	// ListLimits serves POST /api/v1/limit/list (our extension).
	ListLimits(ctx context.Context) ([]engine.Limit, error)
	// SetLimit serves POST /api/v1/limit/set (our extension).
	SetLimit(ctx context.Context, c engine.LimitChange) (engine.Limit, error)
	// DeleteLimit serves POST /api/v1/limit/delete (our extension).
	DeleteLimit(ctx context.Context, kind engine.LimitKind, target string) (engine.Limit, error)
	// StateStats serves POST /api/v1/workflow/stats (our extension).
	StateStats(ctx context.Context, req engine.StateStatsRequest) (engine.StateStatsAnswer, error)
	// Healthy reports whether the store answers (nil when it does); it
	// serves GET /info/healthcheck.
	Healthy(ctx context.Context) error
	// SchemaVersion returns the highest migration applied to the store;
	// it serves GET /info/version with the build's identity.
	SchemaVersion(ctx context.Context) (int, error)
}
