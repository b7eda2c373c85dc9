package httpapi

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/internal/audit"
	"github.com/iwf-server/iwf-server/internal/auth"
)

// bodyService records, in its signal call, whether the request still
// holds its raw body.
type bodyService struct {
	Service
	held []byte
	got  iwfapi.WorkflowSignalRequest
}

func (s *bodyService) SignalWorkflow(ctx context.Context, req iwfapi.WorkflowSignalRequest) error {
	s.held, s.got = infoFrom(ctx).rawBody(), req
	return nil
}

// TestBodyReleasedOnceDecoded: an operation runs with its decoded request
// and without the raw body beside it; the access and audit logs still
// name the workflow the body named.
func TestBodyReleasedOnceDecoded(t *testing.T) {
	svc := &bodyService{}
	var logged, audited bytes.Buffer
	who := auth.Principal{Actor: "ops", Role: auth.RoleAll}
	guard := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(w, r.WithContext(auth.WithPrincipal(r.Context(), who)))
		})
	}
	h, err := NewHandler(svc, Options{Logger: zerolog.New(&logged), Audit: audit.NewWriter(&audited), Guard: guard})
	if err != nil {
		t.Fatal(err)
	}
	payload := strings.Repeat("p", 1<<20)
	body := `{"workflowId":"wf-body","workflowRunId":"run-1","signalChannelName":"s","signalValue":{"data":"` + payload + `"}}`
	req := httptest.NewRequest(http.MethodPost, "/api/v1/workflow/signal", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != 200 {
		t.Fatalf("signal: %d %s", rec.Code, rec.Body)
	}
	if svc.held != nil {
		t.Fatalf("the operation ran with the raw body held (%d bytes)", len(svc.held))
	}
	if deref(svc.got.SignalValue.Data) != payload || svc.got.WorkflowId != "wf-body" {
		t.Fatalf("the decoded request: %d bytes of data, workflow %q", len(deref(svc.got.SignalValue.Data)), svc.got.WorkflowId)
	}
	if !strings.Contains(logged.String(), `"workflowId":"wf-body"`) {
		t.Errorf("the access log does not name the workflow: %s", logged.String())
	}
	if !strings.Contains(audited.String(), `"workflowId":"wf-body"`) || !strings.Contains(audited.String(), `"runId":"run-1"`) {
		t.Errorf("the audit log does not name the run: %s", audited.String())
	}
}

// TestReadAllSizes: a body with a Content-Length is read into a buffer
// of that size; one that ends early is an error.
func TestReadAllSizes(t *testing.T) {
	b, err := readAll(strings.NewReader("hello"), 5)
	if err != nil || string(b) != "hello" || cap(b) != 5 {
		t.Fatalf("readAll = %q (cap %d), %v", b, cap(b), err)
	}
	if _, err := readAll(strings.NewReader("hel"), 5); err == nil || !strings.Contains(err.Error(), "Content-Length") {
		t.Fatalf("a short body: %v", err)
	}
	if b, err := readAll(strings.NewReader("chunked"), -1); err != nil || string(b) != "chunked" {
		t.Fatalf("an unknown size: %q %v", b, err)
	}
}
