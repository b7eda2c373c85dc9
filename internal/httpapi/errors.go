package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/auth"
)

// statusLongPollOrWorkerError is iWF's status for long-poll timeouts and RPC
// worker errors; statusLocked is its status for a locking RPC that found a
// key locked.
const (
	statusLongPollOrWorkerError = 420
	statusLocked                = 450
)

// errorMapping is one row of the error table.
type errorMapping struct {
	status    int
	subStatus iwfapi.ErrorSubStatus
}

// errorTable maps every engine error code to the HTTP status and the iWF
// subStatus the client sees. It is the only place that does so.
var errorTable = map[engine.ErrorCode]errorMapping{
	engine.CodeInvalidArgument:   {http.StatusBadRequest, iwfapi.ErrorSubStatusUncategorized},
	engine.CodeWorkflowNotExists: {http.StatusBadRequest, iwfapi.ErrorSubStatusWorkflowNotExists},
	engine.CodeAlreadyStarted:    {http.StatusBadRequest, iwfapi.ErrorSubStatusWorkflowAlreadyStarted},
	engine.CodeLongPollTimeout:   {statusLongPollOrWorkerError, iwfapi.ErrorSubStatusLongPollTimeOut},
	engine.CodeWorkerAPIError:    {statusLongPollOrWorkerError, iwfapi.ErrorSubStatusWorkerApiError},
	engine.CodeLocked:            {statusLocked, iwfapi.ErrorSubStatusWorkerApiError},
	engine.CodePaused:            {http.StatusConflict, iwfapi.ErrorSubStatusUncategorized},
	engine.CodeUnimplemented:     {http.StatusNotImplemented, iwfapi.ErrorSubStatusUncategorized},
	engine.CodeUnavailable:       {http.StatusServiceUnavailable, iwfapi.ErrorSubStatusUncategorized},
	engine.CodeDeadlineExceeded:  {http.StatusGatewayTimeout, iwfapi.ErrorSubStatusUncategorized},
	engine.CodeInternal:          {http.StatusInternalServerError, iwfapi.ErrorSubStatusUncategorized},
}

// retryAfterSeconds is the Retry-After of a 503: the store is usually back,
// or its pool reconnected, within a second or two.
const retryAfterSeconds = "2"

// internalErrorDetail is all a client learns about an internal error; the
// error itself goes to the log with the request id.
const internalErrorDetail = "internal server error"

// errorResponse turns an error from the Service into the HTTP status and the
// iWF ErrorResponse the client receives.
func errorResponse(err error) (int, iwfapi.ErrorResponse) {
	code := engine.CodeOf(err)
	m, ok := errorTable[code]
	if !ok {
		code, m = engine.CodeInternal, errorTable[engine.CodeInternal]
	}
	sub := m.subStatus
	resp := iwfapi.ErrorResponse{SubStatus: &sub}
	var e *engine.Error
	errors.As(err, &e)
	switch {
	case code == engine.CodeUnavailable:
		resp.Detail = ptr(fmt.Sprintf("the store (%s) is unavailable; retry in a moment", engine.UnavailableStore(err)))
	case code == engine.CodeInternal || e == nil:
		resp.Detail = ptr(internalErrorDetail)
	default:
		resp.Detail = ptr(e.Message)
	}
	if code == engine.CodeWorkerAPIError {
		// iWF always sends the three fields on this path, empty when unknown.
		var w engine.WorkerErrorInfo
		if e != nil && e.Worker != nil {
			w = *e.Worker
		}
		resp.OriginalWorkerErrorDetail = ptr(w.Detail)
		resp.OriginalWorkerErrorType = ptr(w.ErrorType)
		resp.OriginalWorkerErrorStatus = ptr(int32(w.Status))
	}
	return m.status, resp
}

// handleServiceError is the strict server's ResponseErrorHandlerFunc: it
// answers every error a handler returns, through the error table.
func (h *handler) handleServiceError(w http.ResponseWriter, r *http.Request, err error) {
	ri := infoFrom(r.Context())
	var fe *auth.ForbiddenError
	if errors.As(err, &fe) {
		// A body asking for more than the role allows: answered, and
		// audited, as the access table's refusals are.
		ri.errCode = "forbidden"
		writeError(w, http.StatusForbidden, fe.Message)
		return
	}
	status, resp := errorResponse(err)
	ev := h.log.Warn()
	ri.errCode = string(engine.CodeOf(err))
	if s, detail, ok := deadlineResponse(r.Context(), err); ok {
		// Past the request's deadline or its client gone: neither the
		// store's fault nor the server's bug.
		status, resp = s, iwfapi.ErrorResponse{Detail: &detail, SubStatus: ptr(iwfapi.ErrorSubStatusUncategorized)}
		ri.errCode = string(engine.CodeDeadlineExceeded)
		if s == statusClientClosed {
			ri.errCode = "client_closed"
		}
	} else if status >= 500 {
		ev = h.log.Error()
	}
	ev.Err(err).Str("requestId", requestIDFrom(r.Context())).Str("path", r.URL.Path).
		Int("status", status).Msg("request failed")
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", retryAfterSeconds)
	}
	writeJSON(w, status, resp)
}

// writeError answers with an ErrorResponse carrying only a detail (requests
// that never reached the Service: validation, routing, size limit).
func writeError(w http.ResponseWriter, status int, detail string) {
	writeJSON(w, status, iwfapi.ErrorResponse{Detail: &detail})
}

// writeJSON writes v as the JSON body of a response.
func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		body = []byte(`{"detail":"` + internalErrorDetail + `"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}

func ptr[T any](v T) *T { return &v }
