package iwf

import (
	"errors"
	"fmt"
	"strings"
)

// ErrorSubStatus is the machine-readable category of a server error.
type ErrorSubStatus string

// The server error sub-statuses.
const (
	SubStatusUncategorized          ErrorSubStatus = "UNCATEGORIZED_SUB_STATUS"
	SubStatusWorkflowAlreadyStarted ErrorSubStatus = "WORKFLOW_ALREADY_STARTED_SUB_STATUS"
	SubStatusWorkflowNotExists      ErrorSubStatus = "WORKFLOW_NOT_EXISTS_SUB_STATUS"
	SubStatusWorkerAPIError         ErrorSubStatus = "WORKER_API_ERROR"
	SubStatusLongPollTimeout        ErrorSubStatus = "LONG_POLL_TIME_OUT_SUB_STATUS"
)

// APIError is a non-200 answer of the server to a Client call, with the
// fields of its ErrorResponse body. Branch on it with the Is*Error
// functions, or errors.As for the details.
type APIError struct {
	// StatusCode is the HTTP status.
	StatusCode int
	// SubStatus is the machine-readable category (may be empty).
	SubStatus ErrorSubStatus
	// Detail is the server's message (or the raw body if it was not an
	// ErrorResponse).
	Detail string
	// The OriginalWorker* fields are set when an RPC failed in the worker:
	// the worker's HTTP status and its WorkerErrorResponse (see
	// WorkerError).
	OriginalWorkerErrorStatus int
	OriginalWorkerErrorType   string // the worker's errorType
	OriginalWorkerErrorDetail string // the worker's detail
}

// Error describes the answer: status, sub-status, detail and, if any, the
// worker's answer.
func (e *APIError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "iwf: server answered %d", e.StatusCode)
	if e.SubStatus != "" {
		fmt.Fprintf(&b, " %s", e.SubStatus)
	}
	if e.Detail != "" {
		fmt.Fprintf(&b, ": %s", e.Detail)
	}
	if e.OriginalWorkerErrorStatus != 0 || e.OriginalWorkerErrorType != "" || e.OriginalWorkerErrorDetail != "" {
		fmt.Fprintf(&b, " (worker answered %d %s: %s)", e.OriginalWorkerErrorStatus, e.OriginalWorkerErrorType, e.OriginalWorkerErrorDetail)
	}
	return b.String()
}

func asAPIError(err error) (*APIError, bool) {
	var e *APIError
	ok := errors.As(err, &e)
	return e, ok
}

// IsWorkflowAlreadyStartedError reports whether err says a workflow with
// that id is already running (or, per the id reuse policy, existed).
func IsWorkflowAlreadyStartedError(err error) bool {
	e, ok := asAPIError(err)
	return ok && e.SubStatus == SubStatusWorkflowAlreadyStarted
}

// IsWorkflowNotExistsError reports whether err says the workflow (or run)
// does not exist, or is closed for the operation attempted.
func IsWorkflowNotExistsError(err error) bool {
	e, ok := asAPIError(err)
	return ok && e.SubStatus == SubStatusWorkflowNotExists
}

// IsLongPollTimeoutError reports whether err says a long poll (waiting for
// a result or a state completion) ran out of time while the workflow was
// still running. The Client retries those itself until its context ends;
// the error then also matches the context's error.
func IsLongPollTimeoutError(err error) bool {
	e, ok := asAPIError(err)
	return ok && e.StatusCode == 420 && e.SubStatus == SubStatusLongPollTimeout
}

// IsRPCError reports whether err says an RPC failed in the worker (the
// worker answered an error, was unreachable, or its answer was invalid).
// The *APIError's OriginalWorker* fields carry the worker's answer.
func IsRPCError(err error) bool {
	e, ok := asAPIError(err)
	return ok && e.StatusCode == 420 && e.SubStatus != SubStatusLongPollTimeout
}

// IsRPCLockError reports whether err says a locking RPC could not take its
// locks because another operation holds them.
func IsRPCLockError(err error) bool {
	e, ok := asAPIError(err)
	return ok && e.StatusCode == 450
}

// IsClientError reports whether err is a 4xx answer of the server: the
// request was wrong for the workflow's current state and retrying it
// unchanged will not help (except long-poll timeouts).
func IsClientError(err error) bool {
	e, ok := asAPIError(err)
	return ok && e.StatusCode >= 400 && e.StatusCode < 500
}

// WorkflowAbnormalExitError is returned by the result getters when the
// workflow ended other than COMPLETED: FAILED, TIMEOUT, CANCELED or
// TERMINATED.
type WorkflowAbnormalExitError struct {
	WorkflowID string         // the workflow's id
	RunID      string         // the run that ended
	Status     WorkflowStatus // how it ended
	// ErrorType and ErrorMessage say why a FAILED workflow failed.
	ErrorType    WorkflowErrorType
	ErrorMessage string // set for some error types, e.g. the reason of StopFail
	// Results are the outputs recorded before a ForceFailWorkflow.
	Results []StateOutput
}

// Error describes how the workflow ended.
func (e *WorkflowAbnormalExitError) Error() string {
	msg := fmt.Sprintf("iwf: workflow %s (run %s) ended %s", e.WorkflowID, e.RunID, e.Status)
	if e.ErrorType != "" {
		msg += " with " + string(e.ErrorType)
	}
	if e.ErrorMessage != "" {
		msg += ": " + e.ErrorMessage
	}
	return msg
}

// WorkflowStatus is the status of a workflow run.
type WorkflowStatus string

// The workflow statuses.
const (
	StatusRunning        WorkflowStatus = "RUNNING"
	StatusCompleted      WorkflowStatus = "COMPLETED"
	StatusFailed         WorkflowStatus = "FAILED"
	StatusTimeout        WorkflowStatus = "TIMEOUT"
	StatusTerminated     WorkflowStatus = "TERMINATED"
	StatusCanceled       WorkflowStatus = "CANCELED"
	StatusContinuedAsNew WorkflowStatus = "CONTINUED_AS_NEW"
)

// WorkflowErrorType says why a workflow FAILED.
type WorkflowErrorType string

// The workflow error types.
const (
	// ErrorTypeStateDecisionFailing: a state decided ForceFailWorkflow.
	ErrorTypeStateDecisionFailing WorkflowErrorType = "STATE_DECISION_FAILING_WORKFLOW_ERROR_TYPE"
	// ErrorTypeClientAPIFailing: a client stopped it with StopFail.
	ErrorTypeClientAPIFailing WorkflowErrorType = "CLIENT_API_FAILING_WORKFLOW_ERROR_TYPE"
	// ErrorTypeStateAPIFail: a state API failed after all its retries.
	ErrorTypeStateAPIFail WorkflowErrorType = "STATE_API_FAIL_ERROR_TYPE"
	// ErrorTypeInvalidUserWorkflowCode: a worker answer was invalid.
	ErrorTypeInvalidUserWorkflowCode WorkflowErrorType = "INVALID_USER_WORKFLOW_CODE_ERROR_TYPE"
	// ErrorTypeRPCAcquireLockFailure: a locking RPC failed to lock.
	ErrorTypeRPCAcquireLockFailure WorkflowErrorType = "RPC_ACQUIRE_LOCK_FAILURE"
	// ErrorTypeServerInternal: the server failed.
	ErrorTypeServerInternal WorkflowErrorType = "SERVER_INTERNAL_ERROR_TYPE"
)
