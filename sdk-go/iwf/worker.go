package iwf

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"

	"github.com/iwf-server/iwf-server/sdk-go/internal/wire"
)

// The paths of the worker API, which the server calls at the worker URL
// given when a workflow starts (ClientOptions.WorkerURL).
const (
	WaitUntilPath = "/api/v1/workflowState/start"  // runs a state's WaitUntil
	ExecutePath   = "/api/v1/workflowState/decide" // runs a state's Execute
	RPCPath       = "/api/v1/workflowWorker/rpc"   // runs an RPC
)

// The errorType values the worker answers with when the SDK itself, rather
// than a *WorkerError, decides the outcome.
const (
	WorkerErrorTypeUserCode            = "UserCodeError"       // workflow code returned an error or misused the SDK
	WorkerErrorTypePanic               = "Panic"               // workflow code panicked
	WorkerErrorTypeInvalidRequest      = "InvalidRequest"      // the request body could not be decoded
	WorkerErrorTypeUnknownWorkflowType = "UnknownWorkflowType" // no such workflow in the Registry
	WorkerErrorTypeUnknownState        = "UnknownState"        // no such state (or no WaitUntil) in the workflow
	WorkerErrorTypeUnknownRPC          = "UnknownRPC"          // no such RPC in the workflow
)

// WorkerOptions configure NewWorkerService. The zero value is usable.
type WorkerOptions struct {
	// ObjectEncoder encodes and decodes payloads; nil means
	// JSONObjectEncoder. Clients must use a compatible one.
	ObjectEncoder ObjectEncoder
	// Logger receives failed calls and recovered panics; nil means
	// slog.Default().
	Logger *slog.Logger
}

// WorkerError is an error workflow code returns to choose the worker's
// answer: its HTTP status and the errorType of the WorkerErrorResponse
// body. The detail of the body is the message of the returned error (which
// may wrap a *WorkerError). For an RPC the caller receives all three in an
// *APIError; for a state API the server retries the attempt.
type WorkerError struct {
	// StatusCode is the HTTP status; 0 means 500.
	StatusCode int
	// ErrorType classifies the error for the caller; "" means
	// WorkerErrorTypeUserCode.
	ErrorType string
	// Detail is a human-readable message.
	Detail string
}

// Error returns Detail, or a summary if it is empty.
func (e *WorkerError) Error() string {
	if e.Detail == "" {
		return fmt.Sprintf("iwf worker error %d %s", e.status(), e.errorType())
	}
	return e.Detail
}

func (e *WorkerError) status() int {
	if e.StatusCode == 0 {
		return http.StatusInternalServerError
	}
	return e.StatusCode
}

func (e *WorkerError) errorType() string {
	if e.ErrorType == "" {
		return WorkerErrorTypeUserCode
	}
	return e.ErrorType
}

// NewWorkerService returns the worker API for the workflows of registry as
// a plain http.Handler. It serves POST WaitUntilPath, ExecutePath and
// RPCPath and answers 404 for any other path, so it mounts on any router:
//
//	http.ListenAndServe(":8803", iwf.NewWorkerService(registry, nil))
//	// or, with chi:  r.Mount("/", iwf.NewWorkerService(registry, nil))
//
// Answers follow the iWF worker API. A call for an unknown workflow type,
// state or RPC is answered 404; an undecodable body 400; an error returned
// by workflow code (or a misuse of Persistence or Communication) 500, or
// the status of a *WorkerError; a panic is recovered and answered 500. All
// of them carry a WorkerErrorResponse body, {"detail": ..., "errorType":
// ...}, with the WorkerErrorType* constants when the SDK picks the type.
func NewWorkerService(registry *Registry, opts *WorkerOptions) http.Handler {
	if opts == nil {
		opts = &WorkerOptions{}
	}
	s := &workerService{registry: registry, enc: opts.ObjectEncoder, log: opts.Logger}
	if s.enc == nil {
		s.enc = JSONObjectEncoder()
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	mux := http.NewServeMux()
	mux.Handle("POST "+WaitUntilPath, handle(s, s.waitUntil))
	mux.Handle("POST "+ExecutePath, handle(s, s.execute))
	mux.Handle("POST "+RPCPath, handle(s, s.rpc))
	return mux
}

type workerService struct {
	registry *Registry
	enc      ObjectEncoder
	log      *slog.Logger
}

// handle decodes the request, runs fn with panics recovered and writes its
// answer or error.
func handle[Req, Resp any](s *workerService, fn func(context.Context, *Req) (*Resp, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req Req
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			s.writeError(w, r, &WorkerError{StatusCode: http.StatusBadRequest, ErrorType: WorkerErrorTypeInvalidRequest,
				Detail: "invalid request body: " + err.Error()})
			return
		}
		// The server sends the W3C trace context of its call; the
		// handler's ctx carries it (TraceContextFrom).
		ctx := r.Context()
		if tp := r.Header.Get("traceparent"); tp != "" {
			ctx = WithTraceContext(ctx, TraceContext{TraceParent: tp, TraceState: r.Header.Get("tracestate")})
		}
		resp, err := recovered(s, r, func() (*Resp, error) { return fn(ctx, &req) })
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, resp)
	})
}

func recovered[Resp any](s *workerService, r *http.Request, fn func() (*Resp, error)) (resp *Resp, err error) {
	defer func() {
		if p := recover(); p != nil {
			s.log.ErrorContext(r.Context(), "iwf: workflow code panicked", "path", r.URL.Path, "panic", p, "stack", string(debug.Stack()))
			resp, err = nil, &WorkerError{ErrorType: WorkerErrorTypePanic, Detail: fmt.Sprintf("panic: %v", p)}
		}
	}()
	return fn()
}

func (s *workerService) writeError(w http.ResponseWriter, r *http.Request, err error) {
	status, errorType := http.StatusInternalServerError, WorkerErrorTypeUserCode
	var we *WorkerError
	if errors.As(err, &we) {
		status, errorType = we.status(), we.errorType()
	}
	s.log.WarnContext(r.Context(), "iwf: worker call failed", "path", r.URL.Path, "status", status, "errorType", errorType, "error", err)
	setRetryHeaders(w.Header(), err)
	writeJSON(w, status, wire.WorkerErrorResponse{Detail: ptr(err.Error()), ErrorType: ptr(errorType)})
}

func writeJSON(w http.ResponseWriter, status int, body any) {
	data, err := json.Marshal(body)
	if err != nil {
		status = http.StatusInternalServerError
		data, _ = json.Marshal(wire.WorkerErrorResponse{Detail: ptr("encoding answer: " + err.Error()), ErrorType: ptr(WorkerErrorTypeUserCode)})
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(data)
}

func (s *workerService) workflow(workflowType string) (*compiledWorkflow, error) {
	cw := s.registry.lookup(workflowType)
	if cw == nil {
		return nil, &WorkerError{StatusCode: http.StatusNotFound, ErrorType: WorkerErrorTypeUnknownWorkflowType,
			Detail: fmt.Sprintf("workflow type %q is not registered with this worker", workflowType)}
	}
	return cw, nil
}

func (s *workerService) state(workflowType, stateID string) (*compiledWorkflow, *compiledState, error) {
	cw, err := s.workflow(workflowType)
	if err != nil {
		return nil, nil, err
	}
	cs := cw.states[stateID]
	if cs == nil {
		return nil, nil, &WorkerError{StatusCode: http.StatusNotFound, ErrorType: WorkerErrorTypeUnknownState,
			Detail: fmt.Sprintf("workflow %q has no state %q", workflowType, stateID)}
	}
	return cw, cs, nil
}

func (s *workerService) waitUntil(ctx context.Context, req *wire.WorkflowStateStartRequest) (*wire.WorkflowStateStartResponse, error) {
	cw, cs, err := s.state(req.WorkflowType, req.WorkflowStateId)
	if err != nil {
		return nil, err
	}
	if cs.waitUntil == nil {
		return nil, &WorkerError{StatusCode: http.StatusNotFound, ErrorType: WorkerErrorTypeUnknownState,
			Detail: fmt.Sprintf("state %q of workflow %q has no WaitUntil", req.WorkflowStateId, req.WorkflowType)}
	}
	c := newCall(cw, s.enc, slice(req.DataObjects), slice(req.SearchAttributes), nil)
	cmds, err := cs.waitUntil.WaitUntil(&callContext{Context: ctx, w: req.Context}, newObject(req.StateInput, s.enc), c, c)
	if err != nil {
		return nil, err
	}
	if c.err != nil {
		return nil, c.err
	}
	wcmds, err := cmds.toWire(cw)
	if err != nil {
		return nil, err
	}
	return &wire.WorkflowStateStartResponse{
		CommandRequest:             wcmds,
		UpsertDataObjects:          c.upsertDataAttributes(),
		UpsertSearchAttributes:     c.upsertSearchAttributes(),
		UpsertStateLocals:          c.upsertStateLocals(),
		RecordEvents:               nonEmpty(c.events),
		PublishToInterStateChannel: nonEmpty(c.messages),
	}, nil
}

func (s *workerService) execute(ctx context.Context, req *wire.WorkflowStateDecideRequest) (*wire.WorkflowStateDecideResponse, error) {
	cw, cs, err := s.state(req.WorkflowType, req.WorkflowStateId)
	if err != nil {
		return nil, err
	}
	c := newCall(cw, s.enc, slice(req.DataObjects), slice(req.SearchAttributes), slice(req.StateLocals))
	decision, err := cs.state.Execute(&callContext{Context: ctx, w: req.Context}, newObject(req.StateInput, s.enc),
		commandResultsFromWire(req.CommandResults, s.enc), c, c)
	if err != nil {
		return nil, err
	}
	if c.err != nil {
		return nil, c.err
	}
	wd, err := decision.toWire(cw, s.enc)
	if err != nil {
		return nil, err
	}
	return &wire.WorkflowStateDecideResponse{
		StateDecision:              wd,
		UpsertDataObjects:          c.upsertDataAttributes(),
		UpsertSearchAttributes:     c.upsertSearchAttributes(),
		RecordEvents:               nonEmpty(c.events),
		PublishToInterStateChannel: nonEmpty(c.messages),
	}, nil
}

func (s *workerService) rpc(ctx context.Context, req *wire.WorkflowWorkerRpcRequest) (*wire.WorkflowWorkerRpcResponse, error) {
	cw, err := s.workflow(req.WorkflowType)
	if err != nil {
		return nil, err
	}
	fn := cw.rpcs[req.RpcName]
	if fn == nil {
		return nil, &WorkerError{StatusCode: http.StatusNotFound, ErrorType: WorkerErrorTypeUnknownRPC,
			Detail: fmt.Sprintf("workflow %q has no RPC %q", req.WorkflowType, req.RpcName)}
	}
	c := newCall(cw, s.enc, slice(req.DataAttributes), slice(req.SearchAttributes), nil)
	c.isRPC = true
	c.signalSizes, c.internalSizes = channelSizes(req.SignalChannelInfos), channelSizes(req.InternalChannelInfos)
	output, err := fn(&callContext{Context: ctx, w: req.Context}, newObject(req.Input, s.enc), c, c)
	if err != nil {
		return nil, err
	}
	if c.err != nil {
		return nil, c.err
	}
	resp := &wire.WorkflowWorkerRpcResponse{
		UpsertDataAttributes:       c.upsertDataAttributes(),
		UpsertSearchAttributes:     c.upsertSearchAttributes(),
		RecordEvents:               nonEmpty(c.events),
		PublishToInterStateChannel: nonEmpty(c.messages),
	}
	if resp.Output, err = encodeValue(s.enc, output); err != nil {
		return nil, err
	}
	if len(c.moves) > 0 {
		moves, err := cw.movementsToWire(c.moves, s.enc)
		if err != nil {
			return nil, err
		}
		resp.StateDecision = &wire.StateDecision{NextStates: &moves}
	}
	return resp, nil
}

func channelSizes(infos *map[string]wire.ChannelInfo) map[string]int {
	out := map[string]int{}
	if infos == nil {
		return out
	}
	for name, info := range *infos {
		out[name] = int(deref(info.Size))
	}
	return out
}
