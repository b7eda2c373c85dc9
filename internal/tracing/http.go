package tracing

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/iwf-server/iwf-server/api/iwfapi"
)

// APIPrefix is where the traced requests are: the REST API. The console,
// /metrics and the health check are not traced.
const APIPrefix = "/api/"

// Handler wraps the server's handler so that every API request gets a
// server span named by its route ("POST /api/v1/workflow/start"), a child
// of the caller's traceparent/tracestate when the request carries them.
// The engine, under the request's context, adds the workflow and run ids
// and stores the span's context with a run it starts. With a nil tracer
// (tracing off) it returns next itself.
func Handler(tr trace.Tracer, next http.Handler) http.Handler {
	if tr == nil {
		return next
	}
	routes := apiRoutes()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, APIPrefix) {
			next.ServeHTTP(w, r)
			return
		}
		route, known := routes[r.Method+" "+r.URL.Path]
		if !known {
			// Unknown paths are answered 404/405; their names stay bounded.
			route = r.Method + " " + APIPrefix + "*"
		}
		ctx := propagation.TraceContext{}.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		ctx, span := tr.Start(ctx, route, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(
			attribute.String("http.request.method", r.Method),
			attribute.String("http.route", strings.TrimPrefix(route, r.Method+" ")),
			attribute.String("url.path", r.URL.Path)))
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			status := sw.status
			if status == 0 {
				status = http.StatusOK
			}
			span.SetAttributes(attribute.Int("http.response.status_code", status))
			if status >= 500 {
				span.SetStatus(codes.Error, http.StatusText(status))
			}
			span.End()
		}()
		next.ServeHTTP(sw, r.WithContext(ctx))
	})
}

// apiRoutes are the operations of the API spec, "METHOD /path" to itself.
func apiRoutes() map[string]string {
	routes := map[string]string{}
	spec, err := iwfapi.GetSwagger()
	if err != nil || spec.Paths == nil {
		return routes
	}
	for path, item := range spec.Paths.Map() {
		for method := range item.Operations() {
			name := strings.ToUpper(method) + " " + path
			routes[name] = name
		}
	}
	return routes
}

// statusWriter remembers the status of an answer.
type statusWriter struct {
	http.ResponseWriter
	status int
}

// WriteHeader remembers the first status.
func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

// Write counts an answer without a status as 200.
func (w *statusWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush passes a flush on.
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Hijack passes a hijack on.
func (w *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if h, ok := w.ResponseWriter.(http.Hijacker); ok {
		return h.Hijack()
	}
	return nil, nil, errors.New("hijack not supported")
}
