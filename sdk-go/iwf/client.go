package iwf

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/iwf-server/iwf-server/sdk-go/internal/wire"
)

// Default URLs, as in every iWF SDK.
const (
	DefaultServerURL = "http://localhost:8801"
	DefaultWorkerURL = "http://localhost:8803"
)

// ClientOptions configure NewClient. The zero value is usable.
type ClientOptions struct {
	// WorkerURL is the base URL at which the server calls the worker
	// (NewWorkerService) of the workflows this client starts; "" means
	// DefaultWorkerURL.
	WorkerURL string
	// HTTPClient sends the requests; nil means a client without a timeout
	// (long polls take up to a minute; bound calls with their context).
	HTTPClient *http.Client
	// ObjectEncoder encodes and decodes payloads; nil means
	// JSONObjectEncoder. Workers must use a compatible one.
	ObjectEncoder ObjectEncoder
	// Token, when set, is sent with every request as
	// "Authorization: Bearer <token>", for a server with API authentication
	// on (iwf-server's --auth-token-file or IWF_AUTH_TOKENS).
	Token string
}

// Client calls a workflow server's REST API: iwf-server, or any server
// that speaks iWF's v1 API. It is safe for concurrent use.
//
// Methods that address a workflow take its id and a run id; an empty run
// id means the workflow's current run. A non-200 answer of the server is
// returned as an *APIError.
type Client struct {
	serverURL string
	workerURL string
	http      *http.Client
	enc       ObjectEncoder
	token     string
}

// NewClient returns a client of the server at serverURL ("" means
// DefaultServerURL). It fails only when a URL is not an absolute http(s)
// URL.
func NewClient(serverURL string, opts *ClientOptions) (*Client, error) {
	if opts == nil {
		opts = &ClientOptions{}
	}
	c := &Client{serverURL: serverURL, workerURL: opts.WorkerURL, http: opts.HTTPClient, enc: opts.ObjectEncoder, token: opts.Token}
	if strings.ContainsAny(c.token, " \t\r\n") {
		return nil, errors.New("iwf: the token must not contain spaces or line breaks")
	}
	if c.serverURL == "" {
		c.serverURL = DefaultServerURL
	}
	if c.workerURL == "" {
		c.workerURL = DefaultWorkerURL
	}
	for _, u := range []*string{&c.serverURL, &c.workerURL} {
		parsed, err := url.Parse(*u)
		if err != nil || (parsed.Scheme != "http" && parsed.Scheme != "https") || parsed.Host == "" {
			return nil, fmt.Errorf("iwf: %q is not an http(s) URL", *u)
		}
		*u = strings.TrimRight(*u, "/")
	}
	if c.http == nil {
		c.http = &http.Client{}
	}
	if c.enc == nil {
		c.enc = JSONObjectEncoder()
	}
	return c, nil
}

// StartOptions are the optional settings of Client.StartWorkflow.
type StartOptions struct {
	// IDReusePolicy says when a workflow id may be used again; "" means the
	// server's default, IDReuseAllowDuplicate.
	IDReusePolicy IDReusePolicy
	// IgnoreAlreadyStarted turns an "already started" error into success,
	// returning the running run's id, if RequestID is empty or equals the
	// RequestID that run was started with.
	IgnoreAlreadyStarted bool
	RequestID            string
	// StartDelay postpones the start state (rounded up to seconds).
	StartDelay time.Duration
	// RetryPolicy restarts a FAILED workflow as a new run; nil means no
	// retry. MaximumAttemptsDuration is not used here.
	RetryPolicy *RetryPolicy
	// CronSchedule runs the workflow on a cron schedule, where the server
	// supports it.
	CronSchedule string
	// DataAttributes and SearchAttributes are the initial attributes; their
	// keys must be declared by the workflow.
	DataAttributes   map[string]any
	SearchAttributes []SearchAttribute
	// Config overrides the server's default WorkflowConfig.
	Config *WorkflowConfig
	// WaitForCompletionStateIDs and WaitForCompletionStateExecutionIDs
	// select the state executions whose completion
	// Client.WaitForStateExecutionCompletion and
	// Client.WaitForStateCompletionWithKey can wait for.
	WaitForCompletionStateIDs          []string
	WaitForCompletionStateExecutionIDs []string
}

// IDReusePolicy is StartOptions.IDReusePolicy.
type IDReusePolicy string

// The id reuse policies, relative to the latest run with the same id.
const (
	// IDReuseAllowDuplicate allows a new run unless one is running.
	IDReuseAllowDuplicate IDReusePolicy = "ALLOW_DUPLICATE"
	// IDReuseAllowDuplicateFailedOnly allows a new run only if the latest
	// ended FAILED, CANCELED, TERMINATED or TIMEOUT.
	IDReuseAllowDuplicateFailedOnly IDReusePolicy = "ALLOW_DUPLICATE_FAILED_ONLY"
	// IDReuseRejectDuplicate never allows a new run.
	IDReuseRejectDuplicate IDReusePolicy = "REJECT_DUPLICATE"
	// IDReuseTerminateIfRunning terminates a running run and starts anew.
	IDReuseTerminateIfRunning IDReusePolicy = "TERMINATE_IF_RUNNING"
)

// StartWorkflow starts workflow wf under workflowID with input for its
// start state, and returns the new run's id. timeout bounds the whole
// workflow (rounded up to seconds; 0 means none); opts may be nil.
// A running workflow with that id gives an error matching
// IsWorkflowAlreadyStartedError.
func (c *Client) StartWorkflow(ctx context.Context, wf *Workflow, workflowID string, timeout time.Duration, input any, opts *StartOptions) (string, error) {
	cw, err := compileWorkflow(wf)
	if err != nil {
		return "", err
	}
	req := wire.WorkflowStartRequest{
		WorkflowId:             workflowID,
		IwfWorkflowType:        wf.Type,
		WorkflowTimeoutSeconds: int32(min(seconds(timeout), math.MaxInt32)),
		IwfWorkerUrl:           c.workerURL,
	}
	if wf.StartState != nil {
		id := wf.StartState.ID()
		req.StartStateId = &id
		req.StateOptions = cw.states[id].wire
		if req.StateInput, err = encodeValue(c.enc, input); err != nil {
			return "", err
		}
	} else if input != nil {
		return "", fmt.Errorf("iwf: workflow %q has no StartState to receive the input", wf.Type)
	}
	if opts != nil {
		if req.WorkflowStartOptions, err = opts.toWire(cw, c.enc); err != nil {
			return "", err
		}
		for _, id := range opts.WaitForCompletionStateIDs {
			if cw.states[id] == nil {
				return "", fmt.Errorf("iwf: WaitForCompletionStateIDs: %q is not a state of workflow %q", id, wf.Type)
			}
		}
		req.WaitForCompletionStateIds = nonEmpty(opts.WaitForCompletionStateIDs)
		req.WaitForCompletionStateExecutionIds = nonEmpty(opts.WaitForCompletionStateExecutionIDs)
	}
	var resp wire.WorkflowStartResponse
	if err := c.post(ctx, "/api/v1/workflow/start", &req, &resp); err != nil {
		return "", err
	}
	return deref(resp.WorkflowRunId), nil
}

func (o *StartOptions) toWire(cw *compiledWorkflow, enc ObjectEncoder) (*wire.WorkflowStartOptions, error) {
	w := &wire.WorkflowStartOptions{
		CronSchedule:              optString(o.CronSchedule),
		WorkflowStartDelaySeconds: seconds32(o.StartDelay),
		RetryPolicy:               o.RetryPolicy.toWorkflowWire(),
		WorkflowConfigOverride:    o.Config.toWire(),
	}
	if o.IDReusePolicy != "" {
		w.WorkflowIDReusePolicy = ptr(wire.WorkflowIDReusePolicy(o.IDReusePolicy))
	}
	if o.IgnoreAlreadyStarted || o.RequestID != "" {
		w.WorkflowAlreadyStartedOptions = &wire.WorkflowAlreadyStartedOptions{
			IgnoreAlreadyStartedError: o.IgnoreAlreadyStarted, RequestId: optString(o.RequestID)}
	}
	var das []wire.KeyValue
	for _, key := range slices.Sorted(maps.Keys(o.DataAttributes)) {
		if !cw.dataAttributes.has(key) {
			return nil, fmt.Errorf("iwf: data attribute %q is not declared in DataAttributes of workflow %q", key, cw.typ)
		}
		v, err := encodeValue(enc, o.DataAttributes[key])
		if err != nil {
			return nil, fmt.Errorf("iwf: data attribute %q: %w", key, err)
		}
		das = append(das, wire.KeyValue{Key: ptr(key), Value: v})
	}
	w.DataAttributes = nonEmpty(das)
	var sas []wire.SearchAttribute
	for _, a := range o.SearchAttributes {
		if declared, ok := cw.searchAttributes[a.Key]; !ok || declared != a.Type {
			return nil, fmt.Errorf("iwf: search attribute %q of type %s is not declared in SearchAttributes of workflow %q", a.Key, a.Type, cw.typ)
		}
		sa, err := a.toWire()
		if err != nil {
			return nil, err
		}
		sas = append(sas, sa)
	}
	w.SearchAttributes = nonEmpty(sas)
	return w, nil
}

// SignalWorkflow sends a message (value may be nil) to a signal channel of
// a workflow.
func (c *Client) SignalWorkflow(ctx context.Context, workflowID, runID, channel string, value any) error {
	v, err := encodeValue(c.enc, value)
	if err != nil {
		return err
	}
	return c.post(ctx, "/api/v1/workflow/signal", &wire.WorkflowSignalRequest{
		WorkflowId: workflowID, WorkflowRunId: optString(runID), SignalChannelName: channel, SignalValue: v}, nil)
}

// PublishToInternalChannel appends a message (value may be nil) to an
// internal channel of a workflow, as a state or RPC could.
func (c *Client) PublishToInternalChannel(ctx context.Context, workflowID, runID, channel string, value any) error {
	v, err := encodeValue(c.enc, value)
	if err != nil {
		return err
	}
	return c.post(ctx, "/api/v1/workflow/publishToInternalChannel", &wire.PublishToInternalChannelRequest{
		WorkflowId: workflowID, WorkflowRunId: optString(runID),
		Messages: &[]wire.InterStateChannelPublishing{{ChannelName: channel, Value: v}}}, nil)
}

// StopOptions are the optional settings of Client.StopWorkflow.
type StopOptions struct {
	// Type is how to stop; "" means StopCancel.
	Type StopType
	// Reason is recorded; with StopFail it becomes the error message.
	Reason string
}

// StopType is StopOptions.Type.
type StopType string

// The stop types.
const (
	StopCancel    StopType = "CANCEL"    // ends CANCELED
	StopTerminate StopType = "TERMINATE" // ends TERMINATED
	StopFail      StopType = "FAIL"      // ends FAILED with ErrorTypeClientAPIFailing
)

// StopWorkflow stops a running workflow; opts may be nil.
func (c *Client) StopWorkflow(ctx context.Context, workflowID, runID string, opts *StopOptions) error {
	req := wire.WorkflowStopRequest{WorkflowId: workflowID, WorkflowRunId: optString(runID)}
	if opts != nil {
		req.Reason = optString(opts.Reason)
		if opts.Type != "" {
			req.StopType = ptr(wire.WorkflowStopType(opts.Type))
		}
	}
	return c.post(ctx, "/api/v1/workflow/stop", &req, nil)
}

// WorkflowInfo describes a workflow run.
type WorkflowInfo struct {
	RunID  string         // the run described
	Status WorkflowStatus // its status
}

// DescribeWorkflow returns the run id and status of a workflow run, without
// waiting.
func (c *Client) DescribeWorkflow(ctx context.Context, workflowID, runID string) (*WorkflowInfo, error) {
	var resp wire.WorkflowGetResponse
	if err := c.post(ctx, "/api/v1/workflow/get", &wire.WorkflowGetRequest{
		WorkflowId: workflowID, WorkflowRunId: optString(runID)}, &resp); err != nil {
		return nil, err
	}
	return &WorkflowInfo{RunID: resp.WorkflowRunId, Status: WorkflowStatus(resp.WorkflowStatus)}, nil
}

// StateOutput is an output recorded when a state closed the workflow (a
// workflow result), or a state completion.
type StateOutput struct {
	StateID          string // the state, e.g. "Ship"
	StateExecutionID string // its execution, e.g. "Ship-1"
	Output           Object // null if the state gave none
}

// GetWorkflowResults waits until the workflow run ends and returns its
// results: the outputs of the states that completed it, in order (none if
// they gave no output). It long-polls the server and polls again on each
// long-poll timeout until ctx ends; then the error matches both ctx's error
// and, if a poll timed out, IsLongPollTimeoutError. A run that ended other
// than COMPLETED gives a *WorkflowAbnormalExitError.
func (c *Client) GetWorkflowResults(ctx context.Context, workflowID, runID string) ([]StateOutput, error) {
	var resp wire.WorkflowGetResponse
	err := c.longPoll(ctx, func(wait *int32) (bool, error) {
		resp = wire.WorkflowGetResponse{}
		err := c.post(ctx, "/api/v1/workflow/getWithWait", &wire.WorkflowGetRequest{
			WorkflowId: workflowID, WorkflowRunId: optString(runID), NeedsResults: ptr(true), WaitTimeSeconds: wait}, &resp)
		return err == nil && resp.WorkflowStatus != wire.WorkflowStatusRunning, err
	})
	if err != nil {
		return nil, err
	}
	results := c.stateOutputs(slice(resp.Results))
	if resp.WorkflowStatus != wire.WorkflowStatusCompleted {
		return nil, &WorkflowAbnormalExitError{WorkflowID: workflowID, RunID: resp.WorkflowRunId,
			Status: WorkflowStatus(resp.WorkflowStatus), ErrorType: WorkflowErrorType(deref(resp.ErrorType)),
			ErrorMessage: deref(resp.ErrorMessage), Results: results}
	}
	return results, nil
}

// GetSimpleWorkflowResult waits for a workflow that completes with at most
// one result and decodes it as a T (T's zero value if there is none). See
// Client.GetWorkflowResults for waiting and errors; more than one result is
// an error.
//
//	receipt, err := iwf.GetSimpleWorkflowResult[Receipt](ctx, client, "order-42", "")
func GetSimpleWorkflowResult[T any](ctx context.Context, c *Client, workflowID, runID string) (T, error) {
	var zero T
	results, err := c.GetWorkflowResults(ctx, workflowID, runID)
	if err != nil {
		return zero, err
	}
	switch len(results) {
	case 0:
		return zero, nil
	case 1:
		return As[T](results[0].Output)
	}
	return zero, fmt.Errorf("iwf: workflow %s has %d results; use Client.GetWorkflowResults", workflowID, len(results))
}

// minPollInterval spaces long polls that a server answers at once, so that
// such a server is not polled in a tight loop.
const minPollInterval = 100 * time.Millisecond

// longPoll calls poll until it reports done, repeating after long-poll
// timeouts until ctx ends. poll receives the wait budget to ask the server
// for: ctx's remaining time in whole seconds (at least 1), or nil without a
// deadline.
func (c *Client) longPoll(ctx context.Context, poll func(wait *int32) (done bool, err error)) error {
	var timedOut error
	for {
		var wait *int32
		if deadline, ok := ctx.Deadline(); ok {
			wait = ptr(int32(max(1, min(time.Until(deadline)/time.Second, math.MaxInt32))))
		}
		started := time.Now()
		done, err := poll(wait)
		switch {
		case err == nil && done:
			return nil
		case ctx.Err() != nil:
			if timedOut != nil {
				return errors.Join(ctx.Err(), timedOut)
			}
			if err == nil {
				err = ctx.Err()
			}
			return err
		case IsLongPollTimeoutError(err):
			timedOut = err
		case err != nil:
			return err
		}
		// Poll again: after a long-poll timeout, or a "still running"
		// answer that a server gave without waiting.
		select {
		case <-ctx.Done():
		case <-time.After(minPollInterval - time.Since(started)):
		}
	}
}

func (c *Client) stateOutputs(ws []wire.StateCompletionOutput) []StateOutput {
	var out []StateOutput
	for _, w := range ws {
		out = append(out, StateOutput{StateID: w.CompletedStateId, StateExecutionID: w.CompletedStateExecutionId,
			Output: newObject(w.CompletedStateOutput, c.enc)})
	}
	return out
}

// GetWorkflowDataAttributes returns data attributes of a workflow (open or
// closed): those of keys, or all with no keys. Missing keys are absent
// from the map.
func (c *Client) GetWorkflowDataAttributes(ctx context.Context, workflowID, runID string, keys ...string) (map[string]Object, error) {
	var resp wire.WorkflowGetDataObjectsResponse
	if err := c.post(ctx, "/api/v1/workflow/dataobjects/get", &wire.WorkflowGetDataObjectsRequest{
		WorkflowId: workflowID, WorkflowRunId: optString(runID), Keys: nonEmpty(keys)}, &resp); err != nil {
		return nil, err
	}
	out := map[string]Object{}
	for _, kv := range slice(resp.Objects) {
		out[deref(kv.Key)] = newObject(kv.Value, c.enc)
	}
	return out, nil
}

// SetWorkflowDataAttributes writes data attributes of a running workflow.
func (c *Client) SetWorkflowDataAttributes(ctx context.Context, workflowID, runID string, attributes map[string]any) error {
	var objects []wire.KeyValue
	for _, key := range slices.Sorted(maps.Keys(attributes)) {
		v, err := encodeValue(c.enc, attributes[key])
		if err != nil {
			return fmt.Errorf("iwf: data attribute %q: %w", key, err)
		}
		objects = append(objects, wire.KeyValue{Key: ptr(key), Value: v})
	}
	return c.post(ctx, "/api/v1/workflow/dataobjects/set", &wire.WorkflowSetDataObjectsRequest{
		WorkflowId: workflowID, WorkflowRunId: optString(runID), Objects: nonEmpty(objects)}, nil)
}

// GetWorkflowSearchAttributes returns the search attributes keys of a
// workflow (open or closed), read as the given types; pass the workflow's
// SearchAttributes to read them all. Missing keys are absent from the map.
func (c *Client) GetWorkflowSearchAttributes(ctx context.Context, workflowID, runID string, keys ...SearchAttributeDef) (map[string]SearchAttribute, error) {
	var wkeys []wire.SearchAttributeKeyAndType
	for _, k := range keys {
		wkeys = append(wkeys, wire.SearchAttributeKeyAndType{Key: ptr(k.Key), ValueType: ptr(wire.SearchAttributeValueType(k.Type))})
	}
	var resp wire.WorkflowGetSearchAttributesResponse
	if err := c.post(ctx, "/api/v1/workflow/searchattributes/get", &wire.WorkflowGetSearchAttributesRequest{
		WorkflowId: workflowID, WorkflowRunId: optString(runID), Keys: nonEmpty(wkeys)}, &resp); err != nil {
		return nil, err
	}
	out := map[string]SearchAttribute{}
	for _, sa := range slice(resp.SearchAttributes) {
		out[deref(sa.Key)] = searchAttributeFromWire(sa)
	}
	return out, nil
}

// SetWorkflowSearchAttributes writes search attributes of a running
// workflow.
func (c *Client) SetWorkflowSearchAttributes(ctx context.Context, workflowID, runID string, attributes ...SearchAttribute) error {
	var sas []wire.SearchAttribute
	for _, a := range attributes {
		sa, err := a.toWire()
		if err != nil {
			return err
		}
		sas = append(sas, sa)
	}
	return c.post(ctx, "/api/v1/workflow/searchattributes/set", &wire.WorkflowSetSearchAttributesRequest{
		WorkflowId: workflowID, WorkflowRunId: optString(runID), SearchAttributes: nonEmpty(sas)}, nil)
}

// SearchResult is a page of Client.SearchWorkflow.
type SearchResult struct {
	// Executions are the matching runs.
	Executions []WorkflowExecution
	// NextPageToken fetches the next page; "" when there is none.
	NextPageToken string
}

// WorkflowExecution identifies a workflow run.
type WorkflowExecution struct {
	WorkflowID string // the workflow's id
	RunID      string // the run's id
}

// SearchWorkflow lists the workflow runs matching a query over search
// attributes, e.g. "CustomKeywordField='paid' AND ExecutionStatus='Running'".
// pageSize 0 means the server's default; pass the previous page's
// NextPageToken to continue, "" to start.
func (c *Client) SearchWorkflow(ctx context.Context, query string, pageSize int, nextPageToken string) (*SearchResult, error) {
	var resp wire.WorkflowSearchResponse
	if err := c.post(ctx, "/api/v1/workflow/search", &wire.WorkflowSearchRequest{
		Query: query, PageSize: optInt32(pageSize), NextPageToken: optString(nextPageToken)}, &resp); err != nil {
		return nil, err
	}
	out := &SearchResult{NextPageToken: deref(resp.NextPageToken)}
	for _, e := range slice(resp.WorkflowExecutions) {
		out.Executions = append(out.Executions, WorkflowExecution{WorkflowID: e.WorkflowId, RunID: e.WorkflowRunId})
	}
	return out, nil
}

// RPCOptions are the optional settings of Client.InvokeRPC.
type RPCOptions struct {
	// Timeout bounds the worker call (rounded up to seconds; 0 means the
	// server's cap, 60 s by default).
	Timeout time.Duration
	// DataAttributesLoading and SearchAttributesLoading choose what the RPC
	// receives; a locking type makes the RPC exclusive on its locking keys
	// (IsRPCLockError when they are taken).
	DataAttributesLoading   *LoadingPolicy
	SearchAttributesLoading *LoadingPolicy
}

// InvokeRPC calls the RPC rpcName of a workflow with input (nil for none)
// and returns its output. An error answered by the RPC's code matches
// IsRPCError; opts may be nil.
func (c *Client) InvokeRPC(ctx context.Context, workflowID, runID, rpcName string, input any, opts *RPCOptions) (Object, error) {
	in, err := encodeValue(c.enc, input)
	if err != nil {
		return Object{}, err
	}
	req := wire.WorkflowRpcRequest{WorkflowId: workflowID, WorkflowRunId: optString(runID), RpcName: rpcName, Input: in}
	if opts != nil {
		req.TimeoutSeconds = seconds32(opts.Timeout)
		req.DataAttributesLoadingPolicy = opts.DataAttributesLoading.toWire()
		req.SearchAttributesLoadingPolicy = opts.SearchAttributesLoading.toWire()
	}
	var resp wire.WorkflowRpcResponse
	if err := c.post(ctx, "/api/v1/workflow/rpc", &req, &resp); err != nil {
		return Object{}, err
	}
	return newObject(resp.Output, c.enc), nil
}

// InvokeRPC is Client.InvokeRPC with the output decoded as a T.
//
//	status, err := iwf.InvokeRPC[OrderStatus](ctx, client, "order-42", "", "status", nil, nil)
func InvokeRPC[T any](ctx context.Context, c *Client, workflowID, runID, rpcName string, input any, opts *RPCOptions) (T, error) {
	out, err := c.InvokeRPC(ctx, workflowID, runID, rpcName, input, opts)
	if err != nil {
		var zero T
		return zero, err
	}
	return As[T](out)
}

// SkipTimerByID fires the timer command timerID of a state execution (e.g.
// "Wait-1", see StateExecutionID) now.
func (c *Client) SkipTimerByID(ctx context.Context, workflowID, runID, stateExecutionID, timerID string) error {
	return c.post(ctx, "/api/v1/workflow/timer/skip", &wire.WorkflowSkipTimerRequest{
		WorkflowId: workflowID, WorkflowRunId: optString(runID), WorkflowStateExecutionId: stateExecutionID,
		TimerCommandId: &timerID}, nil)
}

// SkipTimerByIndex fires the index-th (from 0) timer command of a state
// execution now; it must still be pending.
func (c *Client) SkipTimerByIndex(ctx context.Context, workflowID, runID, stateExecutionID string, index int) error {
	return c.post(ctx, "/api/v1/workflow/timer/skip", &wire.WorkflowSkipTimerRequest{
		WorkflowId: workflowID, WorkflowRunId: optString(runID), WorkflowStateExecutionId: stateExecutionID,
		TimerCommandIndex: ptr(int32(index))}, nil)
}

// ResetOptions are the optional settings of Client.ResetWorkflow.
type ResetOptions struct {
	// Type is where to restart from; "" means ResetToBeginning.
	Type ResetType
	// StateID is the state for ResetToStateID.
	StateID string
	// StateExecutionID is the execution for ResetToStateExecutionID.
	StateExecutionID string
	// HistoryEventID and HistoryEventTime are for the history-based types,
	// which only Temporal-based servers support.
	HistoryEventID   int
	HistoryEventTime string
	// Reason is recorded with the reset.
	Reason string
	// By default the inputs the workflow received after the reset point
	// are delivered to the new run again. SkipSignalReapply drops the
	// signals and other external inputs (publishes, attribute writes,
	// timer skips, non-locking RPC writes); SkipUpdateReapply drops the
	// locking RPCs.
	SkipSignalReapply bool
	SkipUpdateReapply bool
}

// ResetType is ResetOptions.Type.
type ResetType string

// The reset types.
const (
	ResetToBeginning        ResetType = "BEGINNING"
	ResetToStateID          ResetType = "STATE_ID"
	ResetToStateExecutionID ResetType = "STATE_EXECUTION_ID"
	ResetToHistoryEventID   ResetType = "HISTORY_EVENT_ID"
	ResetToHistoryEventTime ResetType = "HISTORY_EVENT_TIME"
)

// ResetWorkflow restarts a workflow (open or closed) as a new run from an
// earlier point and returns the new run's id; opts may be nil.
func (c *Client) ResetWorkflow(ctx context.Context, workflowID, runID string, opts *ResetOptions) (string, error) {
	if opts == nil {
		opts = &ResetOptions{}
	}
	req := wire.WorkflowResetRequest{
		WorkflowId: workflowID, WorkflowRunId: optString(runID), ResetType: wire.WorkflowResetType(opts.Type),
		StateId: optString(opts.StateID), StateExecutionId: optString(opts.StateExecutionID),
		HistoryEventId: optInt32(opts.HistoryEventID), HistoryEventTime: optString(opts.HistoryEventTime),
		Reason: optString(opts.Reason), SkipSignalReapply: optBool(opts.SkipSignalReapply),
		SkipUpdateReapply: optBool(opts.SkipUpdateReapply),
	}
	if req.ResetType == "" {
		req.ResetType = wire.WorkflowResetTypeBeginning
	}
	var resp wire.WorkflowResetResponse
	if err := c.post(ctx, "/api/v1/workflow/reset", &req, &resp); err != nil {
		return "", err
	}
	return resp.WorkflowRunId, nil
}

// WaitForStateExecutionCompletion waits until the Execute of a state
// execution (e.g. "Ship-1") succeeds. The execution must have been listed
// in StartOptions.WaitForCompletionStateExecutionIDs, or its state in
// WaitForCompletionStateIDs. Long-poll timeouts are retried until ctx ends,
// as in Client.GetWorkflowResults.
func (c *Client) WaitForStateExecutionCompletion(ctx context.Context, workflowID, stateExecutionID string) (StateOutput, error) {
	return c.waitForState(ctx, wire.WorkflowWaitForStateCompletionRequest{WorkflowId: workflowID, StateExecutionId: &stateExecutionID})
}

// WaitForStateCompletionWithKey waits until the Execute of an execution of
// stateID that was moved to with StateMovement.WaitForKey waitForKey
// succeeds. The state must be listed in StartOptions.WaitForCompletionStateIDs.
func (c *Client) WaitForStateCompletionWithKey(ctx context.Context, workflowID, stateID, waitForKey string) (StateOutput, error) {
	return c.waitForState(ctx, wire.WorkflowWaitForStateCompletionRequest{WorkflowId: workflowID, StateId: &stateID, WaitForKey: &waitForKey})
}

func (c *Client) waitForState(ctx context.Context, req wire.WorkflowWaitForStateCompletionRequest) (StateOutput, error) {
	var resp wire.WorkflowWaitForStateCompletionResponse
	err := c.longPoll(ctx, func(wait *int32) (bool, error) {
		req.WaitTimeSeconds = wait
		return true, c.post(ctx, "/api/v1/workflow/waitForStateCompletion", &req, &resp)
	})
	if err != nil {
		return StateOutput{}, err
	}
	if resp.StateCompletionOutput == nil {
		return StateOutput{Output: Object{encoder: c.enc}}, nil
	}
	return c.stateOutputs([]wire.StateCompletionOutput{*resp.StateCompletionOutput})[0], nil
}

// UpdateWorkflowConfig changes the config of a running workflow: the
// non-zero fields of config overwrite the current ones.
func (c *Client) UpdateWorkflowConfig(ctx context.Context, workflowID, runID string, config WorkflowConfig) error {
	return c.post(ctx, "/api/v1/workflow/config/update", &wire.WorkflowConfigUpdateRequest{
		WorkflowId: workflowID, WorkflowRunId: optString(runID), WorkflowConfig: *config.toWire()}, nil)
}

// post sends a JSON request and decodes a 200 answer into resp (if not
// nil); any other status becomes an *APIError.
func (c *Client) post(ctx context.Context, path string, req, resp any) error {
	body, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("iwf: encoding request: %w", err)
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, c.serverURL+path, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("iwf: %w", err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "application/json")
	if c.token != "" {
		hreq.Header.Set("Authorization", "Bearer "+c.token)
	}
	// The trace context of ctx travels with the request: a run started
	// (or signalled) here joins the caller's trace when the server traces.
	if tc, ok := TraceContextFrom(ctx); ok {
		hreq.Header.Set("traceparent", tc.TraceParent)
		if tc.TraceState != "" {
			hreq.Header.Set("tracestate", tc.TraceState)
		}
	}
	hresp, err := c.http.Do(hreq)
	if err != nil {
		return fmt.Errorf("iwf: POST %s: %w", path, err)
	}
	defer hresp.Body.Close()
	data, err := io.ReadAll(hresp.Body)
	if err != nil {
		return fmt.Errorf("iwf: POST %s: reading answer: %w", path, err)
	}
	if hresp.StatusCode != http.StatusOK {
		return apiError(hresp.StatusCode, data)
	}
	if resp == nil || len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	if err := json.Unmarshal(data, resp); err != nil {
		return fmt.Errorf("iwf: POST %s: decoding answer: %w", path, err)
	}
	return nil
}

func apiError(status int, body []byte) *APIError {
	e := &APIError{StatusCode: status}
	var w wire.ErrorResponse
	if json.Unmarshal(body, &w) == nil && (w.Detail != nil || w.SubStatus != nil) {
		e.SubStatus = ErrorSubStatus(deref(w.SubStatus))
		e.Detail = deref(w.Detail)
		e.OriginalWorkerErrorStatus = int(deref(w.OriginalWorkerErrorStatus))
		e.OriginalWorkerErrorType = deref(w.OriginalWorkerErrorType)
		e.OriginalWorkerErrorDetail = deref(w.OriginalWorkerErrorDetail)
		return e
	}
	const maxDetail = 1000
	detail := strings.TrimSpace(string(body))
	if len(detail) > maxDetail {
		detail = detail[:maxDetail] + "..."
	}
	e.Detail = detail
	return e
}
