package engine

import (
	"context"
	"errors"
	"time"

	"github.com/iwf-server/iwf-server/search"
)

// ErrNotFound is returned by store lookups when the requested row does not exist.
var ErrNotFound = errors.New("not found")

// Store is the durable state of the engine. Two implementations exist
// (internal/store/sqlite and internal/store/postgres); both pass the
// conformance suite in internal/store/storetest.
//
// Everything the engine changes in answer to one event (an API call, a worker
// answer, a fired timer) is written inside one Update transaction. Within a
// transaction the engine first locks the rows it changes (WorkflowLock, RunLock)
// so that concurrent transactions on the same workflow are serialised, also
// across server processes sharing one PostgreSQL database.
type Store interface {
	// Update runs fn in a read-write transaction and commits it when fn
	// returns nil. It rolls back and returns fn's error otherwise.
	//
	// A store may run fn more than once for one call: PostgreSQL runs it
	// again after a deadlock or serialization failure, SQLite's group commit
	// after another function of the same batch failed. Every run but the last
	// is rolled back. fn must therefore act only through tx: no metrics,
	// logs, scheduling or notifications inside it, and any value it hands
	// out must be reset at its start. Effects outside the store happen after
	// Update returns (see the engine's txn). The conformance suite checks the
	// store's half (storetest.UpdateRerun), TestUpdateFunctionsRunTwice the
	// engine's.
	Update(ctx context.Context, fn func(ctx context.Context, tx Tx) error) error
	// View runs fn in a read-only transaction (a consistent snapshot).
	View(ctx context.Context, fn func(ctx context.Context, tx ReadTx) error) error

	// TaskClaim leases due tasks to an owner and returns them, oldest due first.
	// A task is claimable when its DueAt is at or before params.DueBefore and it
	// is unleased or its lease expired before params.Now. Claiming a task whose
	// lease had expired (its previous owner may have called the worker already)
	// increments its Attempt. Two concurrent claimers never receive the same task.
	TaskClaim(ctx context.Context, params TaskClaimParams) ([]*Task, error)
	// TaskRenewLeases extends the leases owner holds on the tasks ids lists
	// to max(DueAt, now) + duration and returns how many leases it
	// extended; a lease already at or beyond that time is left as it is.
	// A process renews only the tasks it has in memory: a task leased to it
	// that it does not know of (its creating transaction's commit was
	// reported failed although it succeeded) then expires and is claimed
	// again instead of being held forever.
	TaskRenewLeases(ctx context.Context, owner string, ids []int64, now time.Time, duration time.Duration) (int64, error)
	// TaskReleaseLeases clears every lease not held by keepOwner, so that the
	// tasks are claimable at once. A single-process store (SQLite) calls it at
	// start-up: leases of the previous, crashed process need not expire first.
	TaskReleaseLeases(ctx context.Context, keepOwner string) (int64, error)
	// TaskRelease clears the leases that owner holds on the tasks ids
	// lists (every lease owner holds when ids is nil), so that any node may
	// claim them at once; with bumpAttempt their Attempt advances, as for
	// an expired lease (the owner may have called the worker). A node
	// shutting down hands its work back with it.
	TaskRelease(ctx context.Context, owner string, ids []int64, bumpAttempt bool) (int64, error)

	// RunsExpired returns the ids of up to e.Limit closed runs that e
	// selects, those closed first first. A running run is never returned.
	RunsExpired(ctx context.Context, e RunExpiry) ([]string, error)
	// RunsExpiredCount counts the runs RunsExpired would return with no
	// limit, up to e.Limit.
	RunsExpiredCount(ctx context.Context, e RunExpiry) (int, error)
	// RunsDelete deletes the closed runs among runIDs and everything that
	// belongs to them (executions, history, messages, data and search
	// attributes with their index rows, tasks), in one transaction: a
	// crash leaves each run whole or gone. A workflow id whose current run
	// is deleted is removed too, so that its next start finds it unused.
	// Running runs, unknown ids and runs another transaction holds locked
	// are skipped. It returns the number of runs deleted.
	RunsDelete(ctx context.Context, runIDs []string) (int, error)
	// RetentionLock makes the caller the only one, among the processes
	// that share the database, that deletes expired runs, until it calls
	// release; ok is false when another holds it. A process that dies
	// loses it.
	RetentionLock(ctx context.Context) (release func(), ok bool, err error)
	// RetentionStart returns when retention began to count on this
	// database (Config.RetentionSince), recording now, truncated to the
	// millisecond, if no time is recorded yet. Once recorded it never
	// changes; processes that call it at once all get the same time.
	RetentionStart(ctx context.Context, now time.Time) (time.Time, error)

	// Ping reports whether the database answers.
	Ping(ctx context.Context) error
	// SchemaVersion returns the highest migration version recorded in the
	// store's schema_migrations table: the schema the database has, which
	// in a rolling upgrade may be newer than the migrations this binary
	// embeds.
	SchemaVersion(ctx context.Context) (int, error)
	// Close releases the store's connections.
	Close() error
}

// CallReader is implemented by a store that can read, in one consistent
// snapshot and one round trip, everything a waitUntil or execute call
// needs (both stores do it with a single statement). The engine uses it
// when present and otherwise reads the same through View.
type CallReader interface {
	// ReadForCall returns a run, one of its executions and all the run's
	// data and search attributes, in ascending key order. Run is nil when
	// the run does not exist, Execution nil when the execution does not.
	ReadForCall(ctx context.Context, runID, executionID string) (*CallRead, error)
}

// RunReader is implemented by a store that can resolve and read a run in
// one statement, without a transaction around it (get and getWithWait,
// which a client may call in a loop). The engine uses it when present and
// otherwise reads the same through View.
type RunReader interface {
	// ReadRun returns the run runID, or, when runID is "", the current run
	// of workflowID; ErrNotFound when there is none. With a runID the
	// caller checks that the run belongs to workflowID.
	ReadRun(ctx context.Context, workflowID, runID string) (*Run, error)
}

// CallPrefetcher is implemented by a store's Tx that can run a
// CallReader.ReadForCall right after its commit, in the commit's round
// trip. The engine asks it for the waitUntil and execute calls the
// transaction makes due at once, so that a worker call on the hot path
// needs no read of its own: what the call is sent is then read at the
// moment the call was scheduled, as in a workflow that schedules an
// activity with its input.
type CallPrefetcher interface {
	// ReadForCallAfterCommit queues the read. done is called with it
	// before Update returns, and only when the transaction committed and
	// the read succeeded; otherwise the engine reads when the call runs. A
	// failed read never fails a transaction that committed.
	ReadForCallAfterCommit(runID, executionID string, done func(*CallRead))
}

// TaskTakeExpecter is implemented by a Tx that can take a task more
// cheaply when it knows what TaskTake would return: without a round trip
// of its own (PostgreSQL), or without reading the run and the execution
// back (SQLite). The engine uses it when it applies a worker's answer and
// holds the run and the execution as it read them before the call: unless
// something changed them since, TaskTake would return exactly those, with
// Removed set.
type TaskTakeExpecter interface {
	// TaskTakeExpecting does what TaskTake does (lock the run, remove the
	// task owned by owner, read the execution) and checks that TaskTake
	// would have returned run and x, each unchanged, and Removed true. A
	// store may run the checks at once, and then returns ErrUnexpected
	// when one fails, or queue them to travel with the transaction's next
	// read or its commit, which then fails with ErrUnexpected. Either way
	// nothing of the transaction is kept; the caller then runs it again
	// with TaskTake.
	TaskTakeExpecting(ctx context.Context, run *Run, taskID int64, owner string, x *Execution) error
}

// WorkflowCreator is implemented by a Tx that can create the row of a new
// workflow id without a round trip of its own (PostgreSQL), so that a
// start's transaction needs no answer from the store before its commit.
// The engine uses it for the first attempt of a start, expecting the id
// to be new, as it is for most starts.
type WorkflowCreator interface {
	// WorkflowCreateExpecting creates the row of workflowID pointing at
	// runID, as WorkflowLockOrCreate does for an absent id. When the row
	// exists, the transaction fails with ErrUnexpected, at once or at its
	// next read or its commit; nothing of it is kept, and the caller then
	// runs it again with WorkflowLockOrCreate.
	WorkflowCreateExpecting(ctx context.Context, workflowID, runID string) error
}

// ErrUnexpected reports that a transaction begun with TaskTakeExpecting
// found the run, the task or the execution not as expected, or one begun
// with WorkflowCreateExpecting found the workflow id taken, and was rolled
// back.
var ErrUnexpected = errors.New("run, task or execution changed since it was read")

// TakenTask is what Tx.TaskTake returns.
type TakenTask struct {
	Run *Run
	// Removed reports whether the task was removed: false means it is gone
	// or another process holds it, and its outcome must not be applied.
	Removed   bool
	Execution *Execution
}

// CallRead is what CallReader.ReadForCall returns.
type CallRead struct {
	Run              *Run
	Execution        *Execution
	DataAttributes   []*Attribute
	SearchAttributes []*SearchAttribute
}

// ChangeFeed is implemented by a store that several server processes share
// (PostgreSQL). It carries hints between them: which runs a process
// changed, so that long polls served by another process wake at once
// instead of at their next re-check, and that tasks became claimable, so
// that another process claims them at once instead of at its next poll.
// Hints may be lost (a process dies, a connection drops); nothing depends
// on them for correctness, only for speed.
type ChangeFeed interface {
	// PublishChanges announces changes this process committed. It does not
	// block: the store sends them in the background, batched.
	PublishChanges(c Changes)
	// ListenChanges calls fn with the changes other processes announce,
	// one call at a time, until ctx ends. It reconnects on its own; after a
	// gap in which announcements may have been missed it calls fn with
	// Missed set.
	ListenChanges(ctx context.Context, fn func(Changes))
}

// Changes is one announcement of a ChangeFeed.
type Changes struct {
	// Keys name what changed, as the engine's long polls subscribe to it:
	// run ids and workflow keys. The store treats them as opaque strings.
	Keys []string
	// Tasks reports that tasks became claimable now (a node handed its
	// work back).
	Tasks bool
	// Missed reports that announcements may have been lost: every long poll
	// should re-check and due work be claimed.
	Missed bool
}

// ReadTx is the read side of a transaction.
type ReadTx interface {
	// WorkflowGetCurrentRun returns the run id that an empty workflowRunId
	// refers to, or ErrNotFound when the workflow id was never started.
	WorkflowGetCurrentRun(ctx context.Context, workflowID string) (string, error)

	// RunGet returns a run, or ErrNotFound.
	RunGet(ctx context.Context, runID string) (*Run, error)

	// ExecutionGet returns one state execution, or ErrNotFound.
	ExecutionGet(ctx context.Context, runID, executionID string) (*Execution, error)
	// ExecutionList returns the run's state executions whose status is one of
	// statuses (all when statuses is empty), in insertion order.
	ExecutionList(ctx context.Context, runID string, statuses ...ExecutionStatus) ([]*Execution, error)

	// MessagePeek returns up to limit unconsumed messages of one channel,
	// oldest first. limit <= 0 means no limit.
	MessagePeek(ctx context.Context, runID string, kind ChannelKind, channel string, limit int) ([]*Message, error)
	// MessageCounts returns the number of unconsumed messages per channel of
	// one kind; channels without messages are absent.
	MessageCounts(ctx context.Context, runID string, kind ChannelKind) (map[string]int, error)

	// DataAttributeGet returns the run's data attributes with the given keys
	// (all of them when keys is nil), in ascending key order. Unknown keys are
	// skipped.
	DataAttributeGet(ctx context.Context, runID string, keys []string) ([]*Attribute, error)
	// SearchAttributeGet returns the run's search attributes with the given
	// keys (all when keys is nil), in ascending key order.
	SearchAttributeGet(ctx context.Context, runID string, keys []string) ([]*SearchAttribute, error)

	// TaskList returns the run's tasks, oldest due first.
	TaskList(ctx context.Context, runID string) ([]*Task, error)

	// HistoryList returns up to limit history events of a run with ID greater
	// than afterID, in append order. limit <= 0 means no limit.
	HistoryList(ctx context.Context, runID string, afterID int64, limit int) ([]*HistoryEvent, error)
	// HistoryOutline is HistoryList without the data of most events, for
	// a pass over a long history that needs the data of a few: Data is
	// set only for the events whose type is one of o.Types, or is
	// o.MarkedType and whose data contains o.Marker; the others have nil
	// Data (the store does not send it).
	HistoryOutline(ctx context.Context, runID string, afterID int64, limit int, o OutlineData) ([]*HistoryEvent, error)
	// HistoryGet returns the run's history events with the given ids, with
	// their data, in id order; unknown ids and ids of events of other runs
	// are skipped.
	HistoryGet(ctx context.Context, runID string, ids []int64) ([]*HistoryEvent, error)

	// RunSearch returns one page of the runs that match q.Filter, in q.Order,
	// at most q.Limit of them, starting after q.Cursor. search.Query defines
	// the semantics; the store compiles it to SQL with every literal and key
	// bound as a parameter. An unusable q.Cursor yields an error wrapping
	// search.ErrInvalidCursor.
	RunSearch(ctx context.Context, q *search.Query) (*search.Page, error)
	// SearchAttributeTypeOf returns the value type last written under a
	// search attribute key in any run, or ErrNotFound when the key was never
	// written.
	SearchAttributeTypeOf(ctx context.Context, key string) (search.ValueType, error)

	batchReadTx
	payloadReadTx
	limitReadTx
	statsReadTx
	pauseReadTx
}

// Tx is a read-write transaction.
type Tx interface {
	ReadTx

	// WorkflowLock locks the row of a workflow id, creating it when absent,
	// and returns its current run id ("" when it has none yet).
	WorkflowLock(ctx context.Context, workflowID string) (string, error)
	// WorkflowLockOrCreate is WorkflowLock for a start. When the row is
	// absent it creates it pointing at runID and reports created: the
	// caller then need not set the current run. Otherwise it locks the row
	// and returns its current run id ("" when it has none yet), or points
	// a row without a current run at runID and reports created.
	WorkflowLockOrCreate(ctx context.Context, workflowID, runID string) (cur string, created bool, err error)
	// WorkflowSetCurrentRun points the workflow id at a run.
	WorkflowSetCurrentRun(ctx context.Context, workflowID, runID string) error

	// RunInsert stores a new run.
	RunInsert(ctx context.Context, run *Run) error
	// RunLock reads a run and locks its row until the transaction ends
	// (SELECT ... FOR UPDATE on PostgreSQL), or returns ErrNotFound.
	RunLock(ctx context.Context, runID string) (*Run, error)
	// RunUpdate writes a run's Status, ClosedAt and Data.
	RunUpdate(ctx context.Context, run *Run) error

	// ExecutionInsert stores new state executions in order.
	ExecutionInsert(ctx context.Context, executions []*Execution) error
	// ExecutionUpdate writes an execution's Status and Data.
	ExecutionUpdate(ctx context.Context, execution *Execution) error

	// MessageAppend appends messages, in order; it sets each message's ID.
	MessageAppend(ctx context.Context, messages []*Message) error
	// MessageDelete removes consumed messages.
	MessageDelete(ctx context.Context, ids []int64) error

	// DataAttributeUpsert replaces the value of each key.
	DataAttributeUpsert(ctx context.Context, runID string, attrs []*Attribute) error
	// SearchAttributeUpsert replaces the value of each key.
	SearchAttributeUpsert(ctx context.Context, runID string, attrs []*SearchAttribute) error

	// TaskInsert stores tasks and sets their IDs.
	TaskInsert(ctx context.Context, tasks []*Task) error
	// TaskDelete removes a task if owner holds its lease (owner "" matches an
	// unleased task). It reports whether a row was removed: false means the
	// task is gone or another process holds it, and the caller must not apply
	// its result.
	TaskDelete(ctx context.Context, id int64, owner string) (bool, error)
	// TaskTake begins the transaction that applies a task's outcome. In this
	// order it locks the task's run (as RunLock), removes the task (as
	// TaskDelete) and, when executionID is not "", reads that execution (as
	// ExecutionGet). Run is nil when the run does not exist (the task is
	// removed all the same), Execution nil when the execution does not
	// exist. PostgreSQL sends the three statements in one round trip.
	TaskTake(ctx context.Context, runID string, taskID int64, owner, executionID string) (*TakenTask, error)
	// TaskReschedule sets a task's DueAt, Attempt and lease, provided owner
	// still holds its lease. It reports whether a row was changed.
	TaskReschedule(ctx context.Context, task *Task, owner string) (bool, error)
	// TaskDeleteByRun removes a run's tasks of the given kinds (all kinds when
	// kinds is empty).
	TaskDeleteByRun(ctx context.Context, runID string, kinds ...TaskKind) error
	// TaskDeleteByExecution removes one execution's tasks of the given kinds
	// (all kinds when kinds is empty).
	TaskDeleteByExecution(ctx context.Context, runID, executionID string, kinds ...TaskKind) error

	// HistoryAppend appends events to runs' histories and sets their IDs.
	HistoryAppend(ctx context.Context, events []*HistoryEvent) error

	batchTx
	payloadTx
	limitTx
	pauseTx
}

// RunExpiry selects closed runs by close time and workflow type: those
// closed before ClosedBefore whose type is in Types, or, when Types is
// nil, whose type is not in ExceptTypes.
type RunExpiry struct {
	// ClosedBefore is a time in unix milliseconds.
	ClosedBefore int64
	Types        []string
	ExceptTypes  []string
	// Limit bounds the runs returned or counted; it must be positive.
	Limit int
}

// RunStatus is the status of a workflow run; the values are iWF's WorkflowStatus.
type RunStatus string

// The run statuses.
const (
	RunRunning    RunStatus = "RUNNING"
	RunCompleted  RunStatus = "COMPLETED"
	RunFailed     RunStatus = "FAILED"
	RunTimeout    RunStatus = "TIMEOUT"
	RunTerminated RunStatus = "TERMINATED"
	RunCanceled   RunStatus = "CANCELED"
)

// Run is one run of a workflow id. Data is owned by the engine (JSON); the
// store keeps it opaque. The other fields are columns that searches and
// listings use.
type Run struct {
	RunID        string
	WorkflowID   string
	WorkflowType string
	Status       RunStatus
	StartedAt    time.Time
	ClosedAt     time.Time // zero while running
	Data         []byte
}

// ExecutionStatus is the phase of a state execution.
type ExecutionStatus string

// The execution phases. The first three are "live".
const (
	ExecWaitUntil ExecutionStatus = "WAIT_UNTIL" // waitUntil call pending
	ExecWaiting   ExecutionStatus = "WAITING"    // waiting for commands
	ExecExecute   ExecutionStatus = "EXECUTE"    // execute call pending
	ExecCompleted ExecutionStatus = "COMPLETED"  // execute answered and applied
	ExecFailed    ExecutionStatus = "FAILED"     // API failed, workflow failed or proceeded
	ExecAbandoned ExecutionStatus = "ABANDONED"  // the run closed while it was live
)

// LiveStatuses are the statuses of executions that keep a run busy.
var LiveStatuses = []ExecutionStatus{ExecWaitUntil, ExecWaiting, ExecExecute}

// Execution is one state execution ("S1-1"). Data is engine-owned JSON.
type Execution struct {
	RunID       string
	ExecutionID string
	StateID     string
	Status      ExecutionStatus
	CreatedAt   time.Time
	Data        []byte
}

// ChannelKind separates the two channel namespaces of a run.
type ChannelKind int

// The channel kinds.
const (
	ChannelSignal   ChannelKind = 1 // user signals (/signal)
	ChannelInternal ChannelKind = 2 // internal channels
)

// Message is one buffered channel message. Value is the JSON EncodedObject,
// or nil for a message without a value.
type Message struct {
	ID        int64
	RunID     string
	Kind      ChannelKind
	Channel   string
	Value     []byte
	CreatedAt time.Time
}

// Attribute is one data attribute. Value is the JSON EncodedObject, or nil.
type Attribute struct {
	Key   string
	Value []byte
}

// SearchAttribute is one search attribute: the object as written (Raw, JSON)
// plus the typed value the search index uses. Exactly one of the typed fields
// is set, according to ValueType.
type SearchAttribute struct {
	Key       string
	ValueType search.ValueType
	Raw       []byte
	String    *string    // KEYWORD, TEXT
	Int       *int64     // INT
	Double    *float64   // DOUBLE
	Bool      *bool      // BOOL
	Time      *time.Time // DATETIME
	Strings   []string   // KEYWORD_ARRAY
}

// TaskKind says what a task does when it comes due.
type TaskKind string

// The task kinds.
const (
	TaskWaitUntil TaskKind = "WAIT_UNTIL" // call the worker's waitUntil
	TaskExecute   TaskKind = "EXECUTE"    // call the worker's execute
	TaskTimer     TaskKind = "TIMER"      // a durable timer command fires
	TaskTimeout   TaskKind = "TIMEOUT"    // the workflow timeout expires
)

// Task is a row of the durable task queue. A task is claimed by one server
// process at a time through its lease.
type Task struct {
	ID             int64
	RunID          string
	WorkflowID     string
	ExecutionID    string // "" for run-level tasks
	Kind           TaskKind
	DueAt          time.Time
	Attempt        int       // attempt number of the next worker call
	FirstAttemptAt time.Time // when the first attempt was scheduled
	LeaseOwner     string    // "" when unleased
	LeaseExpiresAt time.Time
	Data           []byte // kind-specific JSON

	// prefetched is what the task's worker call is sent, read right after
	// the commit that made the task due (CallPrefetcher); the first
	// attempt in this process takes it, every later one reads afresh.
	prefetched *CallRead
	// prefetchEpoch is the pause epoch (pauses.epoch) before prefetched
	// was read: a pause made since makes the call read afresh.
	prefetchEpoch uint64
}

// TaskClaimParams selects and leases due tasks.
type TaskClaimParams struct {
	Owner         string
	Now           time.Time
	DueBefore     time.Time
	LeaseDuration time.Duration // lease expires at max(DueAt, Now) + LeaseDuration
	Limit         int
}

// HistoryEvent is one entry of a run's append-only history.
type HistoryEvent struct {
	ID          int64
	RunID       string
	At          time.Time
	Type        string
	ExecutionID string
	Data        []byte
}

// OutlineData selects the events whose data ReadTx.HistoryOutline reads.
type OutlineData struct {
	// Types are event types whose data is always read.
	Types []string
	// MarkedType is an event type whose data is read when it contains
	// Marker ("" for none).
	MarkedType string
	Marker     string
}

// RunsDeleteTimer is implemented by a store whose writes take turns on one
// writer (SQLite). RunsDeleteTimed is RunsDelete that also returns how long
// the deletion held the writer: the time its transaction ran, not the time
// it waited for its turn behind other writes. A sweep paces itself by it
// (Config.SweepShare) and sizes its transactions by it (Config.SweepHold).
type RunsDeleteTimer interface {
	RunsDeleteTimed(ctx context.Context, runIDs []string) (deleted int, held time.Duration, err error)
}
