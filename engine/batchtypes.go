package engine

import "time"

// The batch operations' requests and progress in the engine's terms. The
// surfaces map their own shapes to these: the REST API its wire types
// (internal/httpapi), the console its forms. None of them is stored: a
// batch row keeps its operation as the BatchOperation string and its
// parameters as batchOptions, the engine's stored JSON (batch.go).

// BatchOperation is what a batch does to each run it matched. The values
// are those stored in a batch row's operation and must not change.
type BatchOperation string

// The batch operations.
const (
	BatchOpTerminate BatchOperation = "TERMINATE"
	BatchOpCancel    BatchOperation = "CANCEL"
	BatchOpFail      BatchOperation = "FAIL"
	BatchOpSignal    BatchOperation = "SIGNAL"
	BatchOpReset     BatchOperation = "RESET"
	BatchOpSkipTimer BatchOperation = "SKIP_TIMER"
	// BatchOpPause and BatchOpResume pause and resume each run
	// (PauseWorkflow, ResumeWorkflow); BatchOpSetWorkerURL re-routes each
	// run to WorkerURL between two of its calls.
	BatchOpPause        BatchOperation = "PAUSE"
	BatchOpResume       BatchOperation = "RESUME"
	BatchOpSetWorkerURL BatchOperation = "SET_WORKER_URL"
)

// EncodedValue is a user value as the engine takes it: data in an
// encoding, or a reference to an external object. A nil field is absent.
type EncodedValue struct {
	Encoding   *string
	Data       *string
	ExtPath    *string
	ExtStoreID *string
}

// BatchRequest asks to start a batch: the operation applied to every run
// Query matches when the batch starts.
type BatchRequest struct {
	Query     string
	Operation BatchOperation
	// Reason is recorded with each run's operation and shown with the
	// batch; at most MaxBatchReasonBytes.
	Reason string
	// RPS is the rate, runs per second: from MinBatchRPS to MaxBatchRPS,
	// or 0 for DefaultBatchRPS.
	RPS float64
	// SignalChannel and SignalValue are a SIGNAL batch's signal; the
	// value may be nil.
	SignalChannel string
	SignalValue   *EncodedValue
	// Reset is a RESET batch's reset, SkipTimer a SKIP_TIMER batch's timer.
	Reset     *BatchReset
	SkipTimer *BatchSkipTimer
	// WorkerURL is a SET_WORKER_URL batch's new worker URL.
	WorkerURL string
}

// BatchReset is the reset a RESET batch applies to each run: the fields of
// a single reset. The point its ResetType names is required.
type BatchReset struct {
	// ResetType is one of BEGINNING, HISTORY_EVENT_ID, HISTORY_EVENT_TIME,
	// STATE_ID, STATE_EXECUTION_ID.
	ResetType         string
	HistoryEventID    *int32
	HistoryEventTime  *string
	StateID           *string
	StateExecutionID  *string
	SkipSignalReapply *bool
	SkipUpdateReapply *bool
}

// BatchSkipTimer is the timer a SKIP_TIMER batch fires in each run: by
// its command id, or else by its index among the execution's timers.
type BatchSkipTimer struct {
	StateExecutionID  string
	TimerCommandID    *string
	TimerCommandIndex *int32
}

// BatchStarted is what StartBatch answers: the new batch and the number of
// runs it matched.
type BatchStarted struct {
	ID      string
	Matched int64
}

// BatchInfo is a batch and its progress.
type BatchInfo struct {
	ID        string
	Query     string
	Operation BatchOperation
	Reason    string
	RPS       float64
	State     BatchState
	// Message says why the batch ended early ("" otherwise).
	Message string
	// Matched counts the batch's runs; Done, Failed and Pending those
	// applied, failed and left.
	Matched, Done, Failed, Pending int64
	CreatedBy                      string
	CreatedAt, UpdatedAt           time.Time
	ClosedAt                       time.Time // zero while starting or running
	// SignalChannel, Reset, SkipTimer and WorkerURL are the operation's
	// parameters (the signal's value is not shown).
	SignalChannel string
	Reset         *BatchReset
	SkipTimer     *BatchSkipTimer
	WorkerURL     string
}

// BatchFailure is a run on which a batch's operation failed, and why.
type BatchFailure struct {
	WorkflowID string
	RunID      string
	Reason     string
}

// BatchDescribeRequest asks for a batch and a page of its failed runs:
// FailuresPageSize of them (100 when 0, at most MaxPageSize) after
// FailuresPageToken ("" for the first page).
type BatchDescribeRequest struct {
	ID                string
	FailuresPageSize  int
	FailuresPageToken string
}

// BatchDescription is a batch and a page of its failed runs;
// FailuresNextPageToken is set when more follow.
type BatchDescription struct {
	Batch                 BatchInfo
	Failures              []BatchFailure
	FailuresNextPageToken string
}

// BatchListRequest asks for a page of batches, newest first: PageSize of
// them (MaxBatchListPage when 0, at most MaxBatchListPage) after
// PageToken ("" for the first page).
type BatchListRequest struct {
	PageSize  int
	PageToken string
}

// BatchPage is a page of batches, newest first; NextPageToken is set when
// more follow.
type BatchPage struct {
	Batches       []BatchInfo
	NextPageToken string
}
