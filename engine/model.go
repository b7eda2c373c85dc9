package engine

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
)

// Reserved state ids of iWF decisions.
const (
	GracefulCompletingState = "_SYS_GRACEFUL_COMPLETING_WORKFLOW"
	ForceCompletingState    = "_SYS_FORCE_COMPLETING_WORKFLOW"
	ForceFailingState       = "_SYS_FORCE_FAILING_WORKFLOW"
	DeadEndState            = "_SYS_DEAD_END"
	reservedStatePrefix     = "_SYS_"
	reservedChannelPrefix   = "__IwfSystem_"
)

// System search attributes.
const (
	SystemSAWorkflowType      = "IwfWorkflowType"
	SystemSAExecutingStateIDs = "IwfExecutingStateIds"
	systemSAGlobalVersion     = "IwfGlobalWorkflowVersion"
)

// Workflow error types (iWF's WorkflowErrorType).
const (
	errStateDecisionFailing = "STATE_DECISION_FAILING_WORKFLOW_ERROR_TYPE"
	errClientAPIFailing     = "CLIENT_API_FAILING_WORKFLOW_ERROR_TYPE"
	errStateAPIFail         = "STATE_API_FAIL_ERROR_TYPE"
	errInvalidUserCode      = "INVALID_USER_WORKFLOW_CODE_ERROR_TYPE"
)

// runData is the engine-owned part of a run row (Run.Data).
type runData struct {
	WorkerURL string                         `json:"workerUrl"`
	Start     iwfapi.WorkflowStartRequest    `json:"start"`
	Config    iwfapi.WorkflowConfig          `json:"config"`
	RequestID string                         `json:"requestId,omitempty"`
	TimeoutAt int64                          `json:"timeoutAt,omitempty"` // unix ms, 0 = none
	Counters  map[string]int                 `json:"counters,omitempty"`  // executions started per stateId
	Graceful  bool                           `json:"graceful,omitempty"`  // graceful completion requested
	Outputs   []iwfapi.StateCompletionOutput `json:"outputs,omitempty"`
	// Executing counts the live executions per stateId that the system
	// search attribute IwfExecutingStateIds lists; ExecutingWritten is the
	// value last written to it.
	Executing        map[string]int `json:"executing,omitempty"`
	ExecutingWritten []string       `json:"executingWritten,omitempty"`
	// Locks are the held data ("da:<key>") and search ("sa:<key>")
	// attribute locks.
	Locks map[string]lockHolder `json:"locks,omitempty"`
	// PendingSkips are timer skips re-applied by a reset before their
	// execution reached its timers.
	PendingSkips []iwfapi.WorkflowSkipTimerRequest `json:"pendingSkips,omitempty"`
	// RetriedBy is the run that retries this failed run (workflow retry
	// policy); getWithWait without a run id follows it.
	RetriedBy string `json:"retriedBy,omitempty"`
	// RetryAttempt counts the runs of one start request under a workflow
	// retry policy (1 for the first).
	RetryAttempt int    `json:"retryAttempt,omitempty"`
	ErrorType    string `json:"errorType,omitempty"`
	ErrorMsg     string `json:"errorMessage,omitempty"`
	// Completions are the published state completions for
	// waitForStateCompletion, by key ("id:<execId>" or "key:<stateId>:<waitForKey>").
	Completions map[string]iwfapi.StateCompletionOutput `json:"completions,omitempty"`
}

// execData is the engine-owned part of an execution row (Execution.Data).
type execData struct {
	Input      *iwfapi.EncodedObject        `json:"input,omitempty"`
	Options    *iwfapi.WorkflowStateOptions `json:"options,omitempty"`
	WaitForKey string                       `json:"waitForKey,omitempty"`
	// Commands is the waitUntil answer's command request.
	Commands *iwfapi.CommandRequest `json:"commands,omitempty"`
	// FireAt is the firing time (unix ms) of each timer command.
	FireAt []int64 `json:"fireAt,omitempty"`
	// Done and Values record, per command in flattened order (timers,
	// signals, internal channels), completion and the consumed message.
	Done        []bool                  `json:"done,omitempty"`
	Values      []*iwfapi.EncodedObject `json:"values,omitempty"`
	StateLocals *[]iwfapi.KeyValue      `json:"stateLocals,omitempty"`
	// Batch is the id of the first execution started by the same decision;
	// that first execution carries the Checkpoint a reset restores.
	Batch      string      `json:"batch,omitempty"`
	Checkpoint *checkpoint `json:"checkpoint,omitempty"`
	// Counted says the execution is listed in IwfExecutingStateIds.
	Counted bool `json:"counted,omitempty"`
	// Results is what the execute call receives as commandResults (nil when
	// waitUntil was skipped).
	Results *iwfapi.CommandResults `json:"results,omitempty"`
}

func decodeRun(r *Run) (*runData, error) {
	var d runData
	if err := json.Unmarshal(r.Data, &d); err != nil {
		return nil, fmt.Errorf("decoding run %s: %w", r.RunID, err)
	}
	if d.Counters == nil {
		d.Counters = map[string]int{}
	}
	return &d, nil
}

func encode(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		// Every type encoded here is a plain struct of generated models.
		panic(fmt.Sprintf("engine: encoding %T: %v", v, err))
	}
	return b
}

func decodeExec(x *Execution) (*execData, error) {
	var d execData
	if err := json.Unmarshal(x.Data, &d); err != nil {
		return nil, fmt.Errorf("decoding execution %s/%s: %w", x.RunID, x.ExecutionID, err)
	}
	return &d, nil
}

func ptr[T any](v T) *T { return &v }

func deref[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}

func slice[T any](p *[]T) []T {
	if p == nil {
		return nil
	}
	return *p
}

func unixMs(t time.Time) int64 { return t.UnixMilli() }

func isReserved(stateID string) bool { return strings.HasPrefix(stateID, reservedStatePrefix) }

// checkpoint is the run's progress just before a decision started a batch
// of state executions: what a STATE_ID / STATE_EXECUTION_ID reset rolls
// back to.
type checkpoint struct {
	Counters map[string]int `json:"counters"`
	Outputs  int            `json:"outputs"`
	Graceful bool           `json:"graceful,omitempty"`
}
