package engine

import (
	"context"
	"errors"
	"fmt"
)

// ErrorCode classifies the errors the engine returns to API callers. The HTTP
// layer maps each code to a status code and an iWF ErrorSubStatus in one table.
type ErrorCode string

// The error codes.
const (
	// CodeInvalidArgument: the request is well-formed JSON but asks for
	// something impossible (400, UNCATEGORIZED_SUB_STATUS).
	CodeInvalidArgument ErrorCode = "invalid_argument"
	// CodeWorkflowNotExists: no such workflow or run, or the run is closed and
	// the call would change it (400, WORKFLOW_NOT_EXISTS_SUB_STATUS).
	CodeWorkflowNotExists ErrorCode = "workflow_not_exists"
	// CodeAlreadyStarted: the id-reuse policy forbids a new run
	// (400, WORKFLOW_ALREADY_STARTED_SUB_STATUS).
	CodeAlreadyStarted ErrorCode = "already_started"
	// CodeLongPollTimeout: a long poll's wait budget ran out
	// (420, LONG_POLL_TIME_OUT_SUB_STATUS).
	CodeLongPollTimeout ErrorCode = "long_poll_timeout"
	// CodeWorkerAPIError: an RPC's worker call failed or answered something
	// invalid (420, WORKER_API_ERROR, with the Worker* fields).
	CodeWorkerAPIError ErrorCode = "worker_api_error"
	// CodeLocked: a locking RPC found a key locked (450, WORKER_API_ERROR).
	CodeLocked ErrorCode = "locked"
	// CodePaused: the run, its workflow type or its worker host is paused,
	// and the call would call its worker: an RPC (409,
	// UNCATEGORIZED_SUB_STATUS). An extension of this server: iWF has no
	// pause.
	CodePaused ErrorCode = "paused"
	// CodeUnimplemented: the server does not implement this yet (501).
	CodeUnimplemented ErrorCode = "unimplemented"
	// CodeUnavailable: the store cannot be reached or cannot take work
	// now (503 with Retry-After); the same request may succeed later.
	CodeUnavailable ErrorCode = "unavailable"
	// CodeDeadlineExceeded: the request's time ran out while the store
	// worked on it: its deadline passed or it was cancelled, and the store
	// stopped the statement (or the statement timeout did). The store
	// answered, so this is no outage (504, UNCATEGORIZED_SUB_STATUS, no
	// Retry-After): the same request is likely to take as long again.
	CodeDeadlineExceeded ErrorCode = "deadline_exceeded"
	// CodeInternal: anything else (500, UNCATEGORIZED_SUB_STATUS). The
	// message is logged; clients see a plain text.
	CodeInternal ErrorCode = "internal"
)

// Error is an error with a code the HTTP layer understands.
type Error struct {
	Code    ErrorCode
	Message string
	// Worker describes the worker's failed answer for CodeWorkerAPIError.
	Worker *WorkerErrorInfo
	// Err is the underlying cause, if any (logged, never shown to clients
	// for CodeInternal).
	Err error
}

// WorkerErrorInfo carries the original worker error of a failed RPC.
type WorkerErrorInfo struct {
	Status    int    // HTTP status the worker answered, 0 if none
	ErrorType string // errorType of the worker's WorkerErrorResponse
	Detail    string // detail of the worker's WorkerErrorResponse
}

// Error implements error.
func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Message, e.Err)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Errorf builds an *Error with a formatted message.
func Errorf(code ErrorCode, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// CodeOf returns the code of err: the code of the first *Error in its chain,
// CodeInternal otherwise.
func CodeOf(err error) ErrorCode {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	if IsUnavailable(err) {
		return CodeUnavailable
	}
	return CodeInternal
}

// UnavailableError is a store error that says the database cannot be
// reached or cannot take work now: the connection is refused or lost, the
// server is shutting down, the disk is full. Retried later, the operation
// may succeed. Stores return it; the API answers 503.
type UnavailableError struct {
	// Store names the database ("PostgreSQL", "SQLite").
	Store string
	// Err is the driver's error.
	Err error
}

// Error implements error.
func (e *UnavailableError) Error() string { return e.Store + " is unavailable: " + e.Err.Error() }

// Unwrap returns the driver's error.
func (e *UnavailableError) Unwrap() error { return e.Err }

// IsUnavailable reports whether err says the store is unavailable.
func IsUnavailable(err error) bool {
	var u *UnavailableError
	return errors.As(err, &u)
}

// UnavailableStore returns the name of the unavailable store err reports,
// or "".
func UnavailableStore(err error) string {
	var u *UnavailableError
	if errors.As(err, &u) {
		return u.Store
	}
	return ""
}

// InvalidRequestError returns the error a store reports when the database
// refused a request because of what it asked, not because of its own state:
// a value it cannot hold (a NUL character in a text, a number out of
// range), a statement beyond its limits (too many parameters, an
// expression too deep). message says what for the client; err is the
// driver's error, logged. The API answers 400.
func InvalidRequestError(message string, err error) *Error {
	return &Error{Code: CodeInvalidArgument, Message: message, Err: err}
}

// DeadlineExceededError returns the error a store reports when the
// request's time ran out while a statement ran: ctxErr is the context's
// error (context.DeadlineExceeded or context.Canceled) when the context
// ended, nil when the database's statement timeout ended the statement
// first; err is the driver's error. errors.Is matches both.
func DeadlineExceededError(store string, ctxErr, err error) *Error {
	msg := "the request ran out of time in the store (" + store + ")"
	if errors.Is(ctxErr, context.Canceled) {
		msg = "the request was cancelled while the store (" + store + ") worked on it"
	}
	if ctxErr != nil {
		err = fmt.Errorf("%w: %w", ctxErr, err)
	}
	return &Error{Code: CodeDeadlineExceeded, Message: msg, Err: err}
}
