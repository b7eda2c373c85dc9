package iwfapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers/legacy"
	"github.com/go-chi/chi/v5"

	"github.com/iwf-server/iwf-server/api/iwfapi"
)

// serverOps and workerOps list every path of the contract with its method
// and operationId.
var serverOps = map[string][2]string{
	"/api/v1/workflow/start":                    {http.MethodPost, "startWorkflow"},
	"/api/v1/workflow/signal":                   {http.MethodPost, "signalWorkflow"},
	"/api/v1/workflow/publishToInternalChannel": {http.MethodPost, "publishToInternalChannel"},
	"/api/v1/workflow/stop":                     {http.MethodPost, "stopWorkflow"},
	"/api/v1/workflow/dataobjects/get":          {http.MethodPost, "getWorkflowDataObjects"},
	"/api/v1/workflow/dataobjects/set":          {http.MethodPost, "setWorkflowDataObjects"},
	"/api/v1/workflow/searchattributes/get":     {http.MethodPost, "getWorkflowSearchAttributes"},
	"/api/v1/workflow/searchattributes/set":     {http.MethodPost, "setWorkflowSearchAttributes"},
	"/api/v1/workflow/encodedobject/load":       {http.MethodPost, "loadEncodedObject"},
	"/api/v1/workflow/get":                      {http.MethodPost, "getWorkflow"},
	"/api/v1/workflow/getWithWait":              {http.MethodPost, "getWorkflowWithWait"},
	"/api/v1/workflow/search":                   {http.MethodPost, "searchWorkflows"},
	"/api/v1/workflow/reset":                    {http.MethodPost, "resetWorkflow"},
	"/api/v1/workflow/rpc":                      {http.MethodPost, "executeWorkflowRpc"},
	"/api/v1/workflow/timer/skip":               {http.MethodPost, "skipTimer"},
	"/api/v1/workflow/config/update":            {http.MethodPost, "updateWorkflowConfig"},
	"/api/v1/workflow/internal/dump":            {http.MethodPost, "dumpWorkflowInternal"},
	"/info/healthcheck":                         {http.MethodGet, "healthCheck"},
	"/api/v1/workflow/waitForStateCompletion":   {http.MethodPost, "waitForStateCompletion"},
	"/api/v1/workflow/triggerContinueAsNew":     {http.MethodPost, "triggerContinueAsNew"},
	// Our additive extensions: history readable through the API, describe,
	// the node's release and schema version.
	"/api/v1/workflow/history":  {http.MethodPost, "getWorkflowHistory"},
	"/api/v1/workflow/describe": {http.MethodPost, "describeWorkflow"},
	"/info/version":             {http.MethodGet, "getVersion"},
	// Batch operations (fleet operations by query), operator role.
	"/api/v1/batch/start":    {http.MethodPost, "startBatch"},
	"/api/v1/batch/describe": {http.MethodPost, "describeBatch"},
	"/api/v1/batch/list":     {http.MethodPost, "listBatches"},
	"/api/v1/batch/cancel":   {http.MethodPost, "cancelBatch"},
	// Incident controls: pause and resume a run, or a workflow type or
	// worker host.
	"/api/v1/workflow/pause":  {http.MethodPost, "pauseWorkflow"},
	"/api/v1/workflow/resume": {http.MethodPost, "resumeWorkflow"},
	"/api/v1/pause/list":      {http.MethodPost, "listPauses"},
	"/api/v1/pause/set":       {http.MethodPost, "setPause"},
	"/api/v1/pause/delete":    {http.MethodPost, "deletePause"},
	// Limits on worker calls at run time, and where the open runs of a
	// type stand.
	"/api/v1/limit/list":     {http.MethodPost, "listLimits"},
	"/api/v1/limit/set":      {http.MethodPost, "setLimit"},
	"/api/v1/limit/delete":   {http.MethodPost, "deleteLimit"},
	"/api/v1/workflow/stats": {http.MethodPost, "getWorkflowStats"},
}

var workerOps = map[string][2]string{
	"/api/v1/workflowState/start":  {http.MethodPost, "workerStateWaitUntil"},
	"/api/v1/workflowState/decide": {http.MethodPost, "workerStateExecute"},
	"/api/v1/workflowWorker/rpc":   {http.MethodPost, "workerRpc"},
}

func loadSpec(t *testing.T) *openapi3.T {
	t.Helper()
	doc, err := iwfapi.GetSwagger()
	if err != nil {
		t.Fatalf("GetSwagger: %v", err)
	}
	return doc
}

func TestEmbeddedSpecLoadsAndValidates(t *testing.T) {
	ctx := context.Background()
	doc := loadSpec(t)
	if err := doc.Validate(ctx); err != nil {
		t.Fatalf("embedded spec does not validate: %v", err)
	}
	if doc.OpenAPI != "3.0.3" {
		t.Errorf("openapi version = %q, want 3.0.3", doc.OpenAPI)
	}

	// The source file must load and validate too, and the embedded copy must
	// be identical to it: otherwise the generated code is stale.
	loader := openapi3.NewLoader()
	src, err := loader.LoadFromFile("../openapi.yaml")
	if err != nil {
		t.Fatalf("load api/openapi.yaml: %v", err)
	}
	if err := src.Validate(ctx); err != nil {
		t.Fatalf("api/openapi.yaml does not validate: %v", err)
	}
	want, err := json.Marshal(src)
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("embedded spec differs from api/openapi.yaml: run `go generate ./api/...`")
	}
}

func TestSpecHasExactlyTheContractPaths(t *testing.T) {
	doc := loadSpec(t)
	paths := doc.Paths.Map()
	// iWF's 23 paths plus our extensions: history, describe, version,
	// the four batch operations, the five pause controls, the three limit
	// calls and the states in use.
	if got, want := len(paths), len(serverOps)+len(workerOps); got != 39 || want != 39 {
		t.Fatalf("spec has %d paths, test expects %d; both must be 39", got, want)
	}
	check := func(ops map[string][2]string, tag string) {
		for path, mo := range ops {
			item := paths[path]
			if item == nil {
				t.Errorf("path %s missing", path)
				continue
			}
			operations := item.Operations()
			if len(operations) != 1 {
				t.Errorf("path %s has %d operations, want 1", path, len(operations))
			}
			op := item.GetOperation(mo[0])
			if op == nil {
				t.Errorf("path %s has no %s operation", path, mo[0])
				continue
			}
			if op.OperationID != mo[1] {
				t.Errorf("%s %s operationId = %q, want %q", mo[0], path, op.OperationID, mo[1])
			}
			if !reflect.DeepEqual(op.Tags, []string{tag}) {
				t.Errorf("%s %s tags = %v, want [%s]", mo[0], path, op.Tags, tag)
			}
			if op.Responses.Status(http.StatusOK) == nil {
				t.Errorf("%s %s declares no 200 response", mo[0], path)
			}
		}
	}
	check(serverOps, "server")
	check(workerOps, "worker")

	// Error responses of the server API.
	wantErrors := func(path string, codes ...int) {
		op := paths[path].Post
		for _, code := range codes {
			r := op.Responses.Status(code)
			if r == nil {
				t.Errorf("%s: no %d response", path, code)
				continue
			}
			mt := r.Value.Content.Get("application/json")
			if mt == nil || mt.Schema == nil || mt.Schema.Ref != "#/components/schemas/ErrorResponse" {
				t.Errorf("%s: %d response is not an ErrorResponse", path, code)
			}
		}
	}
	for path, mo := range serverOps {
		if mo[0] == http.MethodPost {
			wantErrors(path, 400, 500)
		}
	}
	wantErrors("/api/v1/workflow/getWithWait", 420)
	wantErrors("/api/v1/workflow/waitForStateCompletion", 420)
	wantErrors("/api/v1/workflow/rpc", 409, 420, 450)

	// Schemas that no operation references are kept.
	for _, name := range []string{"EventType", "IwfEvent", "WorkerErrorResponse", "ErrorSubStatus"} {
		if doc.Components.Schemas[name] == nil {
			t.Errorf("schema %s missing", name)
		}
	}
}

func TestEnumValuesAreVerbatim(t *testing.T) {
	doc := loadSpec(t)
	enum := func(name string) []string {
		s := doc.Components.Schemas[name]
		if s == nil {
			t.Fatalf("schema %s missing", name)
		}
		var out []string
		for _, v := range s.Value.Enum {
			out = append(out, v.(string))
		}
		sort.Strings(out)
		return out
	}
	sorted := func(v ...string) []string { sort.Strings(v); return v }
	cases := map[string][]string{
		"WorkflowStatus":       sorted("RUNNING", "COMPLETED", "FAILED", "TIMEOUT", "TERMINATED", "CANCELED", "CONTINUED_AS_NEW"),
		"ChannelRequestStatus": sorted("WAITING", "RECEIVED"),
		"IDReusePolicy": sorted("ALLOW_IF_PREVIOUS_EXISTS_ABNORMALLY", "ALLOW_IF_PREVIOUS_EXITS_ABNORMALLY",
			"ALLOW_IF_NO_RUNNING", "DISALLOW_REUSE", "ALLOW_TERMINATE_IF_RUNNING"),
		"ErrorSubStatus": sorted("UNCATEGORIZED_SUB_STATUS", "WORKFLOW_ALREADY_STARTED_SUB_STATUS",
			"WORKFLOW_NOT_EXISTS_SUB_STATUS", "WORKER_API_ERROR", "LONG_POLL_TIME_OUT_SUB_STATUS"),
	}
	for name, want := range cases {
		if got := enum(name); !reflect.DeepEqual(got, want) {
			t.Errorf("%s enum = %v, want %v", name, got, want)
		}
	}
	if len(enum("EventType")) != 14 {
		t.Errorf("EventType must have 14 values")
	}
	// Generated constants carry the wire value.
	if iwfapi.WorkflowStatusContinuedAsNew != "CONTINUED_AS_NEW" ||
		iwfapi.IDReusePolicyAllowIfPreviousExistsAbnormally != "ALLOW_IF_PREVIOUS_EXISTS_ABNORMALLY" ||
		iwfapi.ChannelRequestStatusReceived != "RECEIVED" ||
		iwfapi.ErrorSubStatusLongPollTimeOut != "LONG_POLL_TIME_OUT_SUB_STATUS" {
		t.Error("enum constants do not carry the wire values")
	}
	if !iwfapi.CommandWaitingTypeAnyCombinationCompleted.Valid() || iwfapi.CommandWaitingType("ALL_COMMAND_COMPLETED").Valid() {
		t.Error("Valid() does not tell enum values apart")
	}
}

func marshalMap(t *testing.T, v any) (string, map[string]any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return string(b), m
}

func ptr[T any](v T) *T { return &v }

func TestWireNamesRoundTrip(t *testing.T) {
	kv := []iwfapi.KeyValue{{Key: ptr("k"), Value: &iwfapi.EncodedObject{Encoding: ptr("json"), Data: ptr(`"v"`)}}}

	t.Run("execute request uses DataObjects with capital D", func(t *testing.T) {
		req := iwfapi.WorkflowStateDecideRequest{
			Context:         iwfapi.Context{WorkflowId: "wf", WorkflowRunId: "run", WorkflowStartedTimestamp: 1700000000},
			WorkflowType:    "T",
			WorkflowStateId: "S1",
			DataObjects:     &kv,
		}
		s, m := marshalMap(t, req)
		if _, ok := m["DataObjects"]; !ok {
			t.Errorf("DataObjects missing: %s", s)
		}
		if _, ok := m["dataObjects"]; ok {
			t.Errorf("unexpected dataObjects: %s", s)
		}
		var back iwfapi.WorkflowStateDecideRequest
		if err := json.Unmarshal([]byte(`{"context":{"workflowId":"wf","workflowRunId":"r","workflowStartedTimestamp":5},"workflowType":"T","workflowStateId":"S","DataObjects":[{"key":"k"}]}`), &back); err != nil {
			t.Fatal(err)
		}
		if back.DataObjects == nil || len(*back.DataObjects) != 1 || *(*back.DataObjects)[0].Key != "k" {
			t.Errorf("DataObjects not decoded: %+v", back)
		}
		if back.Context.WorkflowStartedTimestamp != 5 {
			t.Errorf("context not decoded: %+v", back.Context)
		}
	})

	t.Run("waitUntil request uses dataObjects", func(t *testing.T) {
		req := iwfapi.WorkflowStateStartRequest{
			Context:         iwfapi.Context{WorkflowId: "wf", WorkflowRunId: "run", WorkflowStartedTimestamp: 1},
			WorkflowType:    "T",
			WorkflowStateId: "S1",
			DataObjects:     &kv,
		}
		s, m := marshalMap(t, req)
		if _, ok := m["dataObjects"]; !ok {
			t.Errorf("dataObjects missing: %s", s)
		}
		if _, ok := m["DataObjects"]; ok {
			t.Errorf("unexpected DataObjects: %s", s)
		}
	})

	t.Run("rpc uses dataAttributes and upsertDataAttributes", func(t *testing.T) {
		req := iwfapi.WorkflowWorkerRpcRequest{
			Context:              iwfapi.Context{WorkflowId: "wf", WorkflowRunId: "run", WorkflowStartedTimestamp: 1},
			WorkflowType:         "T",
			RpcName:              "r",
			DataAttributes:       &kv,
			SignalChannelInfos:   &map[string]iwfapi.ChannelInfo{},
			InternalChannelInfos: &map[string]iwfapi.ChannelInfo{"c": {Size: ptr(int32(2))}},
		}
		s, _ := marshalMap(t, req)
		for _, want := range []string{`"dataAttributes":`, `"signalChannelInfos":{}`, `"internalChannelInfos":{"c":{"size":2}}`} {
			if !strings.Contains(s, want) {
				t.Errorf("rpc request %s lacks %s", s, want)
			}
		}
		var resp iwfapi.WorkflowWorkerRpcResponse
		if err := json.Unmarshal([]byte(`{"upsertDataAttributes":[{"key":"a"}],"output":{"encoding":"json","data":"1"}}`), &resp); err != nil {
			t.Fatal(err)
		}
		if resp.UpsertDataAttributes == nil || len(*resp.UpsertDataAttributes) != 1 || resp.Output == nil {
			t.Errorf("rpc response not decoded: %+v", resp)
		}
	})

	t.Run("required fields serialise when empty, optional ones are omitted", func(t *testing.T) {
		s, m := marshalMap(t, iwfapi.WorkflowGetResponse{WorkflowStatus: iwfapi.WorkflowStatusRunning})
		if v, ok := m["workflowRunId"]; !ok || v != "" {
			t.Errorf("workflowRunId must be present and empty: %s", s)
		}
		for _, k := range []string{"results", "errorType", "errorMessage"} {
			if _, ok := m[k]; ok {
				t.Errorf("optional %s must be omitted: %s", k, s)
			}
		}
		if strings.Contains(s, "null") {
			t.Errorf("no null expected: %s", s)
		}

		s, _ = marshalMap(t, iwfapi.TimerResult{TimerStatus: iwfapi.TimerStatusFired})
		if s != `{"commandId":"","timerStatus":"FIRED"}` {
			t.Errorf("TimerResult = %s", s)
		}
		s, _ = marshalMap(t, iwfapi.StateCompletionOutput{})
		if s != `{"completedStateExecutionId":"","completedStateId":""}` {
			t.Errorf("StateCompletionOutput = %s", s)
		}
		s, _ = marshalMap(t, iwfapi.SignalResult{SignalChannelName: "c", SignalRequestStatus: iwfapi.ChannelRequestStatusWaiting})
		if s != `{"commandId":"","signalChannelName":"c","signalRequestStatus":"WAITING"}` {
			t.Errorf("SignalResult = %s", s)
		}
		s, _ = marshalMap(t, iwfapi.EncodedObject{})
		if s != `{}` {
			t.Errorf("empty EncodedObject = %s", s)
		}
		s, _ = marshalMap(t, iwfapi.EmptyResponse{})
		if s != `{}` {
			t.Errorf("EmptyResponse = %s", s)
		}
	})

	t.Run("int64 fields keep large values", func(t *testing.T) {
		in := `{"key":"k","valueType":"INT","integerValue":9007199254740993}`
		var sa iwfapi.SearchAttribute
		if err := json.Unmarshal([]byte(in), &sa); err != nil {
			t.Fatal(err)
		}
		if sa.IntegerValue == nil || *sa.IntegerValue != 9007199254740993 {
			t.Errorf("integerValue = %v", sa.IntegerValue)
		}
		out, err := json.Marshal(sa)
		if err != nil {
			t.Fatal(err)
		}
		if string(out) != `{"integerValue":9007199254740993,"key":"k","valueType":"INT"}` {
			t.Errorf("SearchAttribute = %s", out)
		}
		tc := iwfapi.TimerCommand{DurationSeconds: ptr(int64(86400)), FiringUnixTimestampSeconds: ptr(int64(1) << 40)}
		s, _ := marshalMap(t, tc)
		if s != `{"durationSeconds":86400,"firingUnixTimestampSeconds":1099511627776}` {
			t.Errorf("TimerCommand = %s", s)
		}
	})

	t.Run("legacy fields are kept", func(t *testing.T) {
		in := `{"skipStartApi":true,"startApiTimeoutSeconds":3,"decideApiRetryPolicy":{"maximumAttempts":2},` +
			`"startApiFailurePolicy":"PROCEED_TO_DECIDE_ON_START_API_FAILURE","dataObjectsLoadingPolicy":{"persistenceLoadingType":"LOAD_NONE"}}`
		var o iwfapi.WorkflowStateOptions
		if err := json.Unmarshal([]byte(in), &o); err != nil {
			t.Fatal(err)
		}
		if o.SkipStartApi == nil || !*o.SkipStartApi || o.StartApiTimeoutSeconds == nil || *o.StartApiTimeoutSeconds != 3 ||
			o.DecideApiRetryPolicy == nil || o.StartApiFailurePolicy == nil ||
			*o.StartApiFailurePolicy != iwfapi.StartApiFailurePolicyProceedToDecideOnStartApiFailure ||
			o.DataObjectsLoadingPolicy == nil || *o.DataObjectsLoadingPolicy.PersistenceLoadingType != iwfapi.PersistenceLoadingTypeLoadNone {
			t.Errorf("legacy options not decoded: %+v", o)
		}
		var cr iwfapi.CommandRequest
		if err := json.Unmarshal([]byte(`{"deciderTriggerType":"ANY_COMMAND_COMPLETED"}`), &cr); err != nil {
			t.Fatal(err)
		}
		if cr.DeciderTriggerType == nil || *cr.DeciderTriggerType != iwfapi.DeciderTriggerTypeAnyCommandCompleted || cr.CommandWaitingType != nil {
			t.Errorf("deciderTriggerType not decoded: %+v", cr)
		}
	})
}

func validateStart(t *testing.T, body string) error {
	t.Helper()
	doc := loadSpec(t)
	router, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatalf("router: %v", err)
	}
	req := httptest.NewRequest(http.MethodPost, "/api/v1/workflow/start", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	route, pathParams, err := router.FindRoute(req)
	if err != nil {
		t.Fatalf("FindRoute: %v", err)
	}
	if route.Operation.OperationID != "startWorkflow" {
		t.Fatalf("routed to %s", route.Operation.OperationID)
	}
	return openapi3filter.ValidateRequest(context.Background(), &openapi3filter.RequestValidationInput{
		Request:    req,
		PathParams: pathParams,
		Route:      route,
	})
}

func TestRequestValidation(t *testing.T) {
	t.Run("missing workflowId fails", func(t *testing.T) {
		err := validateStart(t, `{"iwfWorkflowType":"T","workflowTimeoutSeconds":10,"iwfWorkerUrl":"http://localhost:8803"}`)
		if err == nil {
			t.Fatal("validation passed without workflowId")
		}
		var reqErr *openapi3filter.RequestError
		if !errors.As(err, &reqErr) || !strings.Contains(err.Error(), "workflowId") {
			t.Errorf("unexpected error: %v", err)
		}
	})
	t.Run("all required fields pass", func(t *testing.T) {
		err := validateStart(t, `{"workflowId":"order-42","iwfWorkflowType":"OrderWorkflow","workflowTimeoutSeconds":3600,`+
			`"iwfWorkerUrl":"http://localhost:8803","startStateId":"WaitPayment","stateInput":{"encoding":"json","data":"{}"},`+
			`"stateOptions":{"skipStartApi":false,"waitUntilApiRetryPolicy":{"backoffCoefficient":1.5}},`+
			`"workflowStartOptions":{"idReusePolicy":"ALLOW_IF_NO_RUNNING",`+
			`"searchAttributes":[{"key":"CustomKeywordField","valueType":"KEYWORD","stringValue":"new"}]}}`)
		if err != nil {
			t.Fatalf("valid request rejected: %v", err)
		}
	})
	t.Run("unknown enum value fails", func(t *testing.T) {
		err := validateStart(t, `{"workflowId":"w","iwfWorkflowType":"T","workflowTimeoutSeconds":0,"iwfWorkerUrl":"u",`+
			`"workflowStartOptions":{"idReusePolicy":"SOMETIMES"}}`)
		if err == nil {
			t.Fatal("validation passed with an unknown enum value")
		}
	})
}

// fakeServer implements a few operations; the others panic (nil interface).
type fakeServer struct {
	iwfapi.StrictServerInterface
}

func (fakeServer) SignalWorkflow(_ context.Context, req iwfapi.SignalWorkflowRequestObject) (iwfapi.SignalWorkflowResponseObject, error) {
	if req.Body.WorkflowId == "" {
		return iwfapi.SignalWorkflow400JSONResponse{
			Detail:    ptr("WorkflowId is not set on request."),
			SubStatus: ptr(iwfapi.ErrorSubStatusWorkflowNotExists),
		}, nil
	}
	return iwfapi.SignalWorkflow200JSONResponse{}, nil
}

func (fakeServer) GetWorkflowWithWait(_ context.Context, _ iwfapi.GetWorkflowWithWaitRequestObject) (iwfapi.GetWorkflowWithWaitResponseObject, error) {
	return iwfapi.GetWorkflowWithWait420JSONResponse{
		Detail:    ptr("workflow is still running, waiting has exceeded timeout limit, please retry"),
		SubStatus: ptr(iwfapi.ErrorSubStatusLongPollTimeOut),
	}, nil
}

func (fakeServer) HealthCheck(_ context.Context, _ iwfapi.HealthCheckRequestObject) (iwfapi.HealthCheckResponseObject, error) {
	return iwfapi.HealthCheck200JSONResponse{Condition: ptr("OK"), Hostname: ptr("h"), Duration: ptr(int32(0))}, nil
}

func TestStrictServerAndClient(t *testing.T) {
	handler := iwfapi.HandlerFromMux(iwfapi.NewStrictHandler(fakeServer{}, nil), chi.NewRouter())
	srv := httptest.NewServer(handler)
	defer srv.Close()
	client, err := iwfapi.NewClientWithResponses(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	sig, err := client.SignalWorkflowWithResponse(ctx, iwfapi.WorkflowSignalRequest{WorkflowId: "wf", SignalChannelName: "c"})
	if err != nil {
		t.Fatal(err)
	}
	if sig.StatusCode() != http.StatusOK || strings.TrimSpace(string(sig.Body)) != "{}" || sig.JSON200 == nil {
		t.Errorf("signal: status %d body %q", sig.StatusCode(), sig.Body)
	}

	bad, err := client.SignalWorkflowWithResponse(ctx, iwfapi.WorkflowSignalRequest{SignalChannelName: "c"})
	if err != nil {
		t.Fatal(err)
	}
	if bad.StatusCode() != http.StatusBadRequest || bad.JSON400 == nil ||
		*bad.JSON400.SubStatus != iwfapi.ErrorSubStatusWorkflowNotExists {
		t.Errorf("signal without id: status %d body %q", bad.StatusCode(), bad.Body)
	}

	wait, err := client.GetWorkflowWithWaitWithResponse(ctx, iwfapi.WorkflowGetRequest{WorkflowId: "wf"})
	if err != nil {
		t.Fatal(err)
	}
	if wait.StatusCode() != 420 || wait.JSON420 == nil || *wait.JSON420.SubStatus != iwfapi.ErrorSubStatusLongPollTimeOut {
		t.Errorf("getWithWait: status %d body %q", wait.StatusCode(), wait.Body)
	}

	health, err := client.HealthCheckWithResponse(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if health.StatusCode() != http.StatusOK || strings.TrimSpace(string(health.Body)) != `{"condition":"OK","duration":0,"hostname":"h"}` {
		t.Errorf("healthcheck: status %d body %q", health.StatusCode(), health.Body)
	}
}
