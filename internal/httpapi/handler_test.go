package httpapi_test

// These are transport-level tests: they run the real handler behind a real
// httptest.Server, but the engine is replaced by fakeService below, so that
// every row of the error table and every validation path can be provoked
// directly. End-to-end tests with the real engine live beside the engine and
// in cmd/iwf-server.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/buildinfo"
	"github.com/iwf-server/iwf-server/internal/httpapi"
)

// fakeService answers every call with err (when set) and records the
// requests it received.
type fakeService struct {
	mu        sync.Mutex
	err       error
	healthErr error
	calls     []any
}

func (f *fakeService) record(req any) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, req)
	if s, ok := req.(iwfapi.WorkflowSignalRequest); ok && s.WorkflowId == "panic" {
		panic("boom")
	}
	return f.err
}

func (f *fakeService) lastCall() any {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.calls) == 0 {
		return nil
	}
	return f.calls[len(f.calls)-1]
}

func (f *fakeService) StartWorkflow(_ context.Context, req iwfapi.WorkflowStartRequest) (iwfapi.WorkflowStartResponse, error) {
	runID := "run-" + req.WorkflowId
	return iwfapi.WorkflowStartResponse{WorkflowRunId: &runID}, f.record(req)
}
func (f *fakeService) SignalWorkflow(_ context.Context, req iwfapi.WorkflowSignalRequest) error {
	return f.record(req)
}
func (f *fakeService) PublishToInternalChannel(_ context.Context, req iwfapi.PublishToInternalChannelRequest) error {
	return f.record(req)
}
func (f *fakeService) StopWorkflow(_ context.Context, req iwfapi.WorkflowStopRequest) error {
	return f.record(req)
}
func (f *fakeService) GetDataAttributes(_ context.Context, req iwfapi.WorkflowGetDataObjectsRequest) (iwfapi.WorkflowGetDataObjectsResponse, error) {
	return iwfapi.WorkflowGetDataObjectsResponse{}, f.record(req)
}
func (f *fakeService) SetDataAttributes(_ context.Context, req iwfapi.WorkflowSetDataObjectsRequest) error {
	return f.record(req)
}
func (f *fakeService) GetSearchAttributes(_ context.Context, req iwfapi.WorkflowGetSearchAttributesRequest) (iwfapi.WorkflowGetSearchAttributesResponse, error) {
	return iwfapi.WorkflowGetSearchAttributesResponse{}, f.record(req)
}
func (f *fakeService) SetSearchAttributes(_ context.Context, req iwfapi.WorkflowSetSearchAttributesRequest) error {
	return f.record(req)
}
func (f *fakeService) GetWorkflow(_ context.Context, req iwfapi.WorkflowGetRequest) (iwfapi.WorkflowGetResponse, error) {
	return iwfapi.WorkflowGetResponse{WorkflowStatus: iwfapi.WorkflowStatusRunning}, f.record(req)
}
func (f *fakeService) GetWorkflowWithWait(_ context.Context, req iwfapi.WorkflowGetRequest) (iwfapi.WorkflowGetResponse, error) {
	return iwfapi.WorkflowGetResponse{WorkflowStatus: iwfapi.WorkflowStatusCompleted}, f.record(req)
}
func (f *fakeService) SearchWorkflows(_ context.Context, req iwfapi.WorkflowSearchRequest) (iwfapi.WorkflowSearchResponse, error) {
	return iwfapi.WorkflowSearchResponse{}, f.record(req)
}
func (f *fakeService) ResetWorkflow(_ context.Context, req iwfapi.WorkflowResetRequest) (iwfapi.WorkflowResetResponse, error) {
	return iwfapi.WorkflowResetResponse{}, f.record(req)
}
func (f *fakeService) InvokeRPC(_ context.Context, req iwfapi.WorkflowRpcRequest) (iwfapi.WorkflowRpcResponse, error) {
	return iwfapi.WorkflowRpcResponse{}, f.record(req)
}
func (f *fakeService) SkipTimer(_ context.Context, req iwfapi.WorkflowSkipTimerRequest) error {
	return f.record(req)
}
func (f *fakeService) UpdateConfig(_ context.Context, req iwfapi.WorkflowConfigUpdateRequest) error {
	return f.record(req)
}
func (f *fakeService) DumpWorkflow(_ context.Context, req iwfapi.WorkflowDumpRequest) (iwfapi.WorkflowDumpResponse, error) {
	return iwfapi.WorkflowDumpResponse{}, f.record(req)
}
func (f *fakeService) WorkflowHistory(_ context.Context, req iwfapi.WorkflowHistoryRequest) (iwfapi.WorkflowHistoryResponse, error) {
	return iwfapi.WorkflowHistoryResponse{Events: []iwfapi.WorkflowHistoryEvent{}}, f.record(req)
}
func (f *fakeService) DescribeWorkflow(_ context.Context, req iwfapi.WorkflowDescribeRequest) (iwfapi.WorkflowDescribeResponse, error) {
	return iwfapi.WorkflowDescribeResponse{PendingStates: []iwfapi.PendingStateExecution{}}, f.record(req)
}
func (f *fakeService) WaitForStateCompletion(_ context.Context, req iwfapi.WorkflowWaitForStateCompletionRequest) (iwfapi.WorkflowWaitForStateCompletionResponse, error) {
	return iwfapi.WorkflowWaitForStateCompletionResponse{}, f.record(req)
}
func (f *fakeService) LoadEncodedObject(_ context.Context, obj iwfapi.EncodedObject) (iwfapi.EncodedObject, error) {
	if obj.Data == nil && obj.ExtPath != nil {
		obj.Data = ptrTo("loaded " + *obj.ExtPath)
	}
	return obj, f.record(obj)
}
func (f *fakeService) TriggerContinueAsNew(_ context.Context, req iwfapi.TriggerContinueAsNewRequest) error {
	return f.record(req)
}
func (f *fakeService) StartBatch(_ context.Context, req engine.BatchRequest) (engine.BatchStarted, error) {
	return engine.BatchStarted{ID: "batch-1"}, f.record(req)
}
func (f *fakeService) DescribeBatch(_ context.Context, req engine.BatchDescribeRequest) (engine.BatchDescription, error) {
	return engine.BatchDescription{}, f.record(req)
}
func (f *fakeService) ListBatches(_ context.Context, req engine.BatchListRequest) (engine.BatchPage, error) {
	return engine.BatchPage{}, f.record(req)
}
func (f *fakeService) CancelBatch(_ context.Context, id string) (engine.BatchInfo, error) {
	return engine.BatchInfo{}, f.record(id)
}
func (f *fakeService) PauseWorkflow(_ context.Context, req engine.PauseRequest) error {
	return f.record(req)
}
func (f *fakeService) ResumeWorkflow(_ context.Context, req engine.ResumeRequest) error {
	return f.record(req)
}
func (f *fakeService) ListPauses(context.Context) ([]engine.PauseInfo, error) {
	return nil, f.record("pause/list")
}
func (f *fakeService) SetPause(_ context.Context, req engine.ScopePauseRequest) (engine.PauseInfo, error) {
	return engine.PauseInfo{PauseScope: req.Scope, Reason: req.Reason}, f.record(req)
}
func (f *fakeService) DeletePause(_ context.Context, req engine.ScopeResumeRequest) (engine.ScopeResumed, error) {
	return engine.ScopeResumed{}, f.record(req)
}
func (f *fakeService) Healthy(context.Context) error { return f.healthErr }
func (f *fakeService) SchemaVersion(context.Context) (int, error) {
	if f.healthErr != nil {
		return 0, f.healthErr
	}
	return 12, nil
}

var _ httpapi.Service = (*fakeService)(nil)

// syncBuffer is a log destination safe for the server's goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

type testServer struct {
	*httptest.Server
	svc *fakeService
	log *syncBuffer
}

func newTestServer(t *testing.T, opts httpapi.Options) *testServer {
	t.Helper()
	svc := &fakeService{}
	logs := &syncBuffer{}
	opts.Logger = zerolog.New(logs)
	h, err := httpapi.NewHandler(svc, opts)
	if err != nil {
		t.Fatalf("NewHandler: %v", err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &testServer{Server: srv, svc: svc, log: logs}
}

// response is a decoded HTTP answer.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) errorResponse(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("body is not JSON: %v: %s", err, r.body)
	}
	return m
}

func (s *testServer) do(t *testing.T, method, path string, body io.Reader, header http.Header) response {
	t.Helper()
	req, err := http.NewRequest(method, s.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := s.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

func (s *testServer) post(t *testing.T, path, body string) response {
	t.Helper()
	return s.do(t, http.MethodPost, path, strings.NewReader(body),
		http.Header{"Content-Type": {"application/json"}})
}

const (
	signalPath = "/api/v1/workflow/signal"
	signalBody = `{"workflowId":"wf-1","signalChannelName":"ch"}`
	startPath  = "/api/v1/workflow/start"
	startBody  = `{"workflowId":"wf-1","iwfWorkflowType":"T","workflowTimeoutSeconds":10,"iwfWorkerUrl":"http://localhost:8803"}`
)

func TestErrorTable(t *testing.T) {
	worker := &engine.WorkerErrorInfo{Status: 502, ErrorType: "test-type", Detail: "worker says no"}
	tests := []struct {
		name      string
		err       error
		status    int
		subStatus string
		detail    string
		worker    *engine.WorkerErrorInfo // expected originalWorker* fields; nil: absent
	}{
		{"invalid argument", engine.Errorf(engine.CodeInvalidArgument, "bad thing"), 400, "UNCATEGORIZED_SUB_STATUS", "bad thing", nil},
		{"not exists", engine.Errorf(engine.CodeWorkflowNotExists, "workflow wf-1 does not exist"), 400, "WORKFLOW_NOT_EXISTS_SUB_STATUS", "workflow wf-1 does not exist", nil},
		{"already started", engine.Errorf(engine.CodeAlreadyStarted, "already started"), 400, "WORKFLOW_ALREADY_STARTED_SUB_STATUS", "already started", nil},
		{"long poll timeout", engine.Errorf(engine.CodeLongPollTimeout, "please retry"), 420, "LONG_POLL_TIME_OUT_SUB_STATUS", "please retry", nil},
		{"worker api error", &engine.Error{Code: engine.CodeWorkerAPIError, Message: "worker API error, status:502, errorType:test-type", Worker: worker},
			420, "WORKER_API_ERROR", "worker API error, status:502, errorType:test-type", worker},
		{"worker api error without worker answer", engine.Errorf(engine.CodeWorkerAPIError, "dial tcp: connection refused"),
			420, "WORKER_API_ERROR", "dial tcp: connection refused", &engine.WorkerErrorInfo{}},
		{"locked", engine.Errorf(engine.CodeLocked, "requested data or search attributes are being locked by other operations"),
			450, "WORKER_API_ERROR", "requested data or search attributes are being locked by other operations", nil},
		{"unimplemented", engine.Errorf(engine.CodeUnimplemented, "not yet"), 501, "UNCATEGORIZED_SUB_STATUS", "not yet", nil},
		{"internal", &engine.Error{Code: engine.CodeInternal, Message: "db exploded", Err: errors.New("secret dsn")},
			500, "UNCATEGORIZED_SUB_STATUS", "internal server error", nil},
		{"plain error", errors.New("pq: password authentication failed"), 500, "UNCATEGORIZED_SUB_STATUS", "internal server error", nil},
		{"statement timeout", engine.DeadlineExceededError("PostgreSQL", nil, errors.New("canceling statement due to statement timeout")),
			504, "UNCATEGORIZED_SUB_STATUS", engine.DeadlineExceededError("PostgreSQL", nil, nil).Message, nil},
		{"invalid for the store", engine.InvalidRequestError("a text holds the character U+0000 (NUL)", errors.New("SQLSTATE 22021")),
			400, "UNCATEGORIZED_SUB_STATUS", "a text holds the character U+0000 (NUL)", nil},
		{"wrapped engine error", fmt.Errorf("context: %w", engine.Errorf(engine.CodeWorkflowNotExists, "gone")),
			400, "WORKFLOW_NOT_EXISTS_SUB_STATUS", "gone", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newTestServer(t, httpapi.Options{})
			s.svc.err = tt.err
			resp := s.post(t, signalPath, signalBody)
			if resp.status != tt.status {
				t.Fatalf("status = %d, want %d; body %s", resp.status, tt.status, resp.body)
			}
			if ct := resp.header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type = %q", ct)
			}
			m := resp.errorResponse(t)
			if m["subStatus"] != tt.subStatus {
				t.Errorf("subStatus = %v, want %s", m["subStatus"], tt.subStatus)
			}
			if m["detail"] != tt.detail {
				t.Errorf("detail = %v, want %q", m["detail"], tt.detail)
			}
			if tt.worker == nil {
				for _, k := range []string{"originalWorkerErrorDetail", "originalWorkerErrorType", "originalWorkerErrorStatus"} {
					if _, ok := m[k]; ok {
						t.Errorf("%s present: %s", k, resp.body)
					}
				}
			} else {
				if m["originalWorkerErrorDetail"] != tt.worker.Detail || m["originalWorkerErrorType"] != tt.worker.ErrorType ||
					m["originalWorkerErrorStatus"] != float64(tt.worker.Status) {
					t.Errorf("worker fields = %s, want %+v", resp.body, *tt.worker)
				}
			}
			if tt.status == 500 && (strings.Contains(string(resp.body), "secret") || strings.Contains(string(resp.body), "pq:")) {
				t.Errorf("internal error leaked: %s", resp.body)
			}
			if tt.status == 500 && !strings.Contains(s.log.String(), "request failed") {
				t.Errorf("internal error not logged: %s", s.log.String())
			}
		})
	}
}

func TestVoidEndpointAnswersEmptyObject(t *testing.T) {
	s := newTestServer(t, httpapi.Options{})
	resp := s.post(t, signalPath, `{"workflowId":"wf-1","workflowRunId":"","signalChannelName":"ch","signalValue":{"encoding":"json","data":"1"}}`)
	if resp.status != 200 || strings.TrimSpace(string(resp.body)) != "{}" {
		t.Fatalf("got %d %q, want 200 {}", resp.status, resp.body)
	}
	got, ok := s.svc.lastCall().(iwfapi.WorkflowSignalRequest)
	if !ok || got.WorkflowId != "wf-1" || got.SignalChannelName != "ch" || got.SignalValue == nil || *got.SignalValue.Data != "1" {
		t.Fatalf("service received %#v", s.svc.lastCall())
	}
}

func TestStartAnswersResponse(t *testing.T) {
	s := newTestServer(t, httpapi.Options{})
	resp := s.post(t, startPath, startBody)
	if resp.status != 200 || strings.TrimSpace(string(resp.body)) != `{"workflowRunId":"run-wf-1"}` {
		t.Fatalf("got %d %s", resp.status, resp.body)
	}
}

func TestResponsesOmitUnsetOptionalFields(t *testing.T) {
	s := newTestServer(t, httpapi.Options{})
	resp := s.post(t, "/api/v1/workflow/get", `{"workflowId":"wf-1"}`)
	if resp.status != 200 {
		t.Fatalf("got %d %s", resp.status, resp.body)
	}
	// Required fields are present even when empty; unset optional ones are absent, never null.
	if got := strings.TrimSpace(string(resp.body)); got != `{"workflowRunId":"","workflowStatus":"RUNNING"}` {
		t.Fatalf("body = %s", got)
	}
}

func TestValidation(t *testing.T) {
	tests := []struct {
		name       string
		path, body string
		wantDetail []string // substrings of detail
	}{
		{"malformed JSON", startPath, `{"workflowId": "wf-1",`, []string{"invalid request schema", "malformed JSON"}},
		{"not an object", startPath, `[1,2]`, []string{"invalid request schema"}},
		{"missing required field", startPath, `{"iwfWorkflowType":"T","workflowTimeoutSeconds":10,"iwfWorkerUrl":"http://w"}`,
			[]string{"invalid request schema", `"workflowId"`, "missing"}},
		{"wrong type", startPath, `{"workflowId":"wf-1","iwfWorkflowType":"T","workflowTimeoutSeconds":"ten","iwfWorkerUrl":"http://w"}`,
			[]string{"invalid request schema", "workflowTimeoutSeconds"}},
		{"wrong nested type", signalPath, `{"workflowId":"wf-1","signalChannelName":"ch","signalValue":{"data":5}}`,
			[]string{"invalid request schema", "signalValue/data"}},
		{"bad enum", "/api/v1/workflow/stop", `{"workflowId":"wf-1","stopType":"EXPLODE"}`,
			[]string{"invalid request schema", "stopType"}},
		{"empty body", signalPath, ``, []string{"invalid request schema", "body is required"}},
		{"int32 overflow", startPath, `{"workflowId":"wf-1","iwfWorkflowType":"T","workflowTimeoutSeconds":1e20,"iwfWorkerUrl":"http://w"}`,
			[]string{"invalid request schema", "/workflowTimeoutSeconds: must be an integer between -2147483648 and 2147483647 (int32)"}},
		{"int32 overflow within int64", startPath, `{"workflowId":"wf-1","iwfWorkflowType":"T","workflowTimeoutSeconds":99999999999,"iwfWorkerUrl":"http://w"}`,
			[]string{"/workflowTimeoutSeconds: must be an integer between -2147483648 and 2147483647 (int32)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newTestServer(t, httpapi.Options{})
			resp := s.post(t, tt.path, tt.body)
			if resp.status != 400 {
				t.Fatalf("status = %d, want 400; body %s", resp.status, resp.body)
			}
			m := resp.errorResponse(t)
			detail, _ := m["detail"].(string)
			for _, want := range tt.wantDetail {
				if !strings.Contains(detail, want) {
					t.Errorf("detail %q does not contain %q", detail, want)
				}
			}
			if _, ok := m["subStatus"]; ok {
				t.Errorf("validation errors carry no subStatus: %s", resp.body)
			}
			if strings.Contains(detail, "\n") {
				t.Errorf("detail spans lines: %q", detail)
			}
			if c := s.svc.lastCall(); c != nil {
				t.Errorf("service called with an invalid request: %#v", c)
			}
		})
	}
}

func TestValidationAcceptsUnknownFields(t *testing.T) {
	s := newTestServer(t, httpapi.Options{})
	// Old SDKs send legacy fields.
	resp := s.post(t, signalPath, `{"workflowId":"wf-1","signalChannelName":"ch","someLegacyField":true}`)
	if resp.status != 200 {
		t.Fatalf("got %d %s", resp.status, resp.body)
	}
}

// A body must be declared JSON: text/plain and form posts are what a page
// of another site can send without a CORS preflight.
func TestContentTypeMustBeJSON(t *testing.T) {
	s := newTestServer(t, httpapi.Options{})
	for _, ct := range []string{"text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", ""} {
		h := http.Header{}
		if ct != "" {
			h.Set("Content-Type", ct)
		}
		resp := s.do(t, http.MethodPost, signalPath, strings.NewReader(signalBody), h)
		d, _ := resp.errorResponse(t)["detail"].(string)
		if resp.status != http.StatusUnsupportedMediaType || !strings.Contains(d, "Content-Type: application/json") {
			t.Errorf("Content-Type %q: got %d %s", ct, resp.status, resp.body)
		}
	}
	if c := s.svc.lastCall(); c != nil {
		t.Errorf("service called with a non-JSON body: %#v", c)
	}
	for _, ct := range []string{"application/json", "application/json; charset=utf-8", "Application/JSON"} {
		resp := s.do(t, http.MethodPost, signalPath, strings.NewReader(signalBody), http.Header{"Content-Type": {ct}})
		if resp.status != 200 {
			t.Errorf("Content-Type %q: got %d %s", ct, resp.status, resp.body)
		}
	}
	// Without a body, validation says what is missing.
	resp := s.do(t, http.MethodPost, signalPath, nil, nil)
	if d, _ := resp.errorResponse(t)["detail"].(string); resp.status != 400 || !strings.Contains(d, "body is required") {
		t.Errorf("no body: got %d %s", resp.status, resp.body)
	}
}

func TestUnknownPathAndMethod(t *testing.T) {
	s := newTestServer(t, httpapi.Options{})

	resp := s.post(t, "/api/v1/workflow/nope", `{}`)
	if resp.status != 404 || resp.header.Get("Content-Type") != "application/json" {
		t.Fatalf("unknown path: %d %q %s", resp.status, resp.header.Get("Content-Type"), resp.body)
	}
	if d, _ := resp.errorResponse(t)["detail"].(string); !strings.Contains(d, "/api/v1/workflow/nope") {
		t.Errorf("detail = %q", d)
	}

	resp = s.do(t, http.MethodGet, startPath, nil, nil)
	if resp.status != 405 || resp.header.Get("Allow") != "POST" {
		t.Fatalf("wrong method: %d Allow=%q %s", resp.status, resp.header.Get("Allow"), resp.body)
	}
	if _, ok := resp.errorResponse(t)["detail"]; !ok {
		t.Errorf("405 without detail: %s", resp.body)
	}

	// In the spec but, as in iWF, not served.
	for _, body := range []string{`{"encoding":"json","data":"1"}`, `not json`} {
		resp = s.post(t, "/api/v1/workflow/encodedobject/load", body)
		if resp.status != 404 {
			t.Fatalf("encodedobject/load: %d %s", resp.status, resp.body)
		}
		resp.errorResponse(t)
	}
}

func TestBodyLimit(t *testing.T) {
	s := newTestServer(t, httpapi.Options{MaxBodyBytes: 1024})
	big := `{"workflowId":"wf-1","signalChannelName":"` + strings.Repeat("x", 2000) + `"}`

	// With a Content-Length.
	resp := s.post(t, signalPath, big)
	if resp.status != 413 {
		t.Fatalf("status = %d, want 413; %s", resp.status, resp.body)
	}
	if d, _ := resp.errorResponse(t)["detail"].(string); !strings.Contains(d, "too large") || !strings.Contains(d, "1024") {
		t.Errorf("detail = %q", d)
	}

	// Chunked, without a Content-Length: the limit applies while reading.
	resp = s.do(t, http.MethodPost, signalPath, io.MultiReader(strings.NewReader(big)), // hides the length
		http.Header{"Content-Type": {"application/json"}})
	if resp.status != 413 {
		t.Fatalf("chunked: status = %d, want 413; %s", resp.status, resp.body)
	}

	// A body under the limit passes.
	if resp := s.post(t, signalPath, signalBody); resp.status != 200 {
		t.Fatalf("small body: %d %s", resp.status, resp.body)
	}
}

func TestHealthCheck(t *testing.T) {
	s := newTestServer(t, httpapi.Options{})
	resp := s.do(t, http.MethodGet, "/info/healthcheck", nil, nil)
	if resp.status != 200 {
		t.Fatalf("got %d %s", resp.status, resp.body)
	}
	m := resp.errorResponse(t)
	if m["condition"] != "OK" || m["duration"] != float64(0) || m["hostname"] == "" || m["hostname"] == nil {
		t.Errorf("body = %s", resp.body)
	}

	s.svc.healthErr = errors.New("database is locked")
	resp = s.do(t, http.MethodGet, "/info/healthcheck", nil, nil)
	if resp.status != 503 {
		t.Fatalf("unhealthy: got %d %s", resp.status, resp.body)
	}
	m = resp.errorResponse(t)
	if d, _ := m["detail"].(string); d == "" || strings.Contains(d, "locked") {
		t.Errorf("detail = %q", d)
	}
	if !strings.Contains(s.log.String(), "database is locked") {
		t.Errorf("health failure not logged: %s", s.log.String())
	}
}

// GET /info/version names the build and the store's schema version; the
// build is answered while the store is down, without schemaVersion.
func TestVersion(t *testing.T) {
	s := newTestServer(t, httpapi.Options{})
	resp := s.do(t, http.MethodGet, "/info/version", nil, nil)
	if resp.status != 200 || !strings.HasPrefix(resp.header.Get("Content-Type"), "application/json") {
		t.Fatalf("got %d %s", resp.status, resp.body)
	}
	var v iwfapi.VersionInfo
	if err := json.Unmarshal(resp.body, &v); err != nil {
		t.Fatal(err)
	}
	info := buildinfo.Get()
	if v.Release != buildinfo.Release() || v.Commit != info.Commit || v.BuildDate != info.BuildDate ||
		v.GoVersion != runtime.Version() || v.SchemaVersion == nil || *v.SchemaVersion != 12 {
		t.Fatalf("body = %s", resp.body)
	}

	s.svc.healthErr = errors.New("database is locked")
	resp = s.do(t, http.MethodGet, "/info/version", nil, nil)
	if resp.status != 200 || strings.Contains(string(resp.body), "schemaVersion") ||
		!strings.Contains(string(resp.body), `"release":"`+buildinfo.Release()+`"`) {
		t.Fatalf("store down: got %d %s", resp.status, resp.body)
	}
}

func TestHello(t *testing.T) {
	s := newTestServer(t, httpapi.Options{})
	resp := s.do(t, http.MethodGet, "/", nil, nil)
	if resp.status != 200 || string(resp.body) != httpapi.HelloText ||
		!strings.HasPrefix(resp.header.Get("Content-Type"), "text/plain") {
		t.Fatalf("got %d %q %q", resp.status, resp.header.Get("Content-Type"), resp.body)
	}
}

func TestRequestIDAndAccessLog(t *testing.T) {
	s := newTestServer(t, httpapi.Options{})

	// The client's id is kept beside the server's own, never in its place.
	resp := s.do(t, http.MethodPost, signalPath, strings.NewReader(signalBody),
		http.Header{"Content-Type": {"application/json"}, httpapi.RequestIDHeader: {"req-42"}})
	own := resp.header.Get(httpapi.RequestIDHeader)
	if own == "req-42" || len(own) < 16 {
		t.Fatalf("request id sent back = %q, want the server's own", own)
	}
	resp = s.post(t, signalPath, signalBody)
	generated := resp.header.Get(httpapi.RequestIDHeader)
	if len(generated) < 16 || generated == own {
		t.Fatalf("generated request id = %q", generated)
	}
	// A long id, with spaces and bytes outside ASCII, is kept bounded and
	// printable.
	long := "a b\tü" + strings.Repeat("x", 300)
	s.do(t, http.MethodPost, signalPath, strings.NewReader(signalBody),
		http.Header{"Content-Type": {"application/json"}, httpapi.RequestIDHeader: {long}})

	var line map[string]any
	var longClient any
	for _, l := range strings.Split(strings.TrimSpace(s.log.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line is not JSON: %q", l)
		}
		if m["message"] != "request" {
			continue
		}
		if m["requestId"] == "req-42" || (m["requestId"] == generated && m["clientRequestId"] != nil) {
			t.Fatalf("access log line with the client's id as its own: %v", m)
		}
		if m["requestId"] == own {
			line = m
		}
		if c, _ := m["clientRequestId"].(string); strings.HasPrefix(c, "a?b") {
			longClient = c
		}
	}
	if line == nil || line["clientRequestId"] != "req-42" {
		t.Fatalf("no access log line for %s with clientRequestId req-42: %s", own, s.log.String())
	}
	if want := "a?b???" + strings.Repeat("x", 122); longClient != want {
		t.Fatalf("clientRequestId of a long id = %q, want %q", longClient, want)
	}
	for k, want := range map[string]any{"method": "POST", "path": signalPath, "status": float64(200), "workflowId": "wf-1"} {
		if line[k] != want {
			t.Errorf("access log %s = %v, want %v", k, line[k], want)
		}
	}
	if _, ok := line["duration"]; !ok {
		t.Errorf("access log has no duration: %v", line)
	}
}

func TestPanicRecovery(t *testing.T) {
	s := newTestServer(t, httpapi.Options{})
	resp := s.post(t, signalPath, `{"workflowId":"panic","signalChannelName":"ch"}`)
	if resp.status != 500 {
		t.Fatalf("got %d %s", resp.status, resp.body)
	}
	if d := resp.errorResponse(t)["detail"]; d != "internal server error" {
		t.Errorf("detail = %v", d)
	}
	if !strings.Contains(s.log.String(), "boom") {
		t.Errorf("panic not logged: %s", s.log.String())
	}
	// The server keeps serving.
	if resp := s.post(t, signalPath, signalBody); resp.status != 200 {
		t.Fatalf("after panic: %d %s", resp.status, resp.body)
	}
}

func TestNewHandlerRejectsBadOptions(t *testing.T) {
	if _, err := httpapi.NewHandler(nil, httpapi.Options{}); err == nil {
		t.Error("nil service accepted")
	}
	if _, err := httpapi.NewHandler(&fakeService{}, httpapi.Options{MaxBodyBytes: -1}); err == nil {
		t.Error("negative MaxBodyBytes accepted")
	}
}
