package tracing

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/iwf-server/iwf-server/engine"
)

// ScopeName is the instrumentation scope of the server's spans.
const ScopeName = "github.com/iwf-server/iwf-server"

// DefaultServiceName is the service.name of the spans unless
// OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES names another.
const DefaultServiceName = "iwf-server"

// Provider is tracing set up from the environment: a tracer provider that
// batches spans to an OTLP/HTTP exporter.
type Provider struct {
	tp       *sdktrace.TracerProvider
	tracer   trace.Tracer
	endpoint string
}

// Getenv reads an environment variable (os.Getenv in production).
type Getenv func(string) string

// Enabled reports whether the environment turns tracing on: an OTLP
// endpoint is set, and neither OTEL_SDK_DISABLED=true nor
// OTEL_TRACES_EXPORTER=none turns it off.
func Enabled(getenv Getenv) bool {
	if getenv == nil {
		getenv = os.Getenv
	}
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return false
	}
	if strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")) == "none" {
		return false
	}
	return endpoint(getenv) != ""
}

func endpoint(getenv Getenv) string {
	if e := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")); e != "" {
		return e
	}
	return strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_ENDPOINT"))
}

// check validates the settings this package reads itself; the exporter
// and the SDK read the rest (headers, timeout, compression, sampler,
// batching) and ignore what they cannot parse, as the specification says.
func check(getenv Getenv) error {
	protocol := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"))
	name := "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	if protocol == "" {
		protocol, name = strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_PROTOCOL")), "OTEL_EXPORTER_OTLP_PROTOCOL"
	}
	switch protocol {
	case "", "http/protobuf":
	case "grpc":
		return fmt.Errorf("tracing: %s=grpc is not supported: iwf-server exports OTLP over HTTP only; set it to http/protobuf (an OpenTelemetry Collector receives both, on ports 4318 and 4317)", name)
	default:
		return fmt.Errorf("tracing: %s=%q is not supported; the supported protocol is http/protobuf", name, protocol)
	}
	if e := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); e != "" && e != "otlp" && e != "none" {
		return fmt.Errorf("tracing: OTEL_TRACES_EXPORTER=%q is not supported; use otlp (or none to turn tracing off)", e)
	}
	ep := endpoint(getenv)
	if !strings.HasPrefix(ep, "http://") && !strings.HasPrefix(ep, "https://") {
		return fmt.Errorf("tracing: the OTLP endpoint %q must be an http:// or https:// URL (e.g. http://localhost:4318)", ep)
	}
	return nil
}

// FromEnv sets tracing up from the OTEL_* environment variables. It
// returns nil and no error when tracing is off (see Enabled), and an error
// that names the variable when a setting cannot work. Shutdown flushes the
// spans still buffered.
func FromEnv(ctx context.Context, getenv Getenv) (*Provider, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	if !Enabled(getenv) {
		return nil, nil
	}
	if err := check(getenv); err != nil {
		return nil, err
	}
	// The exporter reads OTEL_EXPORTER_OTLP_* (endpoint, headers, timeout,
	// compression, certificates) itself.
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("tracing: the OTLP/HTTP exporter: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", DefaultServiceName)),
		resource.WithTelemetrySDK(), resource.WithHost(), resource.WithFromEnv())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("tracing: the resource (OTEL_RESOURCE_ATTRIBUTES, OTEL_SERVICE_NAME): %w", err)
	}
	// The sampler (OTEL_TRACES_SAMPLER, default parentbased_always_on) and
	// the batching (OTEL_BSP_*) come from the environment too.
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res), sdktrace.WithIDGenerator(idGenerator{}))
	return &Provider{tp: tp, tracer: tp.Tracer(ScopeName), endpoint: endpoint(getenv)}, nil
}

// Tracer returns the server's tracer; nil for a nil Provider (tracing off),
// which is what engine.Config.Tracer and the functions of this package
// take as off.
func (p *Provider) Tracer() trace.Tracer {
	if p == nil {
		return nil
	}
	return p.tracer
}

// Endpoint is the OTLP endpoint spans are sent to.
func (p *Provider) Endpoint() string {
	if p == nil {
		return ""
	}
	return p.endpoint
}

// Shutdown exports the spans still buffered, until ctx ends, and stops.
func (p *Provider) Shutdown(ctx context.Context) error {
	if p == nil {
		return nil
	}
	return p.tp.Shutdown(ctx)
}

// idGenerator makes random trace and span ids, except that a span the
// engine asks a fixed id for (a state execution's, whose phases already
// name it as their parent; see engine.FixedSpanID) gets that id.
type idGenerator struct{}

// NewIDs returns a random trace id and a span id (see NewSpanID).
func (idGenerator) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	var tid trace.TraceID
	for !tid.IsValid() {
		putUint64(tid[:8], rand.Uint64())
		putUint64(tid[8:], rand.Uint64())
	}
	return tid, idGenerator{}.NewSpanID(ctx, tid)
}

// NewSpanID returns the id engine.FixedSpanID asks for, or a random one.
func (idGenerator) NewSpanID(ctx context.Context, _ trace.TraceID) trace.SpanID {
	if id, ok := engine.FixedSpanID(ctx); ok && id.IsValid() {
		return id
	}
	var sid trace.SpanID
	for !sid.IsValid() {
		putUint64(sid[:], rand.Uint64())
	}
	return sid
}

func putUint64(b []byte, v uint64) {
	for i := range 8 {
		b[i] = byte(v >> (56 - 8*i))
	}
}
