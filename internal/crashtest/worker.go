package crashtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
)

// The worker API names used in Call.API and in call counts.
const (
	WaitUntil = "waitUntil"
	Execute   = "execute"
	RPC       = "rpc"
)

// State is one workflow state of the Worker. A nil WaitUntil answers with no
// commands; a nil Execute answers 500. A function returning nil answers 500.
type State struct {
	WaitUntil func(req *iwfapi.WorkflowStateStartRequest) *iwfapi.WorkflowStateStartResponse
	Execute   func(req *iwfapi.WorkflowStateDecideRequest) *iwfapi.WorkflowStateDecideResponse
}

// Call is one call the Worker received.
type Call struct {
	// API is WaitUntil, Execute or RPC.
	API string
	// WorkflowID and RunID identify the run.
	WorkflowID, RunID string
	// StateID is the state (or the RPC name).
	StateID string
	// ExecutionID is context.stateExecutionId ("" for RPCs).
	ExecutionID string
	// Attempt is context.attempt (0 for RPCs).
	Attempt int
	// Input is the state input's data ("" when absent).
	Input string
	// Node is the NodeHeader of the call: which server made it, when the
	// servers were started with --worker-header.
	Node string
	// At is when the call arrived.
	At time.Time
	// Answered is when the worker wrote its answer (zero when it did not,
	// e.g. because the server went away while the call was held).
	Answered time.Time
}

// NodeHeader is the request header that tells the Worker which server
// process called it (Options.Args: --worker-header "X-Crashtest-Node: a").
const NodeHeader = "X-Crashtest-Node"

// Worker is a real HTTP iWF worker running in the test process. It serves
// /api/v1/workflowState/start, /api/v1/workflowState/decide and
// /api/v1/workflowWorker/rpc with the iwfapi models, dispatches to per-state
// functions, records every call, and can hold calls (see Hold) so that a test
// can kill the server while a call is in flight.
type Worker struct {
	srv *httptest.Server

	mu     sync.Mutex
	states map[string]State
	rpcs   map[string]func(*iwfapi.WorkflowWorkerRpcRequest) *iwfapi.WorkflowWorkerRpcResponse
	calls  []*Call
	holds  []*Hold
}

// NewWorker starts a worker; it stops when the test ends. Calls held at that
// time are released.
func NewWorker(t testing.TB) *Worker {
	w := &Worker{
		states: map[string]State{},
		rpcs:   map[string]func(*iwfapi.WorkflowWorkerRpcRequest) *iwfapi.WorkflowWorkerRpcResponse{},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/workflowState/start", w.serveWaitUntil)
	mux.HandleFunc("POST /api/v1/workflowState/decide", w.serveExecute)
	mux.HandleFunc("POST /api/v1/workflowWorker/rpc", w.serveRPC)
	w.srv = httptest.NewServer(mux)
	t.Cleanup(func() {
		w.mu.Lock()
		for _, h := range w.holds {
			h.Release()
		}
		w.mu.Unlock()
		w.srv.Close()
	})
	return w
}

// URL is the worker's base URL (iwfWorkerUrl).
func (w *Worker) URL() string { return w.srv.URL }

// State registers the functions of a state.
func (w *Worker) State(id string, s State) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.states[id] = s
}

// RPCHandler registers an RPC. A nil answer is a 500.
func (w *Worker) RPCHandler(name string, fn func(*iwfapi.WorkflowWorkerRpcRequest) *iwfapi.WorkflowWorkerRpcResponse) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.rpcs[name] = fn
}

// Hold is a trap for worker calls: the first N calls that match it are
// reported on Arrived and then wait, before the worker's function runs, until
// Release is called or the calling server goes away (its connection closes).
type Hold struct {
	match     func(Call) bool
	remaining int
	// Arrived receives each held call when it arrives (buffered, N entries).
	Arrived chan Call
	release chan struct{}
	once    sync.Once
}

// Hold installs a hold for the first n calls that match.
func (w *Worker) Hold(n int, match func(Call) bool) *Hold {
	h := &Hold{match: match, remaining: n, Arrived: make(chan Call, n), release: make(chan struct{})}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.holds = append(w.holds, h)
	return h
}

// Release lets the held calls (and later matching ones) proceed.
func (h *Hold) Release() { h.once.Do(func() { close(h.release) }) }

// Wait returns the next n held calls, failing the test if they do not all
// arrive within timeout.
func (h *Hold) Wait(t testing.TB, n int, timeout time.Duration) []Call {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	var got []Call
	for len(got) < n {
		select {
		case c := <-h.Arrived:
			got = append(got, c)
		case <-deadline.C:
			t.Fatalf("only %d of %d held calls arrived within %s: %+v", len(got), n, timeout, got)
		}
	}
	return got
}

// Match is a Hold matcher for one API of one state (any workflow when
// workflowID is "").
func Match(workflowID, stateID, api string) func(Call) bool {
	return func(c Call) bool {
		return c.API == api && c.StateID == stateID && (workflowID == "" || c.WorkflowID == workflowID)
	}
}

// arrive records a call and, when a hold matches, waits for its release.
// It reports false when the server went away while the call was held.
func (w *Worker) arrive(r *http.Request, c *Call) bool {
	c.At = time.Now()
	c.Node = r.Header.Get(NodeHeader)
	w.mu.Lock()
	w.calls = append(w.calls, c)
	var hold *Hold
	for _, h := range w.holds {
		if h.remaining > 0 && h.match(*c) {
			h.remaining--
			hold = h
			break
		}
	}
	w.mu.Unlock()
	if hold == nil {
		return true
	}
	hold.Arrived <- *c
	select {
	case <-hold.release:
		return true
	case <-r.Context().Done():
		return false
	}
}

func (w *Worker) answered(c *Call) {
	w.mu.Lock()
	c.Answered = time.Now()
	w.mu.Unlock()
}

func (w *Worker) serveWaitUntil(rw http.ResponseWriter, r *http.Request) {
	var req iwfapi.WorkflowStateStartRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(rw, err.Error(), http.StatusBadRequest)
		return
	}
	c := &Call{API: WaitUntil, WorkflowID: req.Context.WorkflowId, RunID: req.Context.WorkflowRunId,
		StateID: req.WorkflowStateId, ExecutionID: deref(req.Context.StateExecutionId),
		Attempt: int(deref(req.Context.Attempt)), Input: dataOf(req.StateInput)}
	if !w.arrive(r, c) {
		return
	}
	w.mu.Lock()
	fn := w.states[req.WorkflowStateId].WaitUntil
	w.mu.Unlock()
	resp := &iwfapi.WorkflowStateStartResponse{}
	if fn != nil {
		resp = fn(&req)
	}
	w.reply(rw, c, resp)
}

func (w *Worker) serveExecute(rw http.ResponseWriter, r *http.Request) {
	var req iwfapi.WorkflowStateDecideRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(rw, err.Error(), http.StatusBadRequest)
		return
	}
	c := &Call{API: Execute, WorkflowID: req.Context.WorkflowId, RunID: req.Context.WorkflowRunId,
		StateID: req.WorkflowStateId, ExecutionID: deref(req.Context.StateExecutionId),
		Attempt: int(deref(req.Context.Attempt)), Input: dataOf(req.StateInput)}
	if !w.arrive(r, c) {
		return
	}
	w.mu.Lock()
	fn := w.states[req.WorkflowStateId].Execute
	w.mu.Unlock()
	var resp *iwfapi.WorkflowStateDecideResponse
	if fn != nil {
		resp = fn(&req)
	}
	w.reply(rw, c, resp)
}

func (w *Worker) serveRPC(rw http.ResponseWriter, r *http.Request) {
	var req iwfapi.WorkflowWorkerRpcRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(rw, err.Error(), http.StatusBadRequest)
		return
	}
	c := &Call{API: RPC, WorkflowID: req.Context.WorkflowId, RunID: req.Context.WorkflowRunId,
		StateID: req.RpcName, Input: dataOf(req.Input)}
	if !w.arrive(r, c) {
		return
	}
	w.mu.Lock()
	fn := w.rpcs[req.RpcName]
	w.mu.Unlock()
	var resp *iwfapi.WorkflowWorkerRpcResponse
	if fn != nil {
		resp = fn(&req)
	}
	w.reply(rw, c, resp)
}

// reply writes a JSON answer, or a 500 worker error when v is a nil pointer.
func (w *Worker) reply(rw http.ResponseWriter, c *Call, v any) {
	rw.Header().Set("Content-Type", "application/json")
	body, _ := json.Marshal(v)
	if string(body) == "null" {
		rw.WriteHeader(http.StatusInternalServerError)
		body, _ = json.Marshal(iwfapi.WorkerErrorResponse{Detail: ptr(fmt.Sprintf("no %s answer for %s", c.API, c.StateID))})
	}
	_, _ = rw.Write(body)
	w.answered(c)
}

// Calls returns the calls that match (all when match is nil), in arrival
// order.
func (w *Worker) Calls(match func(Call) bool) []Call {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []Call
	for _, c := range w.calls {
		if match == nil || match(*c) {
			out = append(out, *c)
		}
	}
	return out
}

// Count is the number of calls of one API of one state in one workflow (any
// workflow when workflowID is "").
func (w *Worker) Count(workflowID, stateID, api string) int {
	return len(w.Calls(Match(workflowID, stateID, api)))
}

// Counter reads the integer data attribute key from a worker request's data
// attributes; an absent key reads 0.
func Counter(objs *[]iwfapi.KeyValue, key string) int {
	if objs == nil {
		return 0
	}
	for _, kv := range *objs {
		if deref(kv.Key) == key {
			n, _ := strconv.Atoi(dataOf(kv.Value))
			return n
		}
	}
	return 0
}

// Incr returns the upsert that sets the counter key to its value in objs
// plus one. A worker answer carrying it that the server applied twice (the
// second time after a repeated call) would leave the counter one too high.
func Incr(objs *[]iwfapi.KeyValue, key string) iwfapi.KeyValue {
	return iwfapi.KeyValue{Key: ptr(key), Value: Object(strconv.Itoa(Counter(objs, key) + 1))}
}

// Object is an EncodedObject with json encoding and the given data.
func Object(data string) *iwfapi.EncodedObject {
	return &iwfapi.EncodedObject{Encoding: ptr("json"), Data: ptr(data)}
}

// dataOf is the data of an EncodedObject ("" for nil).
func dataOf(o *iwfapi.EncodedObject) string {
	if o == nil {
		return ""
	}
	return deref(o.Data)
}

func ptr[T any](v T) *T { return &v }

func deref[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}
