package iwf_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/iwf-server/iwf-server/sdk-go/iwf"
)

type tracedState struct{ got *trace.SpanContext }

func (tracedState) ID() string { return "T" }

func (s tracedState) Execute(ctx iwf.Context, _ iwf.Object, _ iwf.CommandResults, _ iwf.Persistence, _ iwf.Communication) (*iwf.StateDecision, error) {
	*s.got = trace.SpanContextFromContext(ctx)
	return iwf.GracefulCompleteWorkflow(nil), nil
}

// TestWorkerContextCarriesTraceparent: the handler's ctx carries the
// server's traceparent/tracestate as its remote span context.
func TestWorkerContextCarriesTraceparent(t *testing.T) {
	var got trace.SpanContext
	registry, err := iwf.NewRegistry(&iwf.Workflow{Type: "W", StartState: tracedState{&got}})
	if err != nil {
		t.Fatal(err)
	}
	worker := iwf.NewWorkerService(registry, nil)
	body := `{"context":{"workflowId":"w","workflowRunId":"r","workflowStartedTimestamp":1,"stateExecutionId":"T-1","attempt":1},
	  "workflowType":"W","workflowStateId":"T"}`
	for _, c := range []struct{ traceparent, tracestate, wantTrace, wantSpan, wantState string }{
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "vendor=v1", "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7", "vendor=v1"},
		{"", "", "", "", ""},
		{"00-00000000000000000000000000000000-00f067aa0ba902b7-01", "", "", "", ""}, // invalid: ignored
	} {
		got = trace.SpanContext{}
		req := httptest.NewRequest(http.MethodPost, iwf.ExecutePath, strings.NewReader(body))
		if c.traceparent != "" {
			req.Header.Set("traceparent", c.traceparent)
			req.Header.Set("tracestate", c.tracestate)
		}
		rec := httptest.NewRecorder()
		worker.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			t.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
		if c.wantTrace == "" {
			if got.IsValid() {
				t.Errorf("traceparent %q: the ctx has span context %v, want none", c.traceparent, got)
			}
			continue
		}
		if got.TraceID().String() != c.wantTrace || got.SpanID().String() != c.wantSpan || !got.IsRemote() || !got.IsSampled() ||
			got.TraceState().String() != c.wantState {
			t.Errorf("traceparent %q: the ctx has %s/%s remote %v sampled %v state %q", c.traceparent, got.TraceID(), got.SpanID(), got.IsRemote(), got.IsSampled(), got.TraceState())
		}
	}
}

// TestClientSendsTraceparent: a span context in the caller's ctx travels
// with the request, so that the run joins the caller's trace.
func TestClientSendsTraceparent(t *testing.T) {
	headers := make(chan string, 2)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		headers <- r.Header.Get("traceparent")
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{}`))
	}))
	defer srv.Close()
	client, err := iwf.NewClient(srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ctx := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled}))
	if err := client.SignalWorkflow(ctx, "w", "", "ch", 1); err != nil {
		t.Fatal(err)
	}
	if got := <-headers; got != "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" {
		t.Errorf("traceparent %q", got)
	}
	if err := client.SignalWorkflow(context.Background(), "w", "", "ch", 1); err != nil {
		t.Fatal(err)
	}
	if got := <-headers; got != "" {
		t.Errorf("without a span: traceparent %q, want none", got)
	}
}
