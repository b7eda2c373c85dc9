package upgradetest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/internal/workerclient"
)

// worker is the test's HTTP worker: it serves the three worker endpoints
// with the scenario's state and RPC handlers (states_test.go) and records
// every call it receives, so that tests can wait for a call and count them.
type worker struct {
	// generating is set in the process that writes the data: the states
	// that must have failed a few times when the data is written then fail.
	generating bool

	mu      sync.Mutex
	calls   []call
	changed chan struct{} // closed and replaced at every call
}

// call is one worker call as the worker received it.
type call struct {
	API          string // "waitUntil", "execute" or "rpc"
	WorkflowID   string
	RunID        string
	ExecutionID  string // "" for an RPC
	Name         string // state id, or RPC name
	Attempt      int32
	FirstAttempt int64 // unix seconds
	DataObjects  map[string]string
	SearchKeys   []string
	StateLocals  map[string]string
	RPC          *iwfapi.WorkflowWorkerRpcRequest
}

// String is how expectations name a call: "execute S-1" or "rpc name".
func (c call) String() string {
	if c.API == "rpc" {
		return "rpc " + c.Name
	}
	return c.API + " " + c.ExecutionID
}

func newWorker(generating bool) *worker {
	return &worker{generating: generating, changed: make(chan struct{})}
}

// ServeHTTP serves the waitUntil, execute and rpc endpoints.
func (w *worker) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	var resp any
	var status int
	var err error
	switch r.URL.Path {
	case workerclient.WaitUntilPath:
		resp, status, err = serve(w, r, waitUntilCall, w.waitUntil)
	case workerclient.ExecutePath:
		resp, status, err = serve(w, r, executeCall, w.execute)
	case workerclient.RPCPath:
		resp, status, err = serve(w, r, rpcCall, w.rpc)
	default:
		http.NotFound(rw, r)
		return
	}
	if err != nil {
		http.Error(rw, err.Error(), http.StatusBadRequest)
		return
	}
	if status != http.StatusOK {
		resp = iwfapi.WorkerErrorResponse{ErrorType: ptr("upgradetest"), Detail: ptr(fmt.Sprintf("failing on purpose (%s)", r.URL.Path))}
	}
	rw.Header().Set("Content-Type", "application/json")
	rw.WriteHeader(status)
	_ = json.NewEncoder(rw).Encode(resp)
}

// serve decodes a request, records it as a call and answers it.
func serve[Req, Resp any](w *worker, r *http.Request, record func(*Req) call, answer func(*Req) (*Resp, int)) (any, int, error) {
	var req Req
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		return nil, 0, err
	}
	w.record(record(&req))
	resp, status := answer(&req)
	return resp, status, nil
}

// stateCall is the part of a call that a state API's context tells.
func stateCall(api, stateID string, c iwfapi.Context) call {
	return call{API: api, WorkflowID: c.WorkflowId, RunID: c.WorkflowRunId, ExecutionID: deref(c.StateExecutionId),
		Name: stateID, Attempt: deref(c.Attempt), FirstAttempt: deref(c.FirstAttemptTimestamp)}
}

func waitUntilCall(req *iwfapi.WorkflowStateStartRequest) call {
	c := stateCall("waitUntil", req.WorkflowStateId, req.Context)
	c.DataObjects, c.SearchKeys = keyValues(deref(req.DataObjects)), saKeys(req.SearchAttributes)
	return c
}

func executeCall(req *iwfapi.WorkflowStateDecideRequest) call {
	c := stateCall("execute", req.WorkflowStateId, req.Context)
	c.DataObjects, c.SearchKeys = keyValues(deref(req.DataObjects)), saKeys(req.SearchAttributes)
	c.StateLocals = keyValues(deref(req.StateLocals))
	return c
}

func rpcCall(req *iwfapi.WorkflowWorkerRpcRequest) call {
	return call{API: "rpc", WorkflowID: req.Context.WorkflowId, RunID: req.Context.WorkflowRunId, Name: req.RpcName,
		DataObjects: keyValues(deref(req.DataAttributes)), SearchKeys: saKeys(req.SearchAttributes), RPC: req}
}

func saKeys(sas *[]iwfapi.SearchAttribute) []string {
	var keys []string
	for _, sa := range deref(sas) {
		keys = append(keys, deref(sa.Key))
	}
	return keys
}

func (w *worker) record(c call) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.calls = append(w.calls, c)
	close(w.changed)
	w.changed = make(chan struct{})
}

// callsOf returns the calls of one run, in arrival order.
func (w *worker) callsOf(runID string) []call {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []call
	for _, c := range w.calls {
		if c.RunID == runID {
			out = append(out, c)
		}
	}
	return out
}

// all returns every call so far.
func (w *worker) all() []call {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]call(nil), w.calls...)
}

// waitCall waits until a call that match accepts has arrived, for at most
// longPoll, and returns it.
func (w *worker) waitCall(t testing.TB, what string, match func(call) bool) call {
	t.Helper()
	deadline := time.NewTimer(longPoll)
	defer deadline.Stop()
	for {
		w.mu.Lock()
		changed := w.changed
		for _, c := range w.calls {
			if match(c) {
				w.mu.Unlock()
				return c
			}
		}
		w.mu.Unlock()
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("the worker did not receive %s within %s", what, longPoll)
		}
	}
}
