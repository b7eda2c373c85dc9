// Package tracing sets up OpenTelemetry tracing from the standard OTEL_*
// environment variables and holds the server's instrumentation that lives
// outside the engine: the span of every API request (Handler). The engine
// starts the spans of state executions, their phases, worker calls and its
// own store calls itself (engine/tracing.go, engine/storetrace.go) with the
// tracer this package builds; nothing here wraps the store, so none of the
// store's optional interfaces can be hidden from the engine.
//
// Tracing is off unless OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set; then FromEnv returns nil and
// nothing in the server creates a span. Spans are exported with OTLP over
// HTTP (protobuf); the gRPC protocol is refused at start-up.
//
// It may import engine, api/iwfapi and the OpenTelemetry modules.
package tracing
