package iwf

import "context"

// TraceContext is a W3C trace context (https://www.w3.org/TR/trace-context/):
// the traceparent and tracestate headers of a traced call. The server
// sends the one of each worker call when it traces (docs/observability.md
// of iwf-server), and the worker service puts it into the handler's ctx
// (TraceContextFrom). The client sends the one of its ctx with every
// request (WithTraceContext), so that a run started or signalled by a
// traced caller joins the caller's trace.
//
// The SDK depends on the standard library only, so it carries the trace
// context as these two strings. With OpenTelemetry, a state continues the
// server's trace with
//
//	tc, _ := iwf.TraceContextFrom(ctx)
//	ctx = propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{"traceparent": tc.TraceParent, "tracestate": tc.TraceState})
//
// and a caller hands its span to the client with
//
//	carrier := propagation.MapCarrier{}
//	propagation.TraceContext{}.Inject(ctx, carrier)
//	ctx = iwf.WithTraceContext(ctx, iwf.TraceContext{TraceParent: carrier["traceparent"], TraceState: carrier["tracestate"]})
type TraceContext struct {
	// TraceParent is the traceparent header:
	// "00-<32 hex trace id>-<16 hex parent span id>-<2 hex flags>".
	TraceParent string
	// TraceState is the tracestate header, vendor data; may be empty.
	TraceState string
}

// TraceID is the trace id of a valid traceparent, 32 lower-case hex
// digits; "" otherwise.
func (tc TraceContext) TraceID() string {
	if !validTraceParent(tc.TraceParent) {
		return ""
	}
	return tc.TraceParent[3:35]
}

// SpanID is the parent span id of a valid traceparent, 16 lower-case hex
// digits: the span of the caller (for a worker call, the server's span of
// that call); "" otherwise.
func (tc TraceContext) SpanID() string {
	if !validTraceParent(tc.TraceParent) {
		return ""
	}
	return tc.TraceParent[36:52]
}

type traceContextKey struct{}

// WithTraceContext returns ctx carrying tc, which the client sends with
// its requests. A tc whose TraceParent is not valid is ignored.
func WithTraceContext(ctx context.Context, tc TraceContext) context.Context {
	if !validTraceParent(tc.TraceParent) {
		return ctx
	}
	if len(tc.TraceState) > maxTraceState {
		tc.TraceState = ""
	}
	return context.WithValue(ctx, traceContextKey{}, tc)
}

// TraceContextFrom returns the trace context ctx carries: in a state's or
// RPC's handler, the server's call's; ok is false when there is none.
func TraceContextFrom(ctx context.Context) (tc TraceContext, ok bool) {
	tc, ok = ctx.Value(traceContextKey{}).(TraceContext)
	return tc, ok
}

// maxTraceState bounds a kept tracestate (32 list members of at most 256
// characters would be 8 KB; real ones are far shorter).
const maxTraceState = 1024

// validTraceParent checks a traceparent as the W3C recommendation says a
// receiver must: version 00 exactly "00-<trace-id>-<parent-id>-<flags>"
// with lower-case hex and neither id all zeros; a higher version (not ff)
// at least that long, any rest after a '-'.
func validTraceParent(s string) bool {
	if len(s) < 55 || s[2] != '-' || s[35] != '-' || s[52] != '-' {
		return false
	}
	if !isHex(s[0:2]) || s[0:2] == "ff" || !isHex(s[3:35]) || !isHex(s[36:52]) || !isHex(s[53:55]) {
		return false
	}
	if s[0:2] == "00" && len(s) != 55 {
		return false
	}
	if len(s) > 55 && s[55] != '-' {
		return false
	}
	return !allZeros(s[3:35]) && !allZeros(s[36:52])
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

func allZeros(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] != '0' {
			return false
		}
	}
	return true
}
