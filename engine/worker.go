package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
)

// WorkerClient calls the three worker endpoints of a user's worker. baseURL
// is the run's iwfWorkerUrl without a trailing slash. A failed call returns
// an error, preferably a *WorkerCallError.
type WorkerClient interface {
	WaitUntil(ctx context.Context, baseURL string, req *iwfapi.WorkflowStateStartRequest) (*iwfapi.WorkflowStateStartResponse, error)
	Execute(ctx context.Context, baseURL string, req *iwfapi.WorkflowStateDecideRequest) (*iwfapi.WorkflowStateDecideResponse, error)
	RPC(ctx context.Context, baseURL string, req *iwfapi.WorkflowWorkerRpcRequest) (*iwfapi.WorkflowWorkerRpcResponse, error)
}

// WorkerCallError describes a failed worker call.
type WorkerCallError struct {
	Status  int    // HTTP status; 0 when there was no response
	Body    []byte // response body, if any
	Err     error  // transport or decoding error, if any
	Timeout bool   // the per-attempt timeout expired
	// API names the state API of a timed-out state API call
	// ("StateApiWaitUntil", "StateApiExecute"); the engine sets it.
	API string
	// NonRetryable says the worker marked its failed answer as one that
	// retrying cannot fix (header Iwf-Non-Retryable: true): the state's
	// retries end at once and its failure policy applies.
	NonRetryable bool
	// RetryAfter is the worker's Retry-After on a failed answer: the next
	// attempt waits at least this long (capped at MaxRetryAfter).
	RetryAfter time.Duration
}

// MaxRetryAfter caps the delay a worker's Retry-After may ask for.
const MaxRetryAfter = 24 * time.Hour

// Error implements error in the form iWF reports state API failures. A
// state API call that timed out reads as iWF's activity timeout,
// "activity error (type: StateApiWaitUntil, …): activity StartToClose
// timeout (type: StartToClose)", whose prefix apps match on.
func (e *WorkerCallError) Error() string {
	if e.Timeout && e.API != "" {
		return fmt.Sprintf("activity error (type: %s, scheduledEventID: 0, startedEventID: 0, identity: iwf-server): activity StartToClose timeout (type: StartToClose)", e.API)
	}
	body := "None"
	if e.Status != 0 {
		body = truncate(string(e.Body), 500)
	}
	msg := ""
	if e.Timeout {
		msg = "activity StartToClose timeout"
	} else if e.Err != nil {
		msg = truncate(e.Err.Error(), 200)
	}
	return fmt.Sprintf("statusCode: %d, responseBody: %s, errMsg: %s", e.Status, body, msg)
}

// Unwrap returns the underlying error.
func (e *WorkerCallError) Unwrap() error { return e.Err }

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
