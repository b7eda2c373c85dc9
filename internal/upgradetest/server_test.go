package upgradetest

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/httpapi"
	"github.com/iwf-server/iwf-server/internal/workerclient"
)

// workerURL is the worker URL that every workflow of the scenario stores.
// No such host exists: routedWorker sends its calls to the live test worker.
const workerURL = "http://upgrade-worker.test"

// store is what the stack needs from either store.
type store interface {
	engine.Store
	Migrate(ctx context.Context) error
}

// routedWorker is the engine's HTTP worker client with workerURL mapped to
// the base URL of the test's worker.
type routedWorker struct {
	next *workerclient.Client
	to   string
}

var _ engine.WorkerClient = routedWorker{}

func (r routedWorker) route(base string) string {
	if base == workerURL {
		return r.to
	}
	return base
}

// WaitUntil calls the live worker's waitUntil endpoint.
func (r routedWorker) WaitUntil(ctx context.Context, base string, req *iwfapi.WorkflowStateStartRequest) (*iwfapi.WorkflowStateStartResponse, error) {
	return r.next.WaitUntil(ctx, r.route(base), req)
}

// Execute calls the live worker's execute endpoint.
func (r routedWorker) Execute(ctx context.Context, base string, req *iwfapi.WorkflowStateDecideRequest) (*iwfapi.WorkflowStateDecideResponse, error) {
	return r.next.Execute(ctx, r.route(base), req)
}

// RPC calls the live worker's rpc endpoint.
func (r routedWorker) RPC(ctx context.Context, base string, req *iwfapi.WorkflowWorkerRpcRequest) (*iwfapi.WorkflowWorkerRpcResponse, error) {
	return r.next.RPC(ctx, r.route(base), req)
}

// laterClock is the system clock moved forward: an engine on it runs as if
// it had started that much later.
type laterClock struct {
	engine.SystemClock
	by time.Duration
}

// Now returns the system time plus the offset.
func (c laterClock) Now() time.Time { return time.Now().Add(c.by) }

// stack is one server assembled in process as cmd/iwf-server does it (a
// migrated store, the engine, the REST API) plus the test worker.
type stack struct {
	t      testing.TB
	store  store
	engine *engine.Engine
	server *httptest.Server
	api    *client
	worker *worker
	wsrv   *httptest.Server
	closed bool
}

// newStack migrates st and serves the REST API of an engine on it, with
// the test worker. cfg sets the engine's node id, clock and lease duration;
// newStack sets the rest. The engine does no background work (no worker
// calls, timers or retries) until startEngine: API calls that only read, or
// that fail, see the stored data as it is. Stop (or the test's cleanup)
// shuts everything down and closes st.
func newStack(t testing.TB, st store, w *worker, cfg engine.Config) *stack {
	t.Helper()
	ctx := context.Background()
	if err := st.Migrate(ctx); err != nil {
		st.Close()
		t.Fatalf("migrate: %v", err)
	}
	s := &stack{t: t, store: st, worker: w, wsrv: httptest.NewServer(w)}
	t.Cleanup(s.stop)
	logger := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel).With().Timestamp().Logger()
	cfg.WorkerClient = routedWorker{next: workerclient.New(nil), to: s.wsrv.URL}
	cfg.Logger = &logger
	// Leases of the process that wrote the data must not hold its work
	// back.
	cfg.ReleaseLeasesOnStart = true
	eng, err := engine.New(st, cfg)
	if err != nil {
		t.Fatalf("engine: %v", err)
	}
	s.engine = eng
	handler, err := httpapi.NewHandler(eng, httpapi.Options{Logger: logger})
	if err != nil {
		t.Fatalf("httpapi: %v", err)
	}
	s.server = httptest.NewServer(handler)
	s.api = &client{t: t, url: s.server.URL}
	return s
}

// startEngine starts the engine's background work: the stored tasks that
// are due run at once.
func (s *stack) startEngine() {
	s.t.Helper()
	if err := s.engine.Start(context.Background()); err != nil {
		s.t.Fatalf("start engine: %v", err)
	}
}

// stop shuts the stack down cleanly: the API first, then the engine (its
// unfinished tasks stay in the store), then the store and the worker. It
// may be called more than once.
func (s *stack) stop() {
	if s.closed {
		return
	}
	s.closed = true
	if s.server != nil {
		s.server.CloseClientConnections() // long polls
		s.server.Close()
	}
	if s.engine != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := s.engine.Close(ctx); err != nil {
			s.t.Errorf("close engine: %v", err)
		}
		cancel()
	}
	if err := s.store.Close(); err != nil {
		s.t.Errorf("close store: %v", err)
	}
	s.wsrv.CloseClientConnections()
	s.wsrv.Close()
}
