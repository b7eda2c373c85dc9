package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine"

	"github.com/iwf-server/iwf-server/internal/audit"
	"github.com/iwf-server/iwf-server/internal/auth"
)

// stubService satisfies Service; the tests below never reach it.
type stubService struct{ Service }

// TestAccessTableCoversEveryRoute walks the API's router: every route has
// a rule in the access table and every API rule names a route; a route
// added without a rule makes NewHandler fail.
func TestAccessTableCoversEveryRoute(t *testing.T) {
	h, err := NewHandler(stubService{}, Options{Metrics: func(io.Writer) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	var routes []string
	if err := chi.Walk(h.(chi.Routes), func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		routes = append(routes, method+" "+route)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var rules []string
	for _, r := range auth.Rules {
		if !r.Console {
			rules = append(rules, r.Method+" "+r.Path)
		}
	}
	sort.Strings(routes)
	sort.Strings(rules)
	if strings.Join(routes, "\n") != strings.Join(rules, "\n") {
		t.Fatalf("routes:\n%s\nAPI rules of the access table:\n%s", strings.Join(routes, "\n"), strings.Join(rules, "\n"))
	}

	r := chi.NewRouter()
	r.Post("/api/v1/workflow/get", func(http.ResponseWriter, *http.Request) {})
	r.Post("/api/v1/unmapped/route", func(http.ResponseWriter, *http.Request) {})
	r.Get("/ui/anything", func(http.ResponseWriter, *http.Request) {}) // the console checks its own
	err = checkRoutes(r, "/ui/")
	if err == nil || !strings.Contains(err.Error(), "POST /api/v1/unmapped/route") || strings.Contains(err.Error(), "workflow/get") || strings.Contains(err.Error(), "/ui/") {
		t.Fatalf("an unmapped route: %v", err)
	}
}

// TestAccessEnforcedAndAudited: a call outside the principal's role is a
// 403 ErrorResponse naming the role needed, and written to the audit log
// as forbidden; a permitted mutating call is written with its outcome.
func TestAccessEnforcedAndAudited(t *testing.T) {
	var logged bytes.Buffer
	who := auth.Principal{Actor: "dashboard", Role: auth.RoleReader}
	guard := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(w, r.WithContext(auth.WithPrincipal(r.Context(), who)))
		})
	}
	h, err := NewHandler(stubService{}, Options{Guard: guard, Audit: audit.NewWriter(&logged)})
	if err != nil {
		t.Fatal(err)
	}
	post := func(path, body string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.RemoteAddr = "192.0.2.7:4321"
		req.Header.Set(RequestIDHeader, "forged-id")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	rec := post("/api/v1/workflow/stop", `{"workflowId":"wf-1","workflowRunId":"run-1"}`)
	var body map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || rec.Code != 403 {
		t.Fatalf("stop as reader: %d %s", rec.Code, rec.Body)
	}
	if body["detail"] != "forbidden: POST /api/v1/workflow/stop needs the operator role (or all); token dashboard has the reader role" {
		t.Fatalf("403 body %v", body)
	}
	var e audit.Entry
	if err := json.Unmarshal(logged.Bytes(), &e); err != nil {
		t.Fatalf("audit line %q: %v", logged.String(), err)
	}
	if e.Actor != "dashboard" || e.Role != "reader" || e.Operation != "stop" || e.WorkflowID != "wf-1" || e.RunID != "run-1" ||
		e.Outcome != "forbidden" || e.Status != 403 || e.RemoteAddr != "192.0.2.7:4321" || e.Source != "api" || e.Time.IsZero() {
		t.Fatalf("audit entry %+v", e)
	}
	// The client's X-Request-Id is marked as the client's; the request id
	// is the server's own, the one its answer names.
	if e.ClientRequestID != "forged-id" || e.RequestID == "forged-id" || e.RequestID != rec.Header().Get(RequestIDHeader) {
		t.Fatalf("audit entry request ids: requestId %q clientRequestId %q, answer's %q", e.RequestID, e.ClientRequestID, rec.Header().Get(RequestIDHeader))
	}
	// A read is neither refused nor audited; an invalid write by a writer
	// is audited with its outcome.
	logged.Reset()
	if rec := post("/api/v1/workflow/get", `{}`); rec.Code == 403 {
		t.Fatalf("get as reader: %d %s", rec.Code, rec.Body)
	}
	if logged.Len() != 0 {
		t.Fatalf("a read was audited: %s", logged.String())
	}
	who = auth.Principal{Actor: "app", Role: auth.RoleWriter}
	if rec := post("/api/v1/workflow/signal", `{"workflowId":"wf-2"}`); rec.Code != 400 {
		t.Fatalf("invalid signal: %d %s", rec.Code, rec.Body)
	}
	e = audit.Entry{}
	if err := json.Unmarshal(logged.Bytes(), &e); err != nil || e.Actor != "app" || e.Operation != "signal" || e.Outcome != "invalid_argument" || e.Status != 400 || e.WorkflowID != "wf-2" {
		t.Fatalf("audit entry %+v (%v)", e, err)
	}
}

// batchService answers the batch calls of TestBatchAccessAndAudit.
type batchService struct{ Service }

func (batchService) StartBatch(context.Context, engine.BatchRequest) (engine.BatchStarted, error) {
	return engine.BatchStarted{ID: "batch-7", Matched: 3}, nil
}

func (batchService) CancelBatch(_ context.Context, id string) (engine.BatchInfo, error) {
	return engine.BatchInfo{ID: id, State: engine.BatchCancelled}, nil
}

// TestBatchAccessAndAudit: the batch calls need the operator role; a
// batch start and a batch cancel are audited with the batch's id.
func TestBatchAccessAndAudit(t *testing.T) {
	var logged bytes.Buffer
	who := auth.Principal{Actor: "app", Role: auth.RoleWriter}
	guard := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(w, r.WithContext(auth.WithPrincipal(r.Context(), who)))
		})
	}
	h, err := NewHandler(batchService{}, Options{Guard: guard, Audit: audit.NewWriter(&logged)})
	if err != nil {
		t.Fatal(err)
	}
	post := func(path, body string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	entry := func() audit.Entry {
		t.Helper()
		var e audit.Entry
		if err := json.Unmarshal(logged.Bytes(), &e); err != nil {
			t.Fatalf("audit line %q: %v", logged.String(), err)
		}
		logged.Reset()
		return e
	}
	start := `{"query":"WorkflowType = 'A'","operation":"TERMINATE"}`
	for _, path := range []string{"start", "describe", "list", "cancel"} {
		if rec := post("/api/v1/batch/"+path, `{"batchId":"b"}`); rec.Code != 403 || !strings.Contains(rec.Body.String(), "needs the operator role") {
			t.Errorf("batch/%s as writer: %d %s", path, rec.Code, rec.Body)
		}
	}
	logged.Reset()
	who = auth.Principal{Actor: "oncall", Role: auth.RoleOperator}
	if rec := post("/api/v1/batch/start", start); rec.Code != 200 {
		t.Fatalf("batch/start as operator: %d %s", rec.Code, rec.Body)
	}
	if e := entry(); e.Operation != "batch/start" || e.BatchID != "batch-7" || e.Actor != "oncall" || e.Outcome != "ok" {
		t.Errorf("batch/start audit entry %+v", e)
	}
	if rec := post("/api/v1/batch/cancel", `{"batchId":"batch-7"}`); rec.Code != 200 {
		t.Fatalf("batch/cancel as operator: %d %s", rec.Code, rec.Body)
	}
	if e := entry(); e.Operation != "batch/cancel" || e.BatchID != "batch-7" || e.Outcome != "ok" {
		t.Errorf("batch/cancel audit entry %+v", e)
	}
	if rec := post("/api/v1/batch/start", `{"query":"x"}`); rec.Code != 400 {
		t.Errorf("batch/start without an operation: %d %s", rec.Code, rec.Body)
	}
}

// TestBatchStartRolePerOperation: batch/start needs, besides the operator
// role, what the operation needs on one run, so a batch never does what
// its caller could not do run by run: each operation against each role,
// through the whole handler. A refused start is a 403 naming the role,
// written to the audit log as forbidden, and never reaches the Service.
func TestBatchStartRolePerOperation(t *testing.T) {
	var logged bytes.Buffer
	var who auth.Principal
	guard := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(w, r.WithContext(auth.WithPrincipal(r.Context(), who)))
		})
	}
	svc := &countingBatchService{}
	h, err := NewHandler(svc, Options{Guard: guard, Audit: audit.NewWriter(&logged)})
	if err != nil {
		t.Fatal(err)
	}
	// The single-run call of each operation, and a body for the batch.
	ops := []struct {
		op     iwfapi.BatchOperation
		direct string
		body   string
	}{
		{iwfapi.BatchOperationTerminate, "stop", `{"query":"WorkflowId = 'w3'","operation":"TERMINATE"}`},
		{iwfapi.BatchOperationCancel, "stop", `{"query":"WorkflowId = 'w3'","operation":"CANCEL"}`},
		{iwfapi.BatchOperationFail, "stop", `{"query":"WorkflowId = 'w3'","operation":"FAIL"}`},
		{iwfapi.BatchOperationSignal, "signal", `{"query":"WorkflowId = 'w3'","operation":"SIGNAL","signalChannelName":"go"}`},
		{iwfapi.BatchOperationReset, "reset", `{"query":"WorkflowId = 'w3'","operation":"RESET","reset":{"resetType":"BEGINNING"}}`},
		{iwfapi.BatchOperationSkipTimer, "timer/skip", `{"query":"WorkflowId = 'w3'","operation":"SKIP_TIMER","skipTimer":{"workflowStateExecutionId":"S-1","timerCommandIndex":0}}`},
		{iwfapi.BatchOperationPause, "pause", `{"query":"WorkflowId = 'w3'","operation":"PAUSE"}`},
		{iwfapi.BatchOperationResume, "resume", `{"query":"WorkflowId = 'w3'","operation":"RESUME"}`},
		// A re-route has no single-run call: batch/start's role is all it needs.
		{iwfapi.BatchOperationSetWorkerUrl, "batch", `{"query":"WorkflowId = 'w3'","operation":"SET_WORKER_URL","workerUrl":"http://green:8803"}`},
	}
	// Each role's expected answer: 200 where the role may make the
	// single-run call and batch/start, 403 elsewhere.
	may := map[auth.Role]map[string]bool{
		auth.RoleReader:   {},
		auth.RoleWriter:   {},
		auth.RoleOperator: {"stop": true, "reset": true, "timer/skip": true, "pause": true, "resume": true, "batch": true},
		auth.RoleAll:      {"stop": true, "signal": true, "reset": true, "timer/skip": true, "pause": true, "resume": true, "batch": true},
	}
	for _, o := range ops {
		for _, role := range []auth.Role{auth.RoleReader, auth.RoleWriter, auth.RoleOperator, auth.RoleAll} {
			who = auth.Principal{Actor: "tok-" + string(role), Role: role}
			logged.Reset()
			before := svc.started
			req := httptest.NewRequest("POST", "/api/v1/batch/start", strings.NewReader(o.body))
			req.Header.Set("Content-Type", "application/json")
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			want := http.StatusForbidden
			if may[role][o.direct] {
				want = http.StatusOK
			}
			if rec.Code != want {
				t.Errorf("%s batch as %s: %d %s, want %d", o.op, role, rec.Code, rec.Body, want)
				continue
			}
			var e audit.Entry
			if err := json.Unmarshal(logged.Bytes(), &e); err != nil {
				t.Fatalf("%s batch as %s: audit line %q: %v", o.op, role, logged.String(), err)
			}
			if want == http.StatusOK {
				if svc.started != before+1 || e.Outcome != "ok" {
					t.Errorf("%s batch as %s: started %d, audit %+v", o.op, role, svc.started-before, e)
				}
				continue
			}
			if svc.started != before || e.Outcome != "forbidden" || e.Status != 403 || e.Operation != "batch/start" || e.Actor != who.Actor {
				t.Errorf("%s batch as %s: started %d, audit %+v", o.op, role, svc.started-before, e)
			}
			var body iwfapi.ErrorResponse
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || !strings.HasPrefix(deref(body.Detail), "forbidden: ") ||
				!strings.Contains(deref(body.Detail), "has the "+string(role)+" role") {
				t.Errorf("%s batch as %s: 403 body %s", o.op, role, rec.Body)
			}
		}
	}
	// The one-run SIGNAL batch of an on-call token is refused with the
	// role it needs and why.
	who = auth.Principal{Actor: "oncall", Role: auth.RoleOperator}
	req := httptest.NewRequest("POST", "/api/v1/batch/start", strings.NewReader(`{"query":"WorkflowId = 'w3'","operation":"SIGNAL","signalChannelName":"go"}`))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusForbidden || !strings.Contains(rec.Body.String(), "a SIGNAL batch needs the all role") ||
		!strings.Contains(rec.Body.String(), "/api/v1/workflow/signal") {
		t.Errorf("operator's SIGNAL batch: %d %s", rec.Code, rec.Body)
	}
}

// countingBatchService counts the batch starts that reach it.
type countingBatchService struct {
	Service
	started int
}

func (s *countingBatchService) StartBatch(context.Context, engine.BatchRequest) (engine.BatchStarted, error) {
	s.started++
	return engine.BatchStarted{ID: "batch-1", Matched: 1}, nil
}
