package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"

	"github.com/iwf-server/iwf-server/search"
)

// The defaults of the engine's settings: the one place they are defined
// (cmd/iwf-server's flags and docs/configuration.md take them from here).
const (
	DefaultMaxWait       = 60 * time.Second
	DefaultLeaseDuration = 10 * time.Second
	DefaultPollInterval  = time.Second
	DefaultConcurrency   = 256
	// DefaultLongPollRecheck is how often a long poll re-reads the store
	// to see changes made by other processes whose announcement (through
	// the store's ChangeFeed) was lost or never sent.
	DefaultLongPollRecheck = 500 * time.Millisecond
	// DefaultMaxSearches is how many searches a process runs at once.
	DefaultMaxSearches = 4
)

// Config holds the engine's settings. The zero value of every field selects
// its documented default; New validates the rest.
type Config struct {
	// NodeID names this server process in task leases. Default: a random UUID.
	NodeID string
	// MaxWait caps long polls (getWithWait, waitForStateCompletion) and RPC
	// worker calls. Default DefaultMaxWait.
	MaxWait time.Duration
	// WorkerClient calls the user's worker (required; internal/workerclient
	// is the HTTP one).
	WorkerClient WorkerClient
	// CheckWorkerURL, when set, vets the worker URL of a start, and of the
	// run a reset or RPC addresses: an error is answered as an invalid
	// argument (400) and nothing is stored (see internal/workerpolicy).
	// Without it, any absolute http(s) URL is accepted.
	CheckWorkerURL func(ctx context.Context, url string) error
	// Clock reads time. Default: the system clock.
	Clock Clock
	// Logger receives the engine's structured logs. Default: disabled.
	Logger *zerolog.Logger
	// LeaseDuration is how long a claimed task stays leased without renewal;
	// after a crash, another process takes the task over within this time.
	// Default DefaultLeaseDuration.
	LeaseDuration time.Duration
	// PollInterval is how often the engine looks for due work it did not
	// create itself (other processes' work, far timers, expired leases).
	// Default DefaultPollInterval.
	PollInterval time.Duration
	// LongPollRecheck is how often a waiting long poll (getWithWait,
	// waitForStateCompletion) re-reads the store: the safety net for
	// changes made by another process that it was not told of. Default
	// DefaultLongPollRecheck; tests of the change feed set it very long.
	LongPollRecheck time.Duration
	// Concurrency bounds the tasks (worker calls, timers) processed at once.
	// Default DefaultConcurrency.
	Concurrency int
	// ReleaseLeasesOnStart releases every lease at start-up. Set it for a
	// store that only one server process uses (SQLite): the previous process's
	// work resumes at once instead of after LeaseDuration.
	ReleaseLeasesOnStart bool
	// MaxSearches bounds the searches (workflow/search, the console's
	// list) this process runs at once; more wait for a slot until their
	// context ends. A search can take a database connection and a core for
	// as long as its statement timeout allows, so the bound keeps the
	// connections and the CPU of the database for the rest. Default
	// DefaultMaxSearches.
	MaxSearches int
	// MaxBatchRuns bounds the runs one batch operation may match: a
	// batch whose query matches more is refused (400). Default
	// DefaultMaxBatchRuns.
	MaxBatchRuns int
	// SearchAttributeTypes optionally declares search attribute names and
	// their types (KEYWORD, TEXT, DATETIME, INT, DOUBLE, BOOL,
	// KEYWORD_ARRAY). When set, writes of undeclared keys or mismatched
	// types are rejected.
	SearchAttributeTypes map[string]search.ValueType
	// OnCommit, when set, is called after every committed transaction that
	// appended history, with the events in append order (IDs set). It runs
	// on the engine's goroutine: it must not block or call the engine. Tests
	// use it to wait for events instead of sleeping.
	OnCommit func(events []*HistoryEvent)
	// Tracer, when set, receives the spans of state executions, their
	// phases and worker calls, and runs keep the trace context of the
	// request that started them (see engine/tracing.go and
	// docs/observability.md). nil turns tracing off at the cost of a nil
	// check.
	Tracer trace.Tracer
	// TraceDBSystem names the store's database in the db.system.name
	// attribute of the engine's store spans ("sqlite", "postgresql").
	TraceDBSystem string

	// Retention is how long a closed run is kept, counted from its close
	// time; then it is deleted with everything that belongs to it (see
	// Sweep). 0 keeps closed runs forever (cmd/iwf-server's default is
	// DefaultRetention).
	Retention time.Duration
	// RetentionByType overrides Retention for the workflow types it names;
	// 0 keeps the runs of that type forever.
	RetentionByType map[string]time.Duration
	// RetentionSince, when set, is when retention began to count on this
	// store: a run closed before it is kept as if it had closed at
	// RetentionSince. A store that held runs before its server deleted
	// any (a database upgraded from a release without retention) then
	// loses none of them until a whole retention after the upgrade, and
	// the start-up log can say what goes first (RetentionOutlook). Zero
	// counts every run from its close.
	RetentionSince time.Time
	// SweepInterval is how often the engine deletes expired runs. Default
	// DefaultSweepInterval.
	SweepInterval time.Duration
	// SweepBatch is the number of runs one deletion transaction takes.
	// Default DefaultSweepBatch.
	SweepBatch int
	// SweepPause is the pause between two deletion batches of a sweep.
	// Default DefaultSweepPause.
	SweepPause time.Duration
	// SweepShare bounds the share of time a sweep keeps the store busy:
	// after a batch whose store work took d, the sweep pauses at least
	// d×(1−SweepShare)/SweepShare (and at least SweepPause). On a store
	// with a single writer (SQLite) each deletion batch holds the writer,
	// so a share of 0.4 leaves live work three fifths of it. 0 means 1:
	// only SweepPause between batches (PostgreSQL's deletions do not block
	// other writers).
	SweepShare float64
	// SweepHold is how long one deletion transaction should hold the
	// writer of a store that has one (RunsDeleteTimer): the sweep deletes
	// each batch in transactions of as many runs as the store took
	// SweepHold for in the previous one, with the SweepShare pause after
	// each, so that live writes wait for a sweep at most about SweepHold at
	// a time. 0 deletes each batch in one transaction.
	SweepHold time.Duration
	// Limits are the concurrency and rate limits on worker calls (see
	// Limits) that a start stores in the store's limit table for the keys
	// it has no row of: the starting set. The limits in force are the
	// table's (limitset.go), set at run time through SetLimit and
	// DeleteLimit; with none, the engine does no work for them. They need
	// a store that keeps permits (PermitStore).
	Limits Limits
	// LimitRefresh is how often a node whose store has a change feed
	// (several nodes share it) reads the limit table without being told
	// of a change: the safety net for a lost announcement. Default
	// DefaultLimitRefresh.
	LimitRefresh time.Duration
	// OnLimits, when set, is called with the limits in force each time
	// they change on this node (their first reading at start included).
	// It must not block or call the engine. Tests use it to wait for a
	// change to be applied.
	OnLimits func(Limits)
	// StateMetricsRuns bounds the open runs, the oldest, whose live state
	// executions the gauge iwf_state_executions counts (read on a scrape,
	// at most every 30s; see statestats.go). 0 turns the gauge off.
	StateMetricsRuns int
	// Archive, when set, receives every expired run before a sweep
	// deletes it; a run whose write fails is not deleted (see Sweep).
	// nil deletes expired runs without archiving them.
	Archive Archiver

	// Payloads, when set, is the external store of big payloads (iWF's
	// external storage, see engine/payloads.go): a payload whose data is
	// longer than PayloadThreshold bytes is written to it and the rows keep
	// its reference; references are loaded for workers and API readers.
	// nil keeps every payload in the rows, and references pass as opaque
	// values.
	Payloads PayloadStore
	// PayloadThreshold is the size above which a payload goes to Payloads.
	// Default DefaultPayloadThreshold.
	PayloadThreshold int
	// PayloadGrace is how long an object written for a transaction that
	// has not committed is kept before the payload sweep deletes it.
	// Default DefaultPayloadGrace.
	PayloadGrace time.Duration
}

func (c Config) withDefaults() (Config, error) {
	if c.NodeID == "" {
		c.NodeID = uuid.NewString()
	}
	if c.MaxWait == 0 {
		c.MaxWait = DefaultMaxWait
	}
	if c.MaxWait < 0 {
		return c, fmt.Errorf("engine: MaxWait must be positive, got %s", c.MaxWait)
	}
	if c.LeaseDuration == 0 {
		c.LeaseDuration = DefaultLeaseDuration
	}
	if c.LeaseDuration < 100*time.Millisecond {
		return c, fmt.Errorf("engine: LeaseDuration must be at least 100ms, got %s", c.LeaseDuration)
	}
	if c.PollInterval == 0 {
		c.PollInterval = DefaultPollInterval
	}
	if c.PollInterval < 0 {
		return c, fmt.Errorf("engine: PollInterval must be positive, got %s", c.PollInterval)
	}
	if c.LongPollRecheck == 0 {
		c.LongPollRecheck = DefaultLongPollRecheck
	}
	if c.LongPollRecheck < 0 {
		return c, fmt.Errorf("engine: LongPollRecheck must be positive, got %s", c.LongPollRecheck)
	}
	if c.LimitRefresh == 0 {
		c.LimitRefresh = DefaultLimitRefresh
	}
	if c.LimitRefresh < 0 {
		return c, fmt.Errorf("engine: LimitRefresh must be positive, got %s", c.LimitRefresh)
	}
	if c.MaxBatchRuns == 0 {
		c.MaxBatchRuns = DefaultMaxBatchRuns
	}
	if c.MaxBatchRuns < 0 {
		return c, fmt.Errorf("engine: MaxBatchRuns must be positive, got %d", c.MaxBatchRuns)
	}
	if c.MaxSearches == 0 {
		c.MaxSearches = DefaultMaxSearches
	}
	if c.MaxSearches < 0 {
		return c, fmt.Errorf("engine: MaxSearches must be positive, got %d", c.MaxSearches)
	}
	if c.Concurrency == 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.Concurrency < 0 {
		return c, fmt.Errorf("engine: Concurrency must be positive, got %d", c.Concurrency)
	}
	if c.Clock == nil {
		c.Clock = SystemClock{}
	}
	if c.Logger == nil {
		l := zerolog.Nop()
		c.Logger = &l
	}
	if err := c.validateRetention(); err != nil {
		return c, err
	}
	if err := c.validatePayloads(); err != nil {
		return c, err
	}
	for k, t := range c.SearchAttributeTypes {
		if !t.Valid() {
			return c, fmt.Errorf("engine: search attribute %q has unknown type %q", k, t)
		}
	}
	return c, nil
}

// Clock is the engine's source of time; tests substitute a controllable one
// (iwftest.FakeClock). Everything the engine schedules — due times, timers,
// backoffs, timeouts, leases, start backpressure — reads it. Two kinds of
// durations are real time by nature and use the runtime's clock: latencies
// measured for metrics, and the wait budgets of long polls (getWithWait,
// waitForStateCompletion), which bound how long an HTTP request is held.
type Clock interface {
	Now() time.Time
	// NewTimer returns a timer that fires once after d.
	NewTimer(d time.Duration) Timer
}

// Timer is a one-shot timer of a Clock.
type Timer interface {
	C() <-chan time.Time
	Stop() bool
}

// SystemClock is the Clock of the operating system.
type SystemClock struct{}

// Now returns the current time.
func (SystemClock) Now() time.Time { return time.Now() }

// NewTimer starts a system timer.
func (SystemClock) NewTimer(d time.Duration) Timer { return sysTimer{time.NewTimer(d)} }

type sysTimer struct{ t *time.Timer }

func (s sysTimer) C() <-chan time.Time { return s.t.C }
func (s sysTimer) Stop() bool          { return s.t.Stop() }
