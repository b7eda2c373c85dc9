package httpapi_test

// FuzzAPIRequest runs arbitrary request bodies through the real handler
// (validation, strict server, the engine on an in-memory SQLite store).
// It lives beside the transport tests but, unlike them, uses the real
// engine: a 5xx here is a request that reaches the store or the engine
// malformed.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/server"
)

// fuzzWorker answers every worker call at once, without a network: a
// waitUntil waits on a signal channel, an execute ends the thread, an RPC
// writes a data attribute and publishes.
type fuzzWorker struct{}

func (fuzzWorker) WaitUntil(context.Context, string, *iwfapi.WorkflowStateStartRequest) (*iwfapi.WorkflowStateStartResponse, error) {
	all := iwfapi.CommandWaitingType("ALL_COMPLETED")
	return &iwfapi.WorkflowStateStartResponse{CommandRequest: &iwfapi.CommandRequest{
		CommandWaitingType: &all,
		SignalCommands:     &[]iwfapi.SignalCommand{{CommandId: ptrTo("s"), SignalChannelName: "ch"}},
	}}, nil
}

func (fuzzWorker) Execute(context.Context, string, *iwfapi.WorkflowStateDecideRequest) (*iwfapi.WorkflowStateDecideResponse, error) {
	return &iwfapi.WorkflowStateDecideResponse{StateDecision: &iwfapi.StateDecision{
		NextStates: &[]iwfapi.StateMovement{{StateId: engine.DeadEndState}},
	}}, nil
}

func (fuzzWorker) RPC(context.Context, string, *iwfapi.WorkflowWorkerRpcRequest) (*iwfapi.WorkflowWorkerRpcResponse, error) {
	return &iwfapi.WorkflowWorkerRpcResponse{
		Output:                     &iwfapi.EncodedObject{Data: ptrTo("out")},
		UpsertDataAttributes:       &[]iwfapi.KeyValue{{Key: ptrTo("rpc"), Value: &iwfapi.EncodedObject{Data: ptrTo("1")}}},
		PublishToInterStateChannel: &[]iwfapi.InterStateChannelPublishing{{ChannelName: "ich"}},
	}, nil
}

func ptrTo[T any](v T) *T { return &v }

// fuzzEndpoints are the paths FuzzAPIRequest posts to, with a valid body
// for each as a seed. The long polls (getWithWait,
// waitForStateCompletion) are left out: each exec would wait.
var fuzzEndpoints = []struct{ path, seed string }{
	{"/api/v1/workflow/start", `{"workflowId":"wf-2","iwfWorkflowType":"T","workflowTimeoutSeconds":10,"iwfWorkerUrl":"http://localhost:8803","startStateId":"S1","stateInput":{"encoding":"json","data":"1"},"workflowStartOptions":{"idReusePolicy":"ALLOW_IF_NO_RUNNING","searchAttributes":[{"key":"CustomIntField","valueType":"INT","integerValue":5}],"dataAttributes":[{"key":"k","value":{"data":"v"}}],"workflowConfigOverride":{"continueAsNewThreshold":10}}}`},
	{"/api/v1/workflow/signal", `{"workflowId":"wf-1","signalChannelName":"ch","signalValue":{"encoding":"json","data":"1"}}`},
	{"/api/v1/workflow/search", `{"query":"WorkflowType = 'T' AND CustomIntField > 3 ORDER BY StartTime DESC","pageSize":10}`},
	{"/api/v1/workflow/get", `{"workflowId":"wf-1","needsResults":true}`},
	{"/api/v1/workflow/rpc", `{"workflowId":"wf-1","rpcName":"r","input":{"data":"x"},"timeoutSeconds":5,"dataAttributesLoadingPolicy":{"persistenceLoadingType":"LOAD_ALL_WITHOUT_LOCKING"}}`},
	{"/api/v1/workflow/stop", `{"workflowId":"wf-3","stopType":"CANCEL","reason":"fuzz"}`},
	{"/api/v1/workflow/reset", `{"workflowId":"wf-1","resetType":"BEGINNING","reason":"fuzz"}`},
	{"/api/v1/workflow/dataobjects/set", `{"workflowId":"wf-1","objects":[{"key":"k","value":{"encoding":"json","data":"2"}}]}`},
	{"/api/v1/workflow/dataobjects/get", `{"workflowId":"wf-1","keys":["k"]}`},
	{"/api/v1/workflow/searchattributes/set", `{"workflowId":"wf-1","searchAttributes":[{"key":"CustomKeywordField","valueType":"KEYWORD","stringValue":"x"},{"key":"CustomDatetimeField","valueType":"DATETIME","stringValue":"2024-01-02T03:04:05Z"}]}`},
	{"/api/v1/workflow/searchattributes/get", `{"workflowId":"wf-1","keys":[{"key":"CustomKeywordField","valueType":"KEYWORD"}]}`},
	{"/api/v1/workflow/publishToInternalChannel", `{"workflowId":"wf-1","messages":[{"channelName":"ich","value":{"data":"m"}}]}`},
	{"/api/v1/workflow/timer/skip", `{"workflowId":"wf-1","workflowStateExecutionId":"S1-1","timerCommandIndex":0}`},
	{"/api/v1/workflow/config/update", `{"workflowId":"wf-1","workflowConfig":{"disableSystemSearchAttribute":true}}`},
	{"/api/v1/workflow/internal/dump", `{"workflowId":"wf-1","workflowRunId":"","pageNum":0,"pageSizeInBytes":1000}`},
	{"/api/v1/workflow/history", `{"workflowId":"wf-1","pageSize":5}`},
	{"/api/v1/workflow/triggerContinueAsNew", `{"workflowId":"wf-1"}`},
}

// fuzzNearMisses are seeds besides fuzzEndpoints': near misses the
// validation must answer with a 400 (endpoint indexes fuzzEndpoints).
var fuzzNearMisses = []struct {
	endpoint uint8
	body     string
}{
	{0, `{"workflowId":"wf-1",`},
	{1, `{"workflowId":"wf-1","signalChannelName":"ch","signalValue":{"data":5}}`},
	{2, `{"query":"A = 'x"}`},
	{0, `{"workflowId":"wf-4","iwfWorkflowType":"T","workflowTimeoutSeconds":10,"iwfWorkerUrl":"ftp://w"}`},
}

// fuzzStarted are the workflows started before the fuzzed requests, so that
// the seeds reach past "workflow not found".
var fuzzStarted = []string{"wf-1", "wf-3"}

// fuzzStartBody is the start request of a workflow of fuzzStarted.
func fuzzStartBody(id string) []byte {
	return []byte(`{"workflowId":"` + id + `","iwfWorkflowType":"T","workflowTimeoutSeconds":0,"iwfWorkerUrl":"http://localhost:8803","startStateId":"S1"}`)
}

// hangAfter is how long FuzzAPIRequest waits for an answer before it
// declares a hang.
const hangAfter = 30 * time.Second

// FuzzAPIRequest posts arbitrary bodies to the API (endpoint picks the
// path) of one server per fuzzing process, built on an in-memory SQLite
// store with a started engine and an in-process worker. Invariants: no
// panic, never a 5xx; every 4xx is a JSON ErrorResponse with a non-empty,
// one-line detail; every 2xx body is JSON.
func FuzzAPIRequest(f *testing.F) {
	for i, e := range fuzzEndpoints {
		f.Add(uint8(i), []byte(e.seed))
	}
	for _, s := range fuzzNearMisses {
		f.Add(s.endpoint, []byte(s.body))
	}

	srv, err := server.Open(context.Background(), "sqlite://:memory:", server.Options{
		Engine:    engine.Config{WorkerClient: fuzzWorker{}, MaxWait: 2 * time.Second},
		NoMetrics: true,
	})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Close(ctx)
	})
	if err := srv.Start(context.Background()); err != nil {
		f.Fatal(err)
	}
	h := srv.Handler
	for _, id := range fuzzStarted {
		if status, b := post(h, "/api/v1/workflow/start", fuzzStartBody(id)); status != http.StatusOK {
			f.Fatalf("start %s: %d %s", id, status, b)
		}
	}

	f.Fuzz(func(t *testing.T, endpoint uint8, body []byte) {
		path := fuzzEndpoints[int(endpoint)%len(fuzzEndpoints)].path
		// A request that never answers is a hang, which the fuzzer only
		// sees as a crash: after hangAfter (far beyond MaxWait) the
		// process exits with every goroutine's stack.
		watchdog := time.AfterFunc(hangAfter, func() {
			buf := make([]byte, 1<<20)
			n := runtime.Stack(buf, true)
			fmt.Fprintf(os.Stderr, "POST %s %q has not answered after %s:\n%s", path, body, hangAfter, buf[:n])
			os.Exit(3)
		})
		status, b := post(h, path, body)
		watchdog.Stop()
		switch {
		case status >= 500:
			t.Fatalf("POST %s %q: %d %s", path, body, status, b)
		case status >= 400:
			var er iwfapi.ErrorResponse
			if err := json.Unmarshal(b, &er); err != nil {
				t.Fatalf("POST %s %q: %d with a body that is no ErrorResponse: %v: %s", path, body, status, err, b)
			}
			if er.Detail == nil || *er.Detail == "" || strings.ContainsAny(*er.Detail, "\r\n") {
				t.Fatalf("POST %s %q: %d with an empty or multi-line detail: %s", path, body, status, b)
			}
		case status >= 200 && status < 300:
			if !json.Valid(b) {
				t.Fatalf("POST %s %q: %d with a body that is not JSON: %s", path, body, status, b)
			}
		default:
			t.Fatalf("POST %s %q: unexpected status %d %s", path, body, status, b)
		}
	})
}

// post serves one POST request with a JSON body in-process.
func post(h http.Handler, path string, body []byte) (int, []byte) {
	req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.Bytes()
}
