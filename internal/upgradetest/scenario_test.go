package upgradetest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/workerclient"
)

// This file is compiled by both the release that writes the test data and
// the release under test: it uses only engine and store APIs that both
// have, and the engine directly (the REST layer maps onto the same
// methods).

// workerURL is the worker URL stored in the runs; workerRouter sends its
// calls to the live test worker.
const workerURL = "http://upgrade-worker.invalid"

// farFuture is the firing time of the timers the upgrade test skips.
var farFuture = time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC).Unix()

// workerRouter is an engine.WorkerClient that calls the test worker
// whatever worker URL a run stored.
type workerRouter struct {
	inner engine.WorkerClient
	url   string
}

func (r workerRouter) WaitUntil(ctx context.Context, _ string, req *iwfapi.WorkflowStateStartRequest) (*iwfapi.WorkflowStateStartResponse, error) {
	return r.inner.WaitUntil(ctx, r.url, req)
}

func (r workerRouter) Execute(ctx context.Context, _ string, req *iwfapi.WorkflowStateDecideRequest) (*iwfapi.WorkflowStateDecideResponse, error) {
	return r.inner.Execute(ctx, r.url, req)
}

func (r workerRouter) RPC(ctx context.Context, _ string, req *iwfapi.WorkflowWorkerRpcRequest) (*iwfapi.WorkflowWorkerRpcResponse, error) {
	return r.inner.RPC(ctx, r.url, req)
}

// worker serves the scenario's workflows over HTTP and records every call
// as "<workflowId> <stateExecutionId> <api> <attempt>".
type worker struct {
	srv *httptest.Server

	mu    sync.Mutex
	calls []string
	// failWaitUntil makes the waitUntil of workflow failing-waituntil fail.
	failWaitUntil bool
}

func newWorker(t *testing.T, failWaitUntil bool) *worker {
	w := &worker{failWaitUntil: failWaitUntil}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/workflowState/start", func(rw http.ResponseWriter, r *http.Request) {
		var req iwfapi.WorkflowStateStartRequest
		if json.NewDecoder(r.Body).Decode(&req) != nil {
			rw.WriteHeader(400)
			return
		}
		w.note(req.Context, "waitUntil")
		resp, code := w.waitUntil(req)
		reply(rw, code, resp)
	})
	mux.HandleFunc("POST /api/v1/workflowState/decide", func(rw http.ResponseWriter, r *http.Request) {
		var req iwfapi.WorkflowStateDecideRequest
		if json.NewDecoder(r.Body).Decode(&req) != nil {
			rw.WriteHeader(400)
			return
		}
		w.note(req.Context, "execute")
		resp, code := w.execute(req)
		reply(rw, code, resp)
	})
	mux.HandleFunc("POST /api/v1/workflowWorker/rpc", func(rw http.ResponseWriter, r *http.Request) {
		var req iwfapi.WorkflowWorkerRpcRequest
		if json.NewDecoder(r.Body).Decode(&req) != nil {
			rw.WriteHeader(400)
			return
		}
		reply(rw, 200, iwfapi.WorkflowWorkerRpcResponse{
			Output:                     obj(`"rpc-output"`),
			UpsertDataAttributes:       &[]iwfapi.KeyValue{{Key: ptr("rpc"), Value: obj(`"written by rpc"`)}},
			PublishToInterStateChannel: &[]iwfapi.InterStateChannelPublishing{{ChannelName: "ic", Value: obj(`"published by rpc"`)}},
		})
	})
	w.srv = httptest.NewServer(mux)
	t.Cleanup(w.srv.Close)
	return w
}

func reply(rw http.ResponseWriter, code int, v any) {
	rw.Header().Set("Content-Type", "application/json")
	rw.WriteHeader(code)
	json.NewEncoder(rw).Encode(v)
}

func (w *worker) note(c iwfapi.Context, api string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.calls = append(w.calls, fmt.Sprintf("%s %s %s %d", c.WorkflowId, deref(c.StateExecutionId), api, deref(c.Attempt)))
}

// count returns how many calls were recorded with the given prefix.
func (w *worker) count(prefix string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, c := range w.calls {
		if strings.HasPrefix(c, prefix) {
			n++
		}
	}
	return n
}

// engineFor builds an engine on st whose worker calls reach w.
func engineFor(t *testing.T, st engine.Store, w *worker, releaseLeases bool) *engine.Engine {
	t.Helper()
	eng, err := engine.New(st, engine.Config{
		WorkerClient:         workerRouter{inner: workerclient.New(nil), url: w.srv.URL},
		PollInterval:         100 * time.Millisecond,
		LeaseDuration:        time.Minute,
		ReleaseLeasesOnStart: releaseLeases,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return eng
}

func ptr[T any](v T) *T { return &v }

func deref[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}

func obj(jsonText string) *iwfapi.EncodedObject {
	return &iwfapi.EncodedObject{Encoding: ptr("json"), Data: ptr(jsonText)}
}

func move(stateID string, input *iwfapi.EncodedObject) iwfapi.StateMovement {
	return iwfapi.StateMovement{StateId: stateID, StateInput: input}
}

func decide(moves ...iwfapi.StateMovement) iwfapi.WorkflowStateDecideResponse {
	return iwfapi.WorkflowStateDecideResponse{StateDecision: &iwfapi.StateDecision{NextStates: &moves}}
}

func noCommands() iwfapi.WorkflowStateStartResponse {
	return iwfapi.WorkflowStateStartResponse{CommandRequest: &iwfapi.CommandRequest{CommandWaitingType: ptr(iwfapi.CommandWaitingTypeAllCompleted)}}
}

// searchAttributes are written by every-shape's S1, one of each type.
func searchAttributes() []iwfapi.SearchAttribute {
	sa := func(key string, vt iwfapi.SearchAttributeValueType) iwfapi.SearchAttribute {
		return iwfapi.SearchAttribute{Key: ptr(key), ValueType: ptr(vt)}
	}
	kw, tx, dt, in, db, bo, ka := sa("CustomKeywordField", "KEYWORD"), sa("CustomTextField", "TEXT"), sa("CustomDatetimeField", "DATETIME"),
		sa("CustomIntField", "INT"), sa("CustomDoubleField", "DOUBLE"), sa("CustomBoolField", "BOOL"), sa("CustomKeywordArrayField", "KEYWORD_ARRAY")
	kw.StringValue, tx.StringValue, dt.StringValue = ptr("keyword-1"), ptr("hello upgrade world"), ptr("2024-02-03T04:05:06Z")
	in.IntegerValue, db.DoubleValue, bo.BoolValue, ka.StringArrayValue = ptr(int64(42)), ptr(2.5), ptr(true), &[]string{"a", "b"}
	return []iwfapi.SearchAttribute{kw, tx, dt, in, db, bo, ka}
}

// waitUntil answers the scenario's waitUntil calls, by workflow type and
// state.
func (w *worker) waitUntil(req iwfapi.WorkflowStateStartRequest) (iwfapi.WorkflowStateStartResponse, int) {
	key := req.WorkflowType + "/" + req.WorkflowStateId
	switch key {
	case "every-shape/S1":
		resp := noCommands()
		resp.UpsertStateLocals = &[]iwfapi.KeyValue{{Key: ptr("local"), Value: obj(`"state local"`)}}
		resp.UpsertSearchAttributes = ptr(searchAttributes())
		resp.UpsertDataObjects = &[]iwfapi.KeyValue{{Key: ptr("shape"), Value: obj(`"every"`)}}
		return resp, 200
	case "wait-timer/S1":
		return iwfapi.WorkflowStateStartResponse{CommandRequest: &iwfapi.CommandRequest{
			CommandWaitingType: ptr(iwfapi.CommandWaitingTypeAllCompleted),
			TimerCommands:      &[]iwfapi.TimerCommand{{CommandId: ptr("far"), FiringUnixTimestampSeconds: ptr(farFuture)}},
		}}, 200
	case "wait-signal/S1", "stopped/S1", "timeout/S1", "with-options/S2":
		return iwfapi.WorkflowStateStartResponse{CommandRequest: &iwfapi.CommandRequest{
			CommandWaitingType: ptr(iwfapi.CommandWaitingTypeAllCompleted),
			SignalCommands:     &[]iwfapi.SignalCommand{{CommandId: ptr("go"), SignalChannelName: "go"}},
		}}, 200
	case "wait-internal/S1":
		return iwfapi.WorkflowStateStartResponse{CommandRequest: &iwfapi.CommandRequest{
			CommandWaitingType:        ptr(iwfapi.CommandWaitingTypeAllCompleted),
			InterStateChannelCommands: &[]iwfapi.InterStateChannelCommand{{CommandId: ptr("ic"), ChannelName: "ic"}},
		}}, 200
	case "any-combination/S1":
		return iwfapi.WorkflowStateStartResponse{CommandRequest: &iwfapi.CommandRequest{
			CommandWaitingType: ptr(iwfapi.CommandWaitingTypeAnyCombinationCompleted),
			SignalCommands: &[]iwfapi.SignalCommand{
				{CommandId: ptr("a"), SignalChannelName: "a"}, {CommandId: ptr("b"), SignalChannelName: "b"},
			},
			TimerCommands:       &[]iwfapi.TimerCommand{{CommandId: ptr("t"), FiringUnixTimestampSeconds: ptr(farFuture)}},
			CommandCombinations: &[]iwfapi.CommandCombination{{CommandIds: &[]string{"a", "b"}}},
		}}, 200
	case "failing-waituntil/S1":
		w.mu.Lock()
		fail := w.failWaitUntil
		w.mu.Unlock()
		if fail {
			return iwfapi.WorkflowStateStartResponse{}, 500
		}
		return noCommands(), 200
	}
	return noCommands(), 200
}

// execute answers the scenario's execute calls.
func (w *worker) execute(req iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
	key := req.WorkflowType + "/" + req.WorkflowStateId
	results, _ := json.Marshal(req.CommandResults)
	switch key {
	case "every-shape/S1":
		local := ""
		for _, kv := range deref(req.StateLocals) {
			local += deref(kv.Value.Data)
		}
		return decide(move("S2", obj(`"thread-1"`)), move("S2", obj(`"thread-2:`+strings.Trim(local, `"`)+`"`))), 200
	case "every-shape/S2":
		return decide(move(engine.GracefulCompletingState, req.StateInput)), 200
	case "failed-decision/S1":
		return decide(move(engine.ForceFailingState, obj(`"failed on purpose"`))), 200
	case "failed-api/S1":
		return iwfapi.WorkflowStateDecideResponse{}, 500
	case "two-states/S1":
		return decide(move("S2", obj(`"from S1"`))), 200
	case "two-states/S2", "failing-waituntil/S1":
		return decide(move(engine.ForceCompletingState, obj(`"done"`))), 200
	case "wait-timer/S1", "wait-signal/S1", "wait-internal/S1", "any-combination/S1":
		return decide(move(engine.ForceCompletingState, &iwfapi.EncodedObject{Encoding: ptr("json"), Data: ptr(string(results))})), 200
	case "with-options/S1":
		return decide(iwfapi.StateMovement{StateId: "S2", WaitForKey: ptr("k"), StateOptions: &iwfapi.WorkflowStateOptions{
			ExecuteApiRetryPolicy: &iwfapi.RetryPolicy{MaximumAttempts: ptr(int32(3)), InitialIntervalSeconds: ptr(int32(1))},
		}}), 200
	case "with-options/S2":
		return decide(move(engine.GracefulCompletingState, obj(`"with options"`))), 200
	}
	return decide(move(engine.ForceFailingState, obj(`"unexpected `+key+`"`))), 200
}
