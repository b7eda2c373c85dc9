package iwftest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/server"
	"github.com/iwf-server/iwf-server/internal/store/sqlite"
	"github.com/iwf-server/iwf-server/sdk-go/iwf"
	"github.com/iwf-server/iwf-server/search"
)

// DefaultTimeout is how long, in real time, Advance, WaitIdle and
// WaitForCompletion (given a context without a deadline) wait for the
// engine by default; see WithTimeout.
const DefaultTimeout = time.Minute

// Option configures New.
type Option func(*options)

type options struct {
	fake          bool
	start         time.Time
	timeout       time.Duration
	encoder       iwf.ObjectEncoder
	searchAttrs   map[string]string
	logEngineInfo bool
}

// WithFakeClock runs the engine on a FakeClock that starts at
// 2025-01-01 00:00:00 UTC and moves only with Env.Advance. Durable timers,
// retry backoffs, workflow timeouts and start delays then wait for Advance
// instead of real time.
func WithFakeClock() Option {
	return func(o *options) { o.fake, o.start = true, defaultStart }
}

// WithFakeClockAt is WithFakeClock starting at start.
func WithFakeClockAt(start time.Time) Option {
	return func(o *options) { o.fake, o.start = true, start }
}

// WithTimeout sets how long, in real time, Advance and WaitIdle wait for
// the engine to finish the work that is due, and how long WaitForCompletion
// waits when its context has no deadline. Default DefaultTimeout.
func WithTimeout(d time.Duration) Option {
	return func(o *options) { o.timeout = d }
}

// WithObjectEncoder sets the ObjectEncoder of both the worker and the
// client (default iwf.JSONObjectEncoder).
func WithObjectEncoder(enc iwf.ObjectEncoder) Option {
	return func(o *options) { o.encoder = enc }
}

// WithSearchAttributes declares the server's search attributes (name to
// type: KEYWORD, TEXT, DATETIME, INT, DOUBLE, BOOL, KEYWORD_ARRAY), as the
// server's search-attributes setting does. Without it any key is accepted.
func WithSearchAttributes(types map[string]string) Option {
	return func(o *options) { o.searchAttrs = types }
}

// Env is a workflow server and a worker running inside a test: the real
// engine on a temporary SQLite file, the real REST API and the worker of
// the registry, each on a loopback port. New starts it; t.Cleanup stops it.
// Its methods are safe for concurrent use, but those that fail the test
// (Advance, WaitIdle) must be called from the test's goroutine.
type Env struct {
	t       testing.TB
	opts    options
	fake    *FakeClock // nil with the real clock
	clock   engine.Clock
	store   *observedStore
	eng     *engine.Engine
	api     *httptest.Server
	worker  *httptest.Server
	client  *iwf.Client
	advance sync.Mutex // serialises Advance
}

// New starts an Env serving the workflows of registry and registers its
// shutdown with t.Cleanup. It fails the test if anything cannot start.
func New(t testing.TB, registry *iwf.Registry, opts ...Option) *Env {
	t.Helper()
	e := &Env{t: t, opts: options{timeout: DefaultTimeout}}
	for _, o := range opts {
		o(&e.opts)
	}
	e.clock = engine.SystemClock{}
	var engineClk engine.Clock = engine.SystemClock{}
	if e.opts.fake {
		// On whole milliseconds, like the store: see observedStore.
		e.fake = NewFakeClock(ceilMillis(e.opts.start))
		e.clock, engineClk = e.fake, engineClock{e.fake}
	}
	logs := &testLog{t: t}
	// Registered first so that it runs last: nothing logs after the test.
	t.Cleanup(logs.close)

	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "iwf.db"))
	if err != nil {
		t.Fatalf("iwftest: open the store: %v", err)
	}
	if err := st.Migrate(ctx); err != nil {
		st.Close()
		t.Fatalf("iwftest: migrate the store: %v", err)
	}
	e.store = newObservedStore(st, e.fake != nil)
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("iwftest: close the store: %v", err)
		}
	})

	// The worker: the user's workflows, served like in production.
	e.worker = httptest.NewServer(iwf.NewWorkerService(registry, &iwf.WorkerOptions{
		ObjectEncoder: e.opts.encoder,
		Logger:        slog.New(slog.NewTextHandler(logs, nil)),
	}))
	t.Cleanup(e.worker.Close) // after the engine has stopped calling it

	logger := zerolog.New(zerolog.ConsoleWriter{Out: logs, NoColor: true, TimeFormat: time.TimeOnly}).
		Level(zerolog.WarnLevel).With().Timestamp().Logger()
	srv, err := server.New(e.store, server.Options{
		Engine: engine.Config{
			Clock:                engineClk,
			ReleaseLeasesOnStart: true,
			SearchAttributeTypes: searchTypes(e.opts.searchAttrs),
		},
		Logger: &logger,
	})
	if err != nil {
		t.Fatalf("iwftest: %v", err)
	}
	e.eng = srv.Engine
	if err := srv.Start(ctx); err != nil {
		t.Fatalf("iwftest: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Close(ctx); err != nil {
			t.Errorf("iwftest: stop the engine: %v", err)
		}
	})
	handler := srv.Handler
	e.api = httptest.NewServer(handler)
	t.Cleanup(func() {
		// Long polls would hold Close for up to a minute: cut them.
		e.api.CloseClientConnections()
		e.api.Close()
	})

	e.client, err = iwf.NewClient(e.api.URL, &iwf.ClientOptions{WorkerURL: e.worker.URL, ObjectEncoder: e.opts.encoder})
	if err != nil {
		t.Fatalf("iwftest: %v", err)
	}
	return e
}

// Client returns a client of the Env's server whose workflows are run by
// the Env's worker.
func (e *Env) Client() *iwf.Client { return e.client }

// ServerURL is the base URL of the Env's REST API, for clients of other
// SDKs or plain HTTP calls.
func (e *Env) ServerURL() string { return e.api.URL }

// WorkerURL is the base URL of the Env's worker.
func (e *Env) WorkerURL() string { return e.worker.URL }

// Clock returns the engine's clock: a *FakeClock with WithFakeClock,
// engine.SystemClock otherwise.
func (e *Env) Clock() engine.Clock { return e.clock }

// Now returns the engine's current time.
func (e *Env) Now() time.Time { return e.clock.Now() }

// Advance moves the fake clock forward by d as if d had passed, and
// returns when the engine has done everything that came due. It fails the
// test without WithFakeClock.
//
// Precisely: Advance first waits until the engine is idle (WaitIdle), so
// that the timers the workflows are about to start are started. Then it
// moves the clock to the next moment within d at which engine work falls
// due (a durable timer, a retry backoff, a workflow timeout, a delayed
// start) and waits until the engine is idle again, and repeats; finally it
// moves the clock to its old time plus d. Work done at each step sees that
// step's time, so chained timers fire in order and at their times: a
// workflow that sleeps 24 hours has completed when Advance(24*time.Hour)
// returns, and one that sleeps an hour 24 times has looped 24 times. A
// workflow whose timeout falls within d times out. While the engine works
// at one step the clock stands still.
func (e *Env) Advance(d time.Duration) {
	e.t.Helper()
	if e.fake == nil {
		e.t.Fatalf("iwftest: Advance needs the fake clock (iwftest.WithFakeClock)")
	}
	if d < 0 {
		e.t.Fatalf("iwftest: Advance(%s): time does not go backwards", d)
	}
	e.advance.Lock()
	defer e.advance.Unlock()
	target := ceilMillis(e.fake.Now().Add(d))
	for {
		next, err := e.settle()
		if err != nil {
			e.t.Fatalf("iwftest: Advance(%s): %v", d, err)
		}
		if next.IsZero() || next.After(target) {
			break
		}
		e.fake.AdvanceTo(next)
		e.fake.wakeEngine()
	}
	e.fake.AdvanceTo(target)
	e.fake.wakeEngine()
	if _, err := e.settle(); err != nil {
		e.t.Fatalf("iwftest: Advance(%s): %v", d, err)
	}
}

// WaitIdle waits until the engine has done all the work that is due now:
// the state API calls and their retries that are due, fired timers, and
// whatever they cause. Afterwards every workflow is waiting for time to pass
// (a timer, a backoff) or for an input (a signal, an RPC), or has closed.
// It fails the test if the engine is still busy after the timeout
// (WithTimeout).
//
// Use it before reading what a workflow has done so far, e.g. its data
// attributes, or after a signal whose effect a test checks without
// waiting for the workflow to close.
func (e *Env) WaitIdle() {
	e.t.Helper()
	if _, err := e.settle(); err != nil {
		e.t.Fatalf("iwftest: WaitIdle: %v", err)
	}
}

// WaitForCompletion waits until the current run of workflowID has closed
// and returns how it ended: iwf.StatusCompleted, StatusFailed,
// StatusTimeout, StatusCanceled or StatusTerminated. The error is set only
// when it could not wait: ctx ended (if ctx has no deadline, the Env's
// timeout applies), or the workflow does not exist. It does not move the
// fake clock. For a workflow's results use iwf.GetSimpleWorkflowResult or
// Client.GetWorkflowResults.
func (e *Env) WaitForCompletion(ctx context.Context, workflowID string) (iwf.WorkflowStatus, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, e.opts.timeout)
		defer cancel()
	}
	_, err := e.client.GetWorkflowResults(ctx, workflowID, "")
	var abnormal *iwf.WorkflowAbnormalExitError
	switch {
	case err == nil:
		return iwf.StatusCompleted, nil
	case errors.As(err, &abnormal):
		return abnormal.Status, nil
	}
	return "", err
}

// settle waits until no task is due, that is due at or before the clock,
// and returns when the next one falls due (zero if there is none). It waits
// on the engine's own idle signal (engine.WaitIdle), then reads the store's
// tasks once to find the next due time.
func (e *Env) settle() (time.Time, error) {
	ctx, cancel := context.WithTimeout(context.Background(), e.opts.timeout)
	defer cancel()
	for {
		if err := e.eng.WaitIdle(ctx); err != nil {
			tasks, _ := e.store.tasks(context.Background())
			return time.Time{}, fmt.Errorf("the engine is still busy after %s: %s", e.opts.timeout, describe(dueTasks(tasks, e.clock.Now())))
		}
		tasks, err := e.store.tasks(ctx)
		if err != nil {
			return time.Time{}, fmt.Errorf("listing the engine's tasks: %w", err)
		}
		now := e.clock.Now()
		if len(dueTasks(tasks, now)) > 0 {
			// Committed between the engine's check and this read: wait
			// for the engine again.
			continue
		}
		var next time.Time
		for _, t := range tasks {
			if next.IsZero() || t.DueAt.Before(next) {
				next = t.DueAt
			}
		}
		return next, nil
	}
}

// dueTasks returns the tasks due at or before now.
func dueTasks(tasks []*engine.Task, now time.Time) []*engine.Task {
	var due []*engine.Task
	for _, t := range tasks {
		if !t.DueAt.After(now) {
			due = append(due, t)
		}
	}
	return due
}

// describe lists tasks for an error message.
func describe(tasks []*engine.Task) string {
	var parts []string
	for _, t := range tasks {
		what := string(t.Kind)
		if t.ExecutionID != "" {
			what += " " + t.ExecutionID
		}
		parts = append(parts, fmt.Sprintf("%s of workflow %s (attempt %d, due %s)", what, t.WorkflowID, t.Attempt, t.DueAt.Format(time.RFC3339Nano)))
	}
	slices.Sort(parts)
	return strings.Join(parts, "; ")
}

// testLog writes the engine's and the worker's logs to the test log until
// the test ends.
type testLog struct {
	mu     sync.Mutex
	t      testing.TB
	closed bool
}

var _ io.Writer = (*testLog)(nil)

func (l *testLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		l.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func (l *testLog) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
}

// searchTypes converts WithSearchAttributes' declarations.
func searchTypes(m map[string]string) map[string]search.ValueType {
	if m == nil {
		return nil
	}
	out := make(map[string]search.ValueType, len(m))
	for k, v := range m {
		out[k] = search.ValueType(v)
	}
	return out
}
