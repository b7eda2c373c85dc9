package tracing

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

func env(kv map[string]string) Getenv { return func(k string) string { return kv[k] } }

func TestEnabled(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want bool
	}{
		{map[string]string{}, false},
		{map[string]string{"OTEL_SERVICE_NAME": "x", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_SDK_DISABLED": "true"}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_TRACES_EXPORTER": "none"}, false},
	} {
		if got := Enabled(env(c.env)); got != c.want {
			t.Errorf("Enabled(%v) = %v, want %v", c.env, got, c.want)
		}
	}
}

func TestFromEnvOff(t *testing.T) {
	p, err := FromEnv(context.Background(), env(map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}))
	if err != nil || p != nil {
		t.Fatalf("without an endpoint: %v, %v; want nil, nil", p, err)
	}
	if p.Tracer() != nil || p.Endpoint() != "" || p.Shutdown(context.Background()) != nil {
		t.Fatal("a nil Provider must read as off")
	}
}

func TestFromEnvRefusesWhatCannotWork(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "OTEL_EXPORTER_OTLP_PROTOCOL=grpc is not supported"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc"}, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=grpc is not supported"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, `"http/json" is not supported`},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "c:4318"}, "must be an http:// or https:// URL"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "zipkin"}, `OTEL_TRACES_EXPORTER="zipkin" is not supported`},
	} {
		p, err := FromEnv(context.Background(), env(c.env))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("FromEnv(%v) = %v, %v; want an error containing %q", c.env, p, err, c.want)
		}
	}
	p, err := FromEnv(context.Background(), env(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}))
	if err != nil || p == nil || p.Tracer() == nil || p.Endpoint() != "http://127.0.0.1:1" {
		t.Fatalf("http/protobuf: %v, %v", p, err)
	}
	p.Shutdown(context.Background())
}

// TestOffIsPassThrough: with tracing off the handler is not wrapped, so
// requests take the untraced path.
func TestOffIsPassThrough(t *testing.T) {
	h := &countingHandler{}
	if got := Handler(nil, h); got != http.Handler(h) {
		t.Fatalf("Handler(nil, h) = %T, want h itself", got)
	}
}

type countingHandler struct{ n int }

func (h *countingHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.n++
	if r.URL.Path == "/api/v1/workflow/stop" {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
}

func recorder() (*tracetest.SpanRecorder, trace.Tracer) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithIDGenerator(idGenerator{}))
	return rec, tp.Tracer("test")
}

func attr(s sdktrace.ReadOnlySpan, key string) attribute.Value {
	for _, a := range s.Attributes() {
		if string(a.Key) == key {
			return a.Value
		}
	}
	return attribute.Value{}
}

func TestHandlerSpans(t *testing.T) {
	rec, tr := recorder()
	h := &countingHandler{}
	srv := Handler(tr, h)
	serve := func(method, path, traceparent string) {
		req := httptest.NewRequest(method, path, nil)
		if traceparent != "" {
			req.Header.Set("traceparent", traceparent)
		}
		srv.ServeHTTP(httptest.NewRecorder(), req)
	}
	serve("POST", "/api/v1/workflow/start", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	serve("POST", "/api/v1/workflow/stop", "")
	serve("POST", "/api/v1/no/such/path/123", "")
	serve("GET", "/metrics", "")
	serve("GET", "/ui/", "")
	if h.n != 5 {
		t.Fatalf("the handler served %d requests, want 5", h.n)
	}
	spans := rec.Ended()
	if len(spans) != 3 {
		t.Fatalf("%d spans, want 3 (the API requests only)", len(spans))
	}
	start, stop, unknown := spans[0], spans[1], spans[2]
	if start.Name() != "POST /api/v1/workflow/start" || start.SpanKind() != trace.SpanKindServer {
		t.Errorf("start: %q %v", start.Name(), start.SpanKind())
	}
	if start.Parent().TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || start.Parent().SpanID().String() != "00f067aa0ba902b7" ||
		start.SpanContext().TraceID() != start.Parent().TraceID() {
		t.Errorf("start: parent %v, want the caller's traceparent", start.Parent())
	}
	if attr(start, "http.response.status_code").AsInt64() != 200 || attr(start, "http.route").AsString() != "/api/v1/workflow/start" {
		t.Errorf("start attributes: %v", start.Attributes())
	}
	if stop.Parent().IsValid() || stop.Status().Code.String() != "Error" || attr(stop, "http.response.status_code").AsInt64() != 503 {
		t.Errorf("stop: parent %v status %v attributes %v; want a root span marked failed with 503", stop.Parent(), stop.Status(), stop.Attributes())
	}
	if unknown.Name() != "POST /api/*" {
		t.Errorf("an unknown path's span is %q, want the bounded name POST /api/*", unknown.Name())
	}
}
