package iwf_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/iwf-server/iwf-server/sdk-go/iwf"
)

type tracedState struct {
	got *iwf.TraceContext
	ok  *bool
}

func (tracedState) ID() string { return "T" }

func (s tracedState) Execute(ctx iwf.Context, _ iwf.Object, _ iwf.CommandResults, _ iwf.Persistence, _ iwf.Communication) (*iwf.StateDecision, error) {
	*s.got, *s.ok = iwf.TraceContextFrom(ctx)
	return iwf.GracefulCompleteWorkflow(nil), nil
}

// TestWorkerContextCarriesTraceparent: the handler's ctx carries the
// server's valid traceparent and its tracestate; an invalid one is
// dropped.
func TestWorkerContextCarriesTraceparent(t *testing.T) {
	var got iwf.TraceContext
	var ok bool
	registry, err := iwf.NewRegistry(&iwf.Workflow{Type: "W", StartState: tracedState{&got, &ok}})
	if err != nil {
		t.Fatal(err)
	}
	worker := iwf.NewWorkerService(registry, nil)
	body := `{"context":{"workflowId":"w","workflowRunId":"r","workflowStartedTimestamp":1,"stateExecutionId":"T-1","attempt":1},
	  "workflowType":"W","workflowStateId":"T"}`
	valid := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for _, c := range []struct {
		traceparent, tracestate string
		want                    bool
	}{
		{valid, "vendor=v1", true},
		{valid, "", true},
		{"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-future", "", true}, // a later version, extended
		{"", "vendor=v1", false},
		{"00-00000000000000000000000000000000-00f067aa0ba902b7-01", "", false},   // zero trace id
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", "", false},   // zero span id
		{"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", "", false},   // upper case
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x", "", false}, // version 00 is exact
		{"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "", false},   // version ff
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7", "", false},      // short
	} {
		got, ok = iwf.TraceContext{}, false
		req := httptest.NewRequest(http.MethodPost, iwf.ExecutePath, strings.NewReader(body))
		if c.traceparent != "" {
			req.Header.Set("traceparent", c.traceparent)
		}
		if c.tracestate != "" {
			req.Header.Set("tracestate", c.tracestate)
		}
		rec := httptest.NewRecorder()
		worker.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			t.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
		if ok != c.want {
			t.Errorf("traceparent %q: TraceContextFrom ok = %v, want %v", c.traceparent, ok, c.want)
			continue
		}
		if !c.want {
			continue
		}
		if got.TraceParent != c.traceparent || got.TraceState != c.tracestate || got.TraceID() != "4bf92f3577b34da6a3ce929d0e0e4736" || got.SpanID() != "00f067aa0ba902b7" {
			t.Errorf("traceparent %q: got %+v, trace %q span %q", c.traceparent, got, got.TraceID(), got.SpanID())
		}
	}
}

// TestClientSendsTraceContext: the trace context of the caller's ctx
// travels with the request, so that the run joins the caller's trace.
func TestClientSendsTraceContext(t *testing.T) {
	type hdr struct{ parent, state string }
	headers := make(chan hdr, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		headers <- hdr{r.Header.Get("traceparent"), r.Header.Get("tracestate")}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{}`))
	}))
	defer srv.Close()
	client, err := iwf.NewClient(srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	tc := iwf.TraceContext{TraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", TraceState: "vendor=v1"}
	for _, c := range []struct {
		ctx  context.Context
		want hdr
	}{
		{iwf.WithTraceContext(context.Background(), tc), hdr{tc.TraceParent, tc.TraceState}},
		{context.Background(), hdr{}},
		{iwf.WithTraceContext(context.Background(), iwf.TraceContext{TraceParent: "garbage"}), hdr{}},
	} {
		if err := client.SignalWorkflow(c.ctx, "w", "", "ch", 1); err != nil {
			t.Fatal(err)
		}
		if got := <-headers; got != c.want {
			t.Errorf("sent %+v, want %+v", got, c.want)
		}
	}
}
