package iwf_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/sdk-go/iwf"
)

// fakeServer plays the server side: it records each request and answers
// with what reply returns for it.
type fakeServer struct {
	t     *testing.T
	mu    sync.Mutex
	calls []fakeCall
	reply func(n int, path, body string) (int, string) // n counts calls from 0
	url   string
}

type fakeCall struct{ path, body string }

func newFakeServer(t *testing.T, reply func(n int, path, body string) (int, string)) *fakeServer {
	t.Helper()
	f := &fakeServer{t: t, reply: reply}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, _ := io.ReadAll(r.Body)
		if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" {
			t.Errorf("%s %s with Content-Type %q", r.Method, r.URL.Path, r.Header.Get("Content-Type"))
		}
		f.mu.Lock()
		n := len(f.calls)
		f.calls = append(f.calls, fakeCall{r.URL.Path, string(data)})
		f.mu.Unlock()
		status, body := f.reply(n, r.URL.Path, string(data))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	f.url = srv.URL
	return f
}

func (f *fakeServer) client(t *testing.T) *iwf.Client {
	t.Helper()
	c, err := iwf.NewClient(f.url+"/", &iwf.ClientOptions{WorkerURL: "http://worker:9000/"})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (f *fakeServer) lastCall() fakeCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.calls) == 0 {
		f.t.Fatal("no request reached the server")
	}
	return f.calls[len(f.calls)-1]
}

func (f *fakeServer) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

func ok(body string) func(int, string, string) (int, string) {
	return func(int, string, string) (int, string) { return 200, body }
}

func TestStartWorkflowRequest(t *testing.T) {
	tw := newTestWorkflow(t)
	f := newFakeServer(t, ok(`{"workflowRunId":"run-1"}`))
	runID, err := f.client(t).StartWorkflow(context.Background(), tw.wf, "order-42", time.Hour, map[string]int{"amount": 10}, &iwf.StartOptions{
		IDReusePolicy:        iwf.IDReuseAllowDuplicateFailedOnly,
		IgnoreAlreadyStarted: true,
		RequestID:            "req-1",
		StartDelay:           10 * time.Second,
		RetryPolicy:          &iwf.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute, MaximumAttempts: 5},
		CronSchedule:         "*/5 * * * *",
		DataAttributes:       map[string]any{"stock": 5, "order": "first"},
		SearchAttributes: []iwf.SearchAttribute{
			iwf.KeywordAttribute("CustomKeywordField", "new"),
			iwf.IntAttribute("CustomIntField", 0),
		},
		Config:                             &iwf.WorkflowConfig{ExecutingStateIDMode: iwf.ExecutingStateIDsForAllStates},
		WaitForCompletionStateIDs:          []string{"ship"},
		WaitForCompletionStateExecutionIDs: []string{iwf.StateExecutionID("wait", 1)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if runID != "run-1" {
		t.Errorf("runID %q", runID)
	}
	call := f.lastCall()
	if call.path != "/api/v1/workflow/start" {
		t.Errorf("path %q", call.path)
	}
	jsonEqual(t, call.body, `{
	 "workflowId":"order-42","iwfWorkflowType":"OrderWorkflow","workflowTimeoutSeconds":3600,
	 "iwfWorkerUrl":"http://worker:9000","startStateId":"wait",
	 "stateInput":{"encoding":"json","data":"{\"amount\":10}"},
	 "waitForCompletionStateIds":["ship"],"waitForCompletionStateExecutionIds":["wait-1"],
	 "workflowStartOptions":{
	   "workflowIDReusePolicy":"ALLOW_DUPLICATE_FAILED_ONLY",
	   "workflowAlreadyStartedOptions":{"ignoreAlreadyStartedError":true,"requestId":"req-1"},
	   "workflowStartDelaySeconds":10,
	   "retryPolicy":{"initialIntervalSeconds":1,"backoffCoefficient":2,"maximumIntervalSeconds":60,"maximumAttempts":5},
	   "cronSchedule":"*/5 * * * *",
	   "dataAttributes":[{"key":"order","value":{"encoding":"json","data":"\"first\""}},
	                     {"key":"stock","value":{"encoding":"json","data":"5"}}],
	   "searchAttributes":[{"key":"CustomKeywordField","valueType":"KEYWORD","stringValue":"new"},
	                       {"key":"CustomIntField","valueType":"INT","integerValue":0}],
	   "workflowConfigOverride":{"executingStateIdMode":"ENABLED_FOR_ALL"}}}`)
}

func TestStartWorkflowMinimalAndInvalid(t *testing.T) {
	f := newFakeServer(t, ok(`{"workflowRunId":"run-2"}`))
	c := f.client(t)
	ctx := context.Background()
	ship := &state{id: "ship"}
	wf := &iwf.Workflow{Type: "Ship", StartState: ship}
	if _, err := c.StartWorkflow(ctx, wf, "s-1", 0, nil, nil); err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, f.lastCall().body, `{"workflowId":"s-1","iwfWorkflowType":"Ship","workflowTimeoutSeconds":0,
	  "iwfWorkerUrl":"http://worker:9000","startStateId":"ship","stateOptions":{"skipWaitUntil":true}}`)

	if _, err := c.StartWorkflow(ctx, &iwf.Workflow{Type: "Idle"}, "i-1", 0, nil, nil); err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, f.lastCall().body, `{"workflowId":"i-1","iwfWorkflowType":"Idle","workflowTimeoutSeconds":0,"iwfWorkerUrl":"http://worker:9000"}`)

	before := f.count()
	for name, start := range map[string]func() error{
		"input without start state": func() error {
			_, err := c.StartWorkflow(ctx, &iwf.Workflow{Type: "Idle"}, "i-2", 0, "x", nil)
			return err
		},
		"undeclared data attribute": func() error {
			_, err := c.StartWorkflow(ctx, wf, "s-2", 0, nil, &iwf.StartOptions{DataAttributes: map[string]any{"x": 1}})
			return err
		},
		"undeclared search attribute": func() error {
			_, err := c.StartWorkflow(ctx, wf, "s-3", 0, nil, &iwf.StartOptions{SearchAttributes: []iwf.SearchAttribute{iwf.BoolAttribute("b", true)}})
			return err
		},
		"unknown wait-for-completion state": func() error {
			_, err := c.StartWorkflow(ctx, wf, "s-4", 0, nil, &iwf.StartOptions{WaitForCompletionStateIDs: []string{"nope"}})
			return err
		},
		"invalid workflow": func() error {
			_, err := c.StartWorkflow(ctx, &iwf.Workflow{}, "s-5", 0, nil, nil)
			return err
		},
	} {
		if err := start(); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if f.count() != before {
		t.Errorf("invalid starts reached the server")
	}
}

func TestErrorResponsesMapToPredicates(t *testing.T) {
	cases := []struct {
		name                                         string
		status                                       int
		body                                         string
		alreadyStarted, notExists, longPoll, rpc, cl bool
	}{
		{"already started", 400, `{"detail":"started","subStatus":"WORKFLOW_ALREADY_STARTED_SUB_STATUS"}`, true, false, false, false, true},
		{"not exists", 400, `{"detail":"gone","subStatus":"WORKFLOW_NOT_EXISTS_SUB_STATUS"}`, false, true, false, false, true},
		{"invalid schema", 400, `{"detail":"invalid request schema"}`, false, false, false, false, true},
		{"long poll", 420, `{"detail":"retry","subStatus":"LONG_POLL_TIME_OUT_SUB_STATUS"}`, false, false, true, false, true},
		{"rpc", 420, `{"detail":"worker API error, status:501, errorType:test-error-type","subStatus":"WORKER_API_ERROR",
		  "originalWorkerErrorDetail":"card declined","originalWorkerErrorType":"test-error-type","originalWorkerErrorStatus":501}`,
			false, false, false, true, true},
		{"internal", 500, `{"detail":"db down","subStatus":"UNCATEGORIZED_SUB_STATUS"}`, false, false, false, false, false},
		{"not JSON", 502, `Bad Gateway`, false, false, false, false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeServer(t, func(int, string, string) (int, string) { return tc.status, tc.body })
			err := f.client(t).SignalWorkflow(context.Background(), "w", "", "payment", nil)
			var apiErr *iwf.APIError
			if !errors.As(err, &apiErr) || apiErr.StatusCode != tc.status {
				t.Fatalf("error %v, want an *APIError with status %d", err, tc.status)
			}
			got := [5]bool{iwf.IsWorkflowAlreadyStartedError(err), iwf.IsWorkflowNotExistsError(err),
				iwf.IsLongPollTimeoutError(err), iwf.IsRPCError(err), iwf.IsClientError(err)}
			if want := [5]bool{tc.alreadyStarted, tc.notExists, tc.longPoll, tc.rpc, tc.cl}; got != want {
				t.Errorf("predicates (alreadyStarted, notExists, longPoll, rpc, client) = %v, want %v", got, want)
			}
			if apiErr.Detail == "" {
				t.Errorf("no detail in %+v", apiErr)
			}
		})
	}
}

func TestInvokeRPC(t *testing.T) {
	f := newFakeServer(t, ok(`{"output":{"encoding":"json","data":"{\"left\":2}"}}`))
	c := f.client(t)
	type result struct{ Left int }
	got, err := iwf.InvokeRPC[result](context.Background(), c, "order-42", "run-1", "pay", 3, &iwf.RPCOptions{
		Timeout:               2 * time.Second,
		DataAttributesLoading: &iwf.LoadingPolicy{Type: iwf.LoadPartialWithExclusiveLock, LockingKeys: []string{"stock"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got.Left != 2 {
		t.Errorf("output %+v", got)
	}
	call := f.lastCall()
	if call.path != "/api/v1/workflow/rpc" {
		t.Errorf("path %q", call.path)
	}
	jsonEqual(t, call.body, `{"workflowId":"order-42","workflowRunId":"run-1","rpcName":"pay",
	  "input":{"encoding":"json","data":"3"},"timeoutSeconds":2,
	  "dataAttributesLoadingPolicy":{"persistenceLoadingType":"LOAD_PARTIAL_WITH_EXCLUSIVE_LOCK","lockingKeys":["stock"]}}`)

	// A worker failure is a 420 carrying the worker's answer.
	f = newFakeServer(t, func(int, string, string) (int, string) {
		return 420, `{"detail":"worker API error, status:501, errorType:test-error-type","subStatus":"WORKER_API_ERROR",
		  "originalWorkerErrorDetail":"card declined","originalWorkerErrorType":"test-error-type","originalWorkerErrorStatus":501}`
	})
	_, err = f.client(t).InvokeRPC(context.Background(), "order-42", "", "pay", nil, nil)
	var apiErr *iwf.APIError
	if !iwf.IsRPCError(err) || !errors.As(err, &apiErr) {
		t.Fatalf("error %v is not an RPC error", err)
	}
	if apiErr.OriginalWorkerErrorStatus != 501 || apiErr.OriginalWorkerErrorType != "test-error-type" || apiErr.OriginalWorkerErrorDetail != "card declined" {
		t.Errorf("worker fields %+v", apiErr)
	}
	// A lock conflict is a 450.
	f = newFakeServer(t, func(int, string, string) (int, string) {
		return 450, `{"detail":"requested data or search attributes are being locked by other operations","subStatus":"WORKER_API_ERROR"}`
	})
	_, err = f.client(t).InvokeRPC(context.Background(), "order-42", "", "pay", nil, nil)
	if !iwf.IsRPCLockError(err) || iwf.IsRPCError(err) {
		t.Errorf("450: IsRPCLockError %v, IsRPCError %v", iwf.IsRPCLockError(err), iwf.IsRPCError(err))
	}
}

const longPollTimeout = `{"detail":"workflow is still running, waiting has exceeded timeout limit, please retry","subStatus":"LONG_POLL_TIME_OUT_SUB_STATUS"}`

func TestGetWithWaitRetriedOnLongPollTimeout(t *testing.T) {
	f := newFakeServer(t, func(n int, path, _ string) (int, string) {
		if n < 2 {
			return 420, longPollTimeout
		}
		return 200, `{"workflowRunId":"run-1","workflowStatus":"COMPLETED","results":[{"completedStateId":"ship",
		  "completedStateExecutionId":"ship-1","completedStateOutput":{"encoding":"json","data":"\"shipped\""}}]}`
	})
	got, err := iwf.GetSimpleWorkflowResult[string](context.Background(), f.client(t), "order-42", "")
	if err != nil {
		t.Fatal(err)
	}
	if got != "shipped" {
		t.Errorf("result %q", got)
	}
	if f.count() != 3 {
		t.Errorf("%d requests, want 3", f.count())
	}
	call := f.lastCall()
	if call.path != "/api/v1/workflow/getWithWait" {
		t.Errorf("path %q", call.path)
	}
	jsonEqual(t, call.body, `{"workflowId":"order-42","needsResults":true}`)
}

func TestGetWithWaitGivesUpWhenContextEnds(t *testing.T) {
	f := newFakeServer(t, func(int, string, string) (int, string) { return 420, longPollTimeout })
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := f.client(t).GetWorkflowResults(ctx, "order-42", "")
	if !iwf.IsLongPollTimeoutError(err) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error %v: want a long-poll timeout and the context's deadline", err)
	}
	// Polls a server answers at once are spaced, not sent in a tight loop.
	if n := f.count(); n > 5 {
		t.Errorf("%d polls in 200ms", n)
	}
	// With a deadline the client asks the server to answer before it.
	jsonEqual(t, f.lastCall().body, `{"workflowId":"order-42","needsResults":true,"waitTimeSeconds":1}`)
}

func TestGetWorkflowResults(t *testing.T) {
	cases := []struct {
		name, answer string
		check        func(t *testing.T, results []iwf.StateOutput, err error)
	}{
		{"completed with several results", `{"workflowRunId":"run-1","workflowStatus":"COMPLETED","results":[
		   {"completedStateId":"a","completedStateExecutionId":"a-1","completedStateOutput":{"encoding":"json","data":"1"}},
		   {"completedStateId":"a","completedStateExecutionId":"a-2","completedStateOutput":{"encoding":"json","data":"2"}}]}`,
			func(t *testing.T, results []iwf.StateOutput, err error) {
				if err != nil || len(results) != 2 || results[1].StateExecutionID != "a-2" {
					t.Fatalf("results %+v, error %v", results, err)
				}
				if n, err := iwf.As[int](results[1].Output); err != nil || n != 2 {
					t.Errorf("second output %d, %v", n, err)
				}
			}},
		{"force failed", `{"workflowRunId":"run-1","workflowStatus":"FAILED","errorType":"STATE_DECISION_FAILING_WORKFLOW_ERROR_TYPE",
		   "results":[{"completedStateId":"a","completedStateExecutionId":"a-1","completedStateOutput":{"encoding":"json","data":"\"no stock\""}}]}`,
			func(t *testing.T, _ []iwf.StateOutput, err error) {
				var exit *iwf.WorkflowAbnormalExitError
				if !errors.As(err, &exit) {
					t.Fatalf("error %v", err)
				}
				if exit.Status != iwf.StatusFailed || exit.ErrorType != iwf.ErrorTypeStateDecisionFailing || exit.RunID != "run-1" || len(exit.Results) != 1 {
					t.Errorf("exit %+v", exit)
				}
			}},
		{"stopped with fail", `{"workflowRunId":"run-1","workflowStatus":"FAILED","errorType":"CLIENT_API_FAILING_WORKFLOW_ERROR_TYPE","errorMessage":"fraud"}`,
			func(t *testing.T, _ []iwf.StateOutput, err error) {
				var exit *iwf.WorkflowAbnormalExitError
				if !errors.As(err, &exit) || exit.ErrorType != iwf.ErrorTypeClientAPIFailing || exit.ErrorMessage != "fraud" {
					t.Fatalf("error %v", err)
				}
				if !strings.Contains(err.Error(), "fraud") {
					t.Errorf("message %q", err)
				}
			}},
		{"timed out", `{"workflowRunId":"run-1","workflowStatus":"TIMEOUT"}`,
			func(t *testing.T, _ []iwf.StateOutput, err error) {
				var exit *iwf.WorkflowAbnormalExitError
				if !errors.As(err, &exit) || exit.Status != iwf.StatusTimeout {
					t.Fatalf("error %v", err)
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeServer(t, ok(tc.answer))
			results, err := f.client(t).GetWorkflowResults(context.Background(), "order-42", "run-1")
			tc.check(t, results, err)
		})
	}

	f := newFakeServer(t, ok(`{"workflowRunId":"r","workflowStatus":"COMPLETED","results":[
	   {"completedStateId":"a","completedStateExecutionId":"a-1","completedStateOutput":{"encoding":"json","data":"1"}},
	   {"completedStateId":"a","completedStateExecutionId":"a-2"}]}`))
	if _, err := iwf.GetSimpleWorkflowResult[int](context.Background(), f.client(t), "w", ""); err == nil {
		t.Error("GetSimpleWorkflowResult accepted two results")
	}
	f = newFakeServer(t, ok(`{"workflowRunId":"r","workflowStatus":"COMPLETED"}`))
	if n, err := iwf.GetSimpleWorkflowResult[int](context.Background(), f.client(t), "w", ""); err != nil || n != 0 {
		t.Errorf("no results: %d, %v", n, err)
	}
}

// Each client call sends the right path and wire field names.
func TestClientRequests(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name, answer string
		call         func(c *iwf.Client) (any, error)
		path, body   string
		want         string // fmt %+v of the call's result, if any
	}{
		{"signal", `{}`, func(c *iwf.Client) (any, error) {
			return nil, c.SignalWorkflow(ctx, "w", "", "payment", "ok")
		}, "/api/v1/workflow/signal", `{"workflowId":"w","signalChannelName":"payment","signalValue":{"encoding":"json","data":"\"ok\""}}`, ""},
		{"signal without value", `{}`, func(c *iwf.Client) (any, error) {
			return nil, c.SignalWorkflow(ctx, "w", "r", "payment", nil)
		}, "/api/v1/workflow/signal", `{"workflowId":"w","workflowRunId":"r","signalChannelName":"payment"}`, ""},
		{"publish", `{}`, func(c *iwf.Client) (any, error) {
			return nil, c.PublishToInternalChannel(ctx, "w", "", "ready", 1)
		}, "/api/v1/workflow/publishToInternalChannel", `{"workflowId":"w","messages":[{"channelName":"ready","value":{"encoding":"json","data":"1"}}]}`, ""},
		{"stop", `{}`, func(c *iwf.Client) (any, error) {
			return nil, c.StopWorkflow(ctx, "w", "", &iwf.StopOptions{Type: iwf.StopFail, Reason: "fraud"})
		}, "/api/v1/workflow/stop", `{"workflowId":"w","stopType":"FAIL","reason":"fraud"}`, ""},
		{"stop by default", `{}`, func(c *iwf.Client) (any, error) {
			return nil, c.StopWorkflow(ctx, "w", "", nil)
		}, "/api/v1/workflow/stop", `{"workflowId":"w"}`, ""},
		{"describe", `{"workflowRunId":"r","workflowStatus":"RUNNING"}`, func(c *iwf.Client) (any, error) {
			return c.DescribeWorkflow(ctx, "w", "")
		}, "/api/v1/workflow/get", `{"workflowId":"w"}`, "&{RunID:r Status:RUNNING}"},
		{"get data attributes", `{"objects":[{"key":"a","value":{"encoding":"json","data":"1"}},{"key":"b"}]}`, func(c *iwf.Client) (any, error) {
			m, err := c.GetWorkflowDataAttributes(ctx, "w", "", "a", "b")
			if err != nil {
				return nil, err
			}
			a, err := iwf.As[int](m["a"])
			return [2]any{a, m["b"].IsNull()}, err
		}, "/api/v1/workflow/dataobjects/get", `{"workflowId":"w","keys":["a","b"]}`, "[1 true]"},
		{"set data attributes", `{}`, func(c *iwf.Client) (any, error) {
			return nil, c.SetWorkflowDataAttributes(ctx, "w", "", map[string]any{"b": "x", "a": nil})
		}, "/api/v1/workflow/dataobjects/set", `{"workflowId":"w","objects":[{"key":"a"},{"key":"b","value":{"encoding":"json","data":"\"x\""}}]}`, ""},
		{"get search attributes", `{"searchAttributes":[{"key":"k","valueType":"KEYWORD","stringValue":"v"},{"key":"n","valueType":"INT","integerValue":3},
		   {"key":"t","valueType":"DATETIME","stringValue":"2024-01-02T03:04:05Z"},{"key":"arr","valueType":"KEYWORD_ARRAY","stringArrayValue":["x","y"]}]}`,
			func(c *iwf.Client) (any, error) {
				m, err := c.GetWorkflowSearchAttributes(ctx, "w", "", iwf.SearchAttributeDef{Key: "k", Type: iwf.SearchAttributeKeyword},
					iwf.SearchAttributeDef{Key: "n", Type: iwf.SearchAttributeInt})
				return [4]any{m["k"].StringValue, m["n"].IntValue, m["t"].TimeValue.UTC().Format(time.RFC3339), m["arr"].StringsValue}, err
			}, "/api/v1/workflow/searchattributes/get", `{"workflowId":"w","keys":[{"key":"k","valueType":"KEYWORD"},{"key":"n","valueType":"INT"}]}`,
			"[v 3 2024-01-02T03:04:05Z [x y]]"},
		{"set search attributes", `{}`, func(c *iwf.Client) (any, error) {
			return nil, c.SetWorkflowSearchAttributes(ctx, "w", "", iwf.TextAttribute("t", "hello world"), iwf.DoubleAttribute("d", 0.5),
				iwf.BoolAttribute("b", false), iwf.KeywordArrayAttribute("a", "x", "y"),
				iwf.DatetimeAttribute("dt", time.Date(2024, 1, 2, 3, 4, 5, 600, time.FixedZone("", 3600))))
		}, "/api/v1/workflow/searchattributes/set", `{"workflowId":"w","searchAttributes":[
		   {"key":"t","valueType":"TEXT","stringValue":"hello world"},{"key":"d","valueType":"DOUBLE","doubleValue":0.5},
		   {"key":"b","valueType":"BOOL","boolValue":false},{"key":"a","valueType":"KEYWORD_ARRAY","stringArrayValue":["x","y"]},
		   {"key":"dt","valueType":"DATETIME","stringValue":"2024-01-02T03:04:05.0000006+01:00"}]}`, ""},
		{"search", `{"workflowExecutions":[{"workflowId":"w","workflowRunId":"r"}],"nextPageToken":"next"}`, func(c *iwf.Client) (any, error) {
			return c.SearchWorkflow(ctx, "CustomKeywordField='paid'", 10, "tok")
		}, "/api/v1/workflow/search", `{"query":"CustomKeywordField='paid'","pageSize":10,"nextPageToken":"tok"}`,
			"&{Executions:[{WorkflowID:w RunID:r}] NextPageToken:next}"},
		{"skip timer by id", `{}`, func(c *iwf.Client) (any, error) {
			return nil, c.SkipTimerByID(ctx, "w", "", "wait-1", "expire")
		}, "/api/v1/workflow/timer/skip", `{"workflowId":"w","workflowStateExecutionId":"wait-1","timerCommandId":"expire"}`, ""},
		{"skip timer by index", `{}`, func(c *iwf.Client) (any, error) {
			return nil, c.SkipTimerByIndex(ctx, "w", "", "wait-1", 0)
		}, "/api/v1/workflow/timer/skip", `{"workflowId":"w","workflowStateExecutionId":"wait-1","timerCommandIndex":0}`, ""},
		{"reset to beginning", `{"workflowRunId":"r2"}`, func(c *iwf.Client) (any, error) {
			return c.ResetWorkflow(ctx, "w", "", nil)
		}, "/api/v1/workflow/reset", `{"workflowId":"w","resetType":"BEGINNING"}`, "r2"},
		{"reset to state", `{"workflowRunId":"r3"}`, func(c *iwf.Client) (any, error) {
			return c.ResetWorkflow(ctx, "w", "r", &iwf.ResetOptions{Type: iwf.ResetToStateID, StateID: "ship", Reason: "redo", SkipSignalReapply: true})
		}, "/api/v1/workflow/reset", `{"workflowId":"w","workflowRunId":"r","resetType":"STATE_ID","stateId":"ship","reason":"redo","skipSignalReapply":true}`, "r3"},
		{"wait for state execution", `{"stateCompletionOutput":{"completedStateId":"ship","completedStateExecutionId":"ship-1"}}`, func(c *iwf.Client) (any, error) {
			out, err := c.WaitForStateExecutionCompletion(ctx, "w", "ship-1")
			return out.StateExecutionID, err
		}, "/api/v1/workflow/waitForStateCompletion", `{"workflowId":"w","stateExecutionId":"ship-1"}`, "ship-1"},
		{"wait for state with key", `{"stateCompletionOutput":{"completedStateId":"ship","completedStateExecutionId":"ship-3"}}`, func(c *iwf.Client) (any, error) {
			out, err := c.WaitForStateCompletionWithKey(ctx, "w", "ship", "k")
			return out.StateExecutionID, err
		}, "/api/v1/workflow/waitForStateCompletion", `{"workflowId":"w","stateId":"ship","waitForKey":"k"}`, "ship-3"},
		{"update config", `{}`, func(c *iwf.Client) (any, error) {
			return nil, c.UpdateWorkflowConfig(ctx, "w", "", iwf.WorkflowConfig{ExecutingStateIDMode: iwf.ExecutingStateIDsDisabled})
		}, "/api/v1/workflow/config/update", `{"workflowId":"w","workflowConfig":{"executingStateIdMode":"DISABLED"}}`, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeServer(t, ok(tc.answer))
			got, err := tc.call(f.client(t))
			if err != nil {
				t.Fatal(err)
			}
			call := f.lastCall()
			if call.path != tc.path {
				t.Errorf("path %q, want %q", call.path, tc.path)
			}
			jsonEqual(t, call.body, tc.body)
			if tc.want != "" {
				if s := sprint(got); s != tc.want {
					t.Errorf("result %s, want %s", s, tc.want)
				}
			}
		})
	}
}

func TestWaitForStateRetriedOnLongPollTimeout(t *testing.T) {
	f := newFakeServer(t, func(n int, _, _ string) (int, string) {
		if n == 0 {
			return 420, `{"detail":"waiting has exceeded timeout limit, please retry","subStatus":"LONG_POLL_TIME_OUT_SUB_STATUS"}`
		}
		return 200, `{"stateCompletionOutput":{"completedStateId":"ship","completedStateExecutionId":"ship-1"}}`
	})
	out, err := f.client(t).WaitForStateExecutionCompletion(context.Background(), "w", "ship-1")
	if err != nil || out.StateID != "ship" || f.count() != 2 {
		t.Fatalf("output %+v, error %v, %d requests", out, err, f.count())
	}
}

func TestNewClient(t *testing.T) {
	for _, bad := range []string{"localhost:8801", "ftp://x", "http://", "::"} {
		if _, err := iwf.NewClient(bad, nil); err == nil {
			t.Errorf("NewClient(%q) accepted it", bad)
		}
	}
	if _, err := iwf.NewClient("", &iwf.ClientOptions{WorkerURL: "nope"}); err == nil {
		t.Error("bad worker URL accepted")
	}
	if c, err := iwf.NewClient("", nil); err != nil || c == nil {
		t.Fatalf("NewClient with defaults: %v", err)
	}
	// Without a WorkerURL the server is told to call DefaultWorkerURL.
	f := newFakeServer(t, ok(`{"workflowRunId":"r"}`))
	c, err := iwf.NewClient(f.url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.StartWorkflow(context.Background(), &iwf.Workflow{Type: "Idle"}, "w", 0, nil, nil); err != nil {
		t.Fatal(err)
	}
	if got := stringField(t, f.lastCall().body, "iwfWorkerUrl"); got != iwf.DefaultWorkerURL {
		t.Errorf("iwfWorkerUrl %q", got)
	}
}
