package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
)

// The workflow types and states of the workloads.
const (
	typeW1 = "BenchW1" // S1 -> S2 -> graceful completion, no waitUntil
	typeW2 = "BenchW2" // S1 waits for signal "go", then completes
	typeW3 = "BenchW3" // S1 waits for a durable timer, then completes
	typeW4 = "BenchW4" // as W3, on W4's (long) timer
	typeW5 = "BenchW5" // W5's preloaded runs: W1's shape, with search attributes
	typeW6 = "BenchW6" // W1's shape, each state upserting a 1 MiB data attribute

	stateS1 = "S1"
	stateS2 = "S2"

	// signalChannel is the channel W2's S1 waits on.
	signalChannel = "go"
	// gracefulComplete is iWF's reserved state that completes a workflow.
	gracefulComplete = "_SYS_GRACEFUL_COMPLETING_WORKFLOW"
)

// flight is the worker's record of one workflow the generator started. The
// generator registers it before the start call; the worker fills it in.
type flight struct {
	// start is when the generator began the start call.
	start time.Time
	// due is when W3's timer is due: the time the worker answered waitUntil
	// plus the timer duration, as nanoseconds since epoch (0: not yet).
	due atomic.Int64
	// end is when the final execute call arrived at the worker; valid once
	// done is closed.
	end  time.Time
	once sync.Once
	done chan struct{}
	// waited is closed when the worker answered the first waitUntil call.
	waited     chan struct{}
	waitedOnce sync.Once
	// calls, when set (the breakdown run only), records every worker call.
	calls *callLog
}

func newFlight() *flight { return &flight{done: make(chan struct{}), waited: make(chan struct{})} }

// answeredWaitUntil records that the worker answered waitUntil.
func (f *flight) answeredWaitUntil() { f.waitedOnce.Do(func() { close(f.waited) }) }

// epoch is the origin of flight.due; time.Since keeps the monotonic clock.
var epoch = time.Now()

// setDue records the timer's due time. A retried waitUntil (its first
// answer was lost) overwrites it: the server applies the answer it got.
func (f *flight) setDue(t time.Time) { f.due.Store(int64(t.Sub(epoch))) }

// dueTime returns the timer's due time and whether it was recorded.
func (f *flight) dueTime() (time.Time, bool) {
	n := f.due.Load()
	return epoch.Add(time.Duration(n)), n != 0
}

// finish records the arrival of the final execute call. Repeated calls (a
// retried execute) keep the first arrival.
func (f *flight) finish(at time.Time) {
	f.once.Do(func() {
		f.end = at
		close(f.done)
	})
}

// worker is the in-process iWF worker: the waitUntil and execute endpoints
// of the three workloads. Its answers are fixed and encoded once, so that
// the worker costs little next to the server.
type worker struct {
	url  string
	srv  *http.Server
	ln   net.Listener
	timr time.Duration // W3's timer duration
	tmr4 time.Duration // W4's timer duration

	flights sync.Map // workflow id -> *flight

	waitUntilCalls, executeCalls, retries, unknown atomic.Int64

	w1S1, complete, w2Wait, w3Wait, w4Wait []byte
	// W6's execute answers, each with a 1 MiB data attribute.
	w6S1, w6S2 []byte
}

// startWorker listens on a free loopback port and serves the worker API.
func startWorker(timer, timerW4 time.Duration) (*worker, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	w := &worker{ln: ln, url: "http://" + ln.Addr().String(), timr: timer, tmr4: timerW4}
	skip := &iwfapi.WorkflowStateOptions{SkipWaitUntil: ptr(true)}
	w.w1S1 = mustJSON(iwfapi.WorkflowStateDecideResponse{StateDecision: &iwfapi.StateDecision{
		NextStates: &[]iwfapi.StateMovement{{StateId: stateS2, StateOptions: skip}},
	}})
	w.complete = mustJSON(iwfapi.WorkflowStateDecideResponse{StateDecision: &iwfapi.StateDecision{
		NextStates: &[]iwfapi.StateMovement{{StateId: gracefulComplete}},
	}})
	all := iwfapi.CommandWaitingTypeAllCompleted
	w.w2Wait = mustJSON(iwfapi.WorkflowStateStartResponse{CommandRequest: &iwfapi.CommandRequest{
		CommandWaitingType: &all,
		SignalCommands:     &[]iwfapi.SignalCommand{{CommandId: ptr("go"), SignalChannelName: signalChannel}},
	}})
	w.w3Wait = mustJSON(iwfapi.WorkflowStateStartResponse{CommandRequest: &iwfapi.CommandRequest{
		CommandWaitingType: &all,
		TimerCommands:      &[]iwfapi.TimerCommand{{CommandId: ptr("t"), DurationSeconds: ptr(int64(timer / time.Second))}},
	}})
	w.w4Wait = mustJSON(iwfapi.WorkflowStateStartResponse{CommandRequest: &iwfapi.CommandRequest{
		CommandWaitingType: &all,
		TimerCommands:      &[]iwfapi.TimerCommand{{CommandId: ptr("t"), DurationSeconds: ptr(int64(timerW4 / time.Second))}},
	}})

	w.w6S1, w.w6S2 = w6Answers()

	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/workflowState/start", w.waitUntil)
	mux.HandleFunc("POST /api/v1/workflowState/decide", w.execute)
	w.srv = &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       5 * time.Minute, // keep the server's connections warm between runs
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          log.New(io.Discard, "", 0),
	}
	go func() { _ = w.srv.Serve(ln) }()
	return w, nil
}

// close stops the worker.
func (w *worker) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := w.srv.Shutdown(ctx); err != nil {
		_ = w.srv.Close()
	}
}

// register records a workflow the generator is about to start.
func (w *worker) register(id string, f *flight) { w.flights.Store(id, f) }

// forget drops a workflow's record.
func (w *worker) forget(id string) { w.flights.Delete(id) }

func (w *worker) lookup(id string) *flight {
	if v, ok := w.flights.Load(id); ok {
		return v.(*flight)
	}
	return nil
}

func (w *worker) waitUntil(rw http.ResponseWriter, r *http.Request) {
	arrived := time.Now()
	w.waitUntilCalls.Add(1)
	var req iwfapi.WorkflowStateStartRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(rw, err.Error(), http.StatusBadRequest)
		return
	}
	if a := req.Context.Attempt; a != nil && *a > 1 {
		w.retries.Add(1)
	}
	var body []byte
	f := w.lookup(req.Context.WorkflowId)
	if f != nil && f.calls != nil {
		defer f.calls.add("waitUntil", req.WorkflowStateId, r, arrived)
	}
	switch req.WorkflowType {
	case typeW2:
		body = w.w2Wait
	case typeW3, typeW4:
		timer := w.timr
		body = w.w3Wait
		if req.WorkflowType == typeW4 {
			body, timer = w.w4Wait, w.tmr4
		}
		if f != nil {
			// The answer time: the server starts the timer when it applies
			// this answer, a moment later.
			f.setDue(time.Now().Add(timer))
		}
		writeJSON(rw, body)
		return
	default:
		w.unknown.Add(1)
		http.Error(rw, "unexpected waitUntil", http.StatusBadRequest)
		return
	}
	writeJSON(rw, body)
	if f != nil {
		f.answeredWaitUntil()
	}
}

func (w *worker) execute(rw http.ResponseWriter, r *http.Request) {
	arrived := time.Now()
	w.executeCalls.Add(1)
	var req iwfapi.WorkflowStateDecideRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(rw, err.Error(), http.StatusBadRequest)
		return
	}
	if a := req.Context.Attempt; a != nil && *a > 1 {
		w.retries.Add(1)
	}
	f := w.lookup(req.Context.WorkflowId)
	if f != nil && f.calls != nil {
		defer f.calls.add("execute", req.WorkflowStateId, r, arrived)
	}
	final := true
	body := w.complete
	switch {
	case (req.WorkflowType == typeW1 || req.WorkflowType == typeW5) && req.WorkflowStateId == stateS1:
		body, final = w.w1S1, false
	case req.WorkflowType == typeW6 && req.WorkflowStateId == stateS1:
		body, final = w.w6S1, false
	case req.WorkflowType == typeW6 && req.WorkflowStateId == stateS2:
		body = w.w6S2
		if !hasW6Blob(req.DataObjects) {
			// S1's attribute must come back inline, loaded from the
			// external store when it went there.
			w.unknown.Add(1)
			http.Error(rw, "S2's execute call lacks S1's 1 MiB data attribute", http.StatusBadRequest)
			return
		}
	case (req.WorkflowType == typeW1 || req.WorkflowType == typeW5) && req.WorkflowStateId == stateS2,
		req.WorkflowType == typeW2 && req.WorkflowStateId == stateS1,
		req.WorkflowType == typeW3 && req.WorkflowStateId == stateS1,
		req.WorkflowType == typeW4 && req.WorkflowStateId == stateS1:
	default:
		w.unknown.Add(1)
		http.Error(rw, "unexpected execute", http.StatusBadRequest)
		return
	}
	writeJSON(rw, body)
	if final && f != nil {
		f.finish(arrived)
	}
}

// hasW6Blob reports whether a W6 S2 execute call carries S1's attribute
// inline, whole.
func hasW6Blob(attrs *[]iwfapi.KeyValue) bool {
	if attrs == nil {
		return false
	}
	for _, kv := range *attrs {
		if kv.Key != nil && *kv.Key == "blob1" && kv.Value != nil && kv.Value.Data != nil && len(*kv.Value.Data) == w6AttrBytes {
			return true
		}
	}
	return false
}

func writeJSON(rw http.ResponseWriter, body []byte) {
	h := rw.Header()
	h["Content-Type"] = []string{"application/json"}
	_, _ = rw.Write(body)
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only fixed values of this file are encoded
	}
	return b
}

func ptr[T any](v T) *T { return &v }

// errTimeout is returned when a workflow does not complete in time.
var errTimeout = errors.New("workflow did not complete in time")
