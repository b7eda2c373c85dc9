package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/store/postgres/pgtest"
	"github.com/iwf-server/iwf-server/internal/store/sqlite"
	"github.com/iwf-server/iwf-server/internal/workerclient"
)

// forEachStore runs a test against the engine on SQLite and on PostgreSQL.
func forEachStore(t *testing.T, fn func(t *testing.T, h *harness)) {
	forEachStoreWith(t, nil, fn)
}

// forEachStoreWith is forEachStore with the engine's configuration changed
// by mod.
func forEachStoreWith(t *testing.T, mod func(*engine.Config), fn func(t *testing.T, h *harness)) {
	forEachStoreWithT(t, func(_ *testing.T, c *engine.Config) {
		if mod != nil {
			mod(c)
		}
	}, fn)
}

// forEachStoreWithT is forEachStoreWith with a mod that is given the
// store's subtest.
func forEachStoreWithT(t *testing.T, mod func(*testing.T, *engine.Config), fn func(t *testing.T, h *harness)) {
	forEachStoreOpen(t, func(t *testing.T, st engine.Store) {
		fn(t, newHarness(t, st, func(c *engine.Config) { mod(t, c) }))
	})
}

// forEachStoreOpen runs fn in parallel subtests on a migrated SQLite store
// and a PostgreSQL one.
func forEachStoreOpen(t *testing.T, fn func(t *testing.T, st engine.Store)) {
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "iwf.db")
		st, err := sqlite.Open(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Migrate(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		fn(t, st)
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		fn(t, pgtest.NewStore(t))
	})
}

// harness is an engine on a real store plus a real HTTP test worker.
type harness struct {
	t      *testing.T
	eng    *engine.Engine
	store  engine.Store
	worker *testWorker
	clock  engine.Clock // the engine's clock as configured (nil: the system's)
}

func newHarness(t *testing.T, st engine.Store, mods ...func(*engine.Config)) *harness {
	t.Helper()
	return newHarnessOn(t, st, newTestWorker(t), mods...)
}

// newHarnessOn starts an engine (another node) on st with worker w.
func newHarnessOn(t *testing.T, st engine.Store, w *testWorker, mods ...func(*engine.Config)) *harness {
	t.Helper()
	logger := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	cfg := engine.Config{
		WorkerClient:  workerclient.New(nil),
		PollInterval:  50 * time.Millisecond,
		LeaseDuration: 10 * time.Second, // no test here needs a lease to expire
		MaxWait:       20 * time.Second,
		Concurrency:   32,
		Logger:        &logger,
	}
	for _, mod := range mods {
		if mod != nil {
			mod(&cfg)
		}
	}
	eng, err := engine.New(st, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		eng.Close(ctx)
	})
	return &harness{t: t, eng: eng, store: st, worker: w, clock: cfg.Clock}
}

// stateHandlers are one state's worker callbacks. A nil WaitUntil answers
// with no commands.
type stateHandlers struct {
	WaitUntil func(req iwfapi.WorkflowStateStartRequest) (iwfapi.WorkflowStateStartResponse, int)
	Execute   func(req iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int)
}

// testWorker is a real HTTP worker that dispatches to per-state handlers of
// the test and counts calls per "<state>.<api>".
type testWorker struct {
	srv    *httptest.Server
	mu     sync.Mutex
	states map[string]stateHandlers
	rpcs   map[string]func(iwfapi.WorkflowWorkerRpcRequest) (iwfapi.WorkflowWorkerRpcResponse, int)
	calls  map[string]int
	// headers are added to the answers of "<state>.<api>".
	headers map[string]http.Header
}

func newTestWorker(t *testing.T) *testWorker {
	w := &testWorker{states: map[string]stateHandlers{}, calls: map[string]int{}, rpcs: map[string]func(iwfapi.WorkflowWorkerRpcRequest) (iwfapi.WorkflowWorkerRpcResponse, int){}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/workflowState/start", func(rw http.ResponseWriter, r *http.Request) {
		var req iwfapi.WorkflowStateStartRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(rw, err.Error(), 400)
			return
		}
		h := w.handlers(req.WorkflowStateId, "waitUntil")
		if h.WaitUntil == nil {
			writeJSON(rw, 200, iwfapi.WorkflowStateStartResponse{})
			return
		}
		resp, code := h.WaitUntil(req)
		w.addHeaders(rw, req.WorkflowStateId+".waitUntil")
		writeJSON(rw, code, resp)
	})
	mux.HandleFunc("POST /api/v1/workflowState/decide", func(rw http.ResponseWriter, r *http.Request) {
		var req iwfapi.WorkflowStateDecideRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(rw, err.Error(), 400)
			return
		}
		h := w.handlers(req.WorkflowStateId, "execute")
		if h.Execute == nil {
			writeJSON(rw, 500, iwfapi.WorkerErrorResponse{Detail: ptr("no execute for " + req.WorkflowStateId)})
			return
		}
		resp, code := h.Execute(req)
		w.addHeaders(rw, req.WorkflowStateId+".execute")
		writeJSON(rw, code, resp)
	})
	mux.HandleFunc("POST /api/v1/workflowWorker/rpc", func(rw http.ResponseWriter, r *http.Request) {
		var req iwfapi.WorkflowWorkerRpcRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(rw, err.Error(), 400)
			return
		}
		w.mu.Lock()
		w.calls[req.RpcName+".rpc"]++
		h := w.rpcs[req.RpcName]
		w.mu.Unlock()
		if h == nil {
			writeJSON(rw, 404, iwfapi.WorkerErrorResponse{Detail: ptr("no rpc " + req.RpcName)})
			return
		}
		resp, code := h(req)
		writeJSON(rw, code, resp)
	})
	w.srv = httptest.NewServer(mux)
	t.Cleanup(w.srv.Close)
	return w
}

func (w *testWorker) handlers(stateID, api string) stateHandlers {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.calls[stateID+"."+api]++
	return w.states[stateID]
}

// setHeaders adds h to every answer of key ("<state>.<api>").
func (w *testWorker) setHeaders(key string, h http.Header) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.headers == nil {
		w.headers = map[string]http.Header{}
	}
	w.headers[key] = h
}

func (w *testWorker) addHeaders(rw http.ResponseWriter, key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for k, vs := range w.headers[key] {
		rw.Header()[k] = vs
	}
}

func (w *testWorker) state(id string, h stateHandlers) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.states[id] = h
}

func (w *testWorker) rpc(name string, h func(iwfapi.WorkflowWorkerRpcRequest) (iwfapi.WorkflowWorkerRpcResponse, int)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.rpcs[name] = h
}

func (w *testWorker) count(key string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.calls[key]
}

func writeJSON(rw http.ResponseWriter, code int, v any) {
	rw.Header().Set("Content-Type", "application/json")
	rw.WriteHeader(code)
	json.NewEncoder(rw).Encode(v)
}

func ptr[T any](v T) *T { return &v }

func obj(s string) *iwfapi.EncodedObject {
	return &iwfapi.EncodedObject{Encoding: ptr("json"), Data: ptr(s)}
}

// start starts a workflow with the test worker and returns its run id.
func (h *harness) start(id, startState string, input *iwfapi.EncodedObject, mod ...func(*iwfapi.WorkflowStartRequest)) string {
	h.t.Helper()
	req := iwfapi.WorkflowStartRequest{
		WorkflowId: id, IwfWorkflowType: "TestWorkflow", IwfWorkerUrl: h.worker.srv.URL,
		WorkflowTimeoutSeconds: 60, StateInput: input,
	}
	if startState != "" {
		req.StartStateId = ptr(startState)
	}
	for _, m := range mod {
		m(&req)
	}
	resp, err := h.eng.StartWorkflow(context.Background(), req)
	if err != nil {
		h.t.Fatalf("start %s: %v", id, err)
	}
	return *resp.WorkflowRunId
}

// result waits for the workflow to close and returns getWithWait's answer.
// A long poll that runs out is asked again, as a client does, until a
// failure deadline of two minutes: on a loaded machine a workflow may take
// longer than one poll's budget.
func (h *harness) result(id string) iwfapi.WorkflowGetResponse {
	h.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		resp, err := h.eng.GetWorkflowWithWait(context.Background(), iwfapi.WorkflowGetRequest{WorkflowId: id})
		var ee *engine.Error
		if errors.As(err, &ee) && ee.Code == engine.CodeLongPollTimeout && time.Now().Before(deadline) {
			continue
		}
		if err != nil {
			h.t.Fatalf("getWithWait %s: %v", id, err)
		}
		return resp
	}
}

// idle waits until the harness's engine has nothing left to do now
// (engine.WaitIdle), failing the test after a minute.
func (h *harness) idle() {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := h.eng.WaitIdle(ctx); err != nil {
		h.t.Fatalf("the engine is still busy: %v", err)
	}
}

// eventually polls cond until it holds, failing the test after a minute.
func (h *harness) eventually(what string, cond func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			h.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// idleMetrics returns the engine's metrics once the tasks it is running
// are done (WaitIdle): what they did is counted by then.
func (h *harness) idleMetrics() string {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := h.eng.WaitIdle(ctx); err != nil {
		h.t.Fatal(err)
	}
	var b strings.Builder
	if err := h.eng.WriteMetrics(&b); err != nil {
		h.t.Fatal(err)
	}
	return b.String()
}

func (h *harness) status(id string) iwfapi.WorkflowStatus {
	h.t.Helper()
	resp, err := h.eng.GetWorkflow(context.Background(), iwfapi.WorkflowGetRequest{WorkflowId: id})
	if err != nil {
		h.t.Fatalf("get %s: %v", id, err)
	}
	return resp.WorkflowStatus
}

func next(stateID string, input *iwfapi.EncodedObject, opts ...func(*iwfapi.StateMovement)) iwfapi.StateMovement {
	m := iwfapi.StateMovement{StateId: stateID, StateInput: input}
	for _, o := range opts {
		o(&m)
	}
	return m
}

func decide(moves ...iwfapi.StateMovement) iwfapi.WorkflowStateDecideResponse {
	return iwfapi.WorkflowStateDecideResponse{StateDecision: &iwfapi.StateDecision{NextStates: &moves}}
}

func skipWaitUntil(m *iwfapi.StateMovement) {
	m.StateOptions = &iwfapi.WorkflowStateOptions{SkipWaitUntil: ptr(true)}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprint(err))
	}
	return string(b)
}

func deref[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}

func mustUnmarshal(t *testing.T, s string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(s), v); err != nil {
		t.Fatalf("unmarshal %q: %v", s, err)
	}
}

func errorsAs(err error, target any) bool { return errors.As(err, target) }
