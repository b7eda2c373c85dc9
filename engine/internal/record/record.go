package record

import (
	"encoding/json"
	"fmt"
)

// FormatVersion is the version of the stored format this code writes. It
// reads every version up to it.
const FormatVersion = 1

// Run is the engine-owned part of a run row.
type Run struct {
	// V is the format version; 0 (absent) means 1.
	V         int            `json:"v,omitempty"`
	WorkerURL string         `json:"workerUrl"`
	Start     Start          `json:"start"`
	Config    Config         `json:"config"`
	RequestID string         `json:"requestId,omitempty"`
	TimeoutAt int64          `json:"timeoutAt,omitempty"` // unix ms, 0 = none
	Counters  map[string]int `json:"counters,omitempty"`  // executions started per stateId
	Graceful  bool           `json:"graceful,omitempty"`  // graceful completion requested
	Outputs   []StateOutput  `json:"outputs,omitempty"`
	// Executing counts the live executions per stateId that the system
	// search attribute IwfExecutingStateIds lists; ExecutingWritten is the
	// value last written to it.
	Executing        map[string]int `json:"executing,omitempty"`
	ExecutingWritten []string       `json:"executingWritten,omitempty"`
	// Live counts the run's live executions (waitUntil, waiting or
	// execute) when LiveCounted is set, as it is on every run created
	// since the count exists: a graceful completion then needs no list
	// of them. A binary without these fields drops them when it rewrites
	// the record, and the engine lists the live executions again.
	LiveCounted bool `json:"liveCounted,omitempty"`
	Live        int  `json:"live,omitempty"`
	// Locks are the held data ("da:<key>") and search ("sa:<key>")
	// attribute locks.
	Locks map[string]LockHolder `json:"locks,omitempty"`
	// PendingSkips are timer skips re-applied by a reset before their
	// execution reached its timers.
	PendingSkips []SkipTimer `json:"pendingSkips,omitempty"`
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
	Completions map[string]StateOutput `json:"completions,omitempty"`
	// Trace is the W3C traceparent of the request that started the run
	// (or, for a run started without one, of the first input that carried
	// one), and TraceState its tracestate: every span of the run descends
	// from it. Set only while tracing is on.
	Trace      string `json:"trace,omitempty"`
	TraceState string `json:"traceState,omitempty"`
	// Pause, when set, holds the run's worker calls: the run was paused
	// by itself (engine/pause.go), not as part of a paused workflow type
	// or worker host, whose pauses live in a table of their own.
	Pause *Pause `json:"pause,omitempty"`
}

// Pause says who paused a run, when (unix ms) and why.
type Pause struct {
	By     string `json:"by,omitempty"`
	At     int64  `json:"at"`
	Reason string `json:"reason,omitempty"`
}

// LockHolder is who holds one attribute lock.
type LockHolder struct {
	Holder  string `json:"holder"`
	Expires int64  `json:"expires,omitempty"` // unix ms; 0 = until released
}

// Execution is the engine-owned part of a state execution row.
type Execution struct {
	// V is the format version; 0 (absent) means 1.
	V          int           `json:"v,omitempty"`
	Input      *Value        `json:"input,omitempty"`
	Options    *StateOptions `json:"options,omitempty"`
	WaitForKey string        `json:"waitForKey,omitempty"`
	// Commands is the waitUntil answer's command request.
	Commands *Commands `json:"commands,omitempty"`
	// FireAt is the firing time (unix ms) of each timer command.
	FireAt []int64 `json:"fireAt,omitempty"`
	// Done and Values record, per command in flattened order (timers,
	// signals, internal channels), completion and the consumed message.
	Done        []bool      `json:"done,omitempty"`
	Values      []*Value    `json:"values,omitempty"`
	StateLocals *[]KeyValue `json:"stateLocals,omitempty"`
	// Batch is the id of the first execution started by the same decision;
	// that first execution carries the Checkpoint a reset restores.
	Batch      string      `json:"batch,omitempty"`
	Checkpoint *Checkpoint `json:"checkpoint,omitempty"`
	// Counted says the execution is listed in IwfExecutingStateIds.
	Counted bool `json:"counted,omitempty"`
	// Results is what the execute call receives as commandResults (nil when
	// waitUntil was skipped).
	Results *CommandResults `json:"results,omitempty"`
	// LastFailure is the last failed worker call of the execution (of
	// either API); describe shows it while the execution is in the phase
	// of that API.
	LastFailure *Failure `json:"lastFailure,omitempty"`
}

// Failure is one failed worker call of a state execution.
type Failure struct {
	// API is the execution status of the failed call: "WAIT_UNTIL" or
	// "EXECUTE".
	API     string `json:"api"`
	Attempt int    `json:"attempt"`
	At      int64  `json:"at"` // unix ms
	// Status is the worker's HTTP status, 0 when no answer came.
	Status int    `json:"status,omitempty"`
	Error  string `json:"error"`
}

// Checkpoint is a run's progress just before a decision started a batch of
// state executions: what a STATE_ID / STATE_EXECUTION_ID reset rolls back to.
type Checkpoint struct {
	Counters map[string]int `json:"counters"`
	Outputs  int            `json:"outputs"`
	Graceful bool           `json:"graceful,omitempty"`
}

// TimerTask is the Data of a timer task: which timer command of its
// execution fires.
type TimerTask struct {
	Index int `json:"index"`
	// Alone marks the execution's only command, whose firing alone moves
	// the execution on: the engine may call execute before it records the
	// firing (engine.fireTimerEager).
	Alone bool `json:"alone,omitempty"`
}

// DecodeRun reads a run record of any supported format version.
func DecodeRun(data []byte) (*Run, error) {
	var r Run
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, err
	}
	if err := checkVersion(r.V); err != nil {
		return nil, err
	}
	r.V = FormatVersion
	if r.Counters == nil {
		r.Counters = map[string]int{}
	}
	return &r, nil
}

// DecodeExecution reads an execution record of any supported format version.
func DecodeExecution(data []byte) (*Execution, error) {
	var x Execution
	if err := json.Unmarshal(data, &x); err != nil {
		return nil, err
	}
	if err := checkVersion(x.V); err != nil {
		return nil, err
	}
	x.V = FormatVersion
	return &x, nil
}

// checkVersion accepts the versions this code reads. A record from a newer
// release is refused instead of being misread and rewritten.
func checkVersion(v int) error {
	if v > FormatVersion {
		return fmt.Errorf("stored format version %d is newer than this release reads (%d): upgrade the server", v, FormatVersion)
	}
	return nil
}

// Encode is json.Marshal for record types, which always encode: they hold
// only strings, numbers, booleans, slices, maps and pointers to them.
func Encode(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("record: encoding %T: %v", v, err))
	}
	return b
}
