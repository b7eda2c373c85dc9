package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/audit"
	"github.com/iwf-server/iwf-server/internal/auth"
)

// pauseService answers the pause calls of TestPauseAccessAndAudit; an RPC
// finds its run paused.
type pauseService struct {
	Service
	calls int
}

func (s *pauseService) PauseWorkflow(context.Context, engine.PauseRequest) error {
	s.calls++
	return nil
}
func (s *pauseService) ResumeWorkflow(context.Context, engine.ResumeRequest) error {
	s.calls++
	return nil
}
func (s *pauseService) ListPauses(context.Context) ([]engine.PauseInfo, error) {
	s.calls++
	return []engine.PauseInfo{{PauseScope: engine.PauseScope{WorkflowType: "Order"}, By: "oncall", At: time.UnixMilli(1700000000000), Held: 3}}, nil
}
func (s *pauseService) SetPause(_ context.Context, req engine.ScopePauseRequest) (engine.PauseInfo, error) {
	s.calls++
	return engine.PauseInfo{PauseScope: req.Scope, Reason: req.Reason, By: "oncall", At: time.UnixMilli(1700000000000)}, nil
}
func (s *pauseService) DeletePause(context.Context, engine.ScopeResumeRequest) (engine.ScopeResumed, error) {
	s.calls++
	return engine.ScopeResumed{Resumed: 2, LastDue: time.UnixMilli(1700000000500)}, nil
}
func (s *pauseService) InvokeRPC(context.Context, iwfapi.WorkflowRpcRequest) (iwfapi.WorkflowRpcResponse, error) {
	return iwfapi.WorkflowRpcResponse{}, engine.Errorf(engine.CodePaused, "workflow w1 run r1 is paused (paused by oncall: worker down)")
}

// TestPauseAccessAndAudit: pausing and resuming, a run or a scope, needs
// the operator role and is audited, a scope's with the scope; the list
// of paused scopes is for readers; an RPC of a paused run is a 409 with
// an iWF ErrorResponse that says so.
func TestPauseAccessAndAudit(t *testing.T) {
	var logged bytes.Buffer
	var who auth.Principal
	guard := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(w, r.WithContext(auth.WithPrincipal(r.Context(), who)))
		})
	}
	svc := &pauseService{}
	h, err := NewHandler(svc, Options{Guard: guard, Audit: audit.NewWriter(&logged)})
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
	calls := map[string]string{
		"/api/v1/workflow/pause":  `{"workflowId":"w1","reason":"worker down"}`,
		"/api/v1/workflow/resume": `{"workflowId":"w1","workflowRunId":"r1"}`,
		"/api/v1/pause/set":       `{"workflowType":"Order","reason":"bad deploy"}`,
		"/api/v1/pause/delete":    `{"workerHost":"blue.internal:8803","rps":5}`,
	}
	for _, role := range []auth.Role{auth.RoleReader, auth.RoleWriter} {
		who = auth.Principal{Actor: "tok-" + string(role), Role: role}
		for path, body := range calls {
			logged.Reset()
			if rec := post(path, body); rec.Code != http.StatusForbidden || !strings.Contains(rec.Body.String(), "needs the operator role") {
				t.Errorf("%s as %s: %d %s", path, role, rec.Code, rec.Body)
			}
			var e audit.Entry
			if err := json.Unmarshal(logged.Bytes(), &e); err != nil || e.Outcome != "forbidden" {
				t.Errorf("%s as %s: audit %q", path, role, logged.String())
			}
		}
		if rec := post("/api/v1/pause/list", `{}`); rec.Code != http.StatusOK {
			t.Errorf("pause/list as %s: %d %s", role, rec.Code, rec.Body)
		}
	}
	if svc.calls != 2 {
		t.Fatalf("%d calls reached the service, want the 2 lists", svc.calls)
	}
	who = auth.Principal{Actor: "oncall", Role: auth.RoleOperator}
	want := map[string]audit.Entry{
		"/api/v1/workflow/pause":  {Operation: "pause", WorkflowID: "w1"},
		"/api/v1/workflow/resume": {Operation: "resume", WorkflowID: "w1", RunID: "r1"},
		"/api/v1/pause/set":       {Operation: "pause/set", Scope: "type:Order"},
		"/api/v1/pause/delete":    {Operation: "pause/delete", Scope: "host:blue.internal:8803"},
	}
	for path, body := range calls {
		logged.Reset()
		rec := post(path, body)
		if rec.Code != http.StatusOK {
			t.Fatalf("%s as operator: %d %s", path, rec.Code, rec.Body)
		}
		var e audit.Entry
		if err := json.Unmarshal(logged.Bytes(), &e); err != nil {
			t.Fatalf("%s: audit line %q: %v", path, logged.String(), err)
		}
		w := want[path]
		if e.Operation != w.Operation || e.WorkflowID != w.WorkflowID || e.RunID != w.RunID || e.Scope != w.Scope || e.Actor != "oncall" || e.Outcome != "ok" {
			t.Errorf("%s: audit %+v, want %+v", path, e, w)
		}
		if path == "/api/v1/pause/delete" && !strings.Contains(rec.Body.String(), `"resumed":2`) {
			t.Errorf("pause/delete answer %s", rec.Body)
		}
	}
	rec := post("/api/v1/pause/list", `{}`)
	var list iwfapi.PauseListResponse
	if err := json.Unmarshal(rec.Body.Bytes(), &list); err != nil || len(list.Pauses) != 1 || deref(list.Pauses[0].WorkflowType) != "Order" || list.Pauses[0].HeldCalls != 3 {
		t.Errorf("pause/list: %s", rec.Body)
	}
	// An RPC of a paused run: 409, an iWF ErrorResponse saying so.
	who = auth.Principal{Actor: "app", Role: auth.RoleWriter}
	rec = post("/api/v1/workflow/rpc", `{"workflowId":"w1","rpcName":"r"}`)
	var body iwfapi.ErrorResponse
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || rec.Code != http.StatusConflict ||
		deref(body.SubStatus) != iwfapi.ErrorSubStatusUncategorized || !strings.Contains(deref(body.Detail), "is paused") {
		t.Errorf("RPC of a paused run: %d %s", rec.Code, rec.Body)
	}
}
