package engine_test

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine"
)

// TestTracingRunJoinsTheFirstTraceItIsGiven: a run started without a
// trace context (here through the Go API) has its spans in a trace of its
// own; the first signal that carries one gives the run its trace, in
// which the later phases are.
func TestTracingRunJoinsTheFirstTraceItIsGiven(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tr := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)).Tracer("test")
	forEachStoreWith(t, func(c *engine.Config) { c.Tracer = tr }, func(t *testing.T, h *harness) {
		id := "wf-trace-" + t.Name()
		h.worker.state("S1", stateHandlers{
			WaitUntil: func(req iwfapi.WorkflowStateStartRequest) (iwfapi.WorkflowStateStartResponse, int) {
				return iwfapi.WorkflowStateStartResponse{CommandRequest: &iwfapi.CommandRequest{
					CommandWaitingType: ptr(iwfapi.CommandWaitingTypeAllCompleted),
					SignalCommands:     &[]iwfapi.SignalCommand{{CommandId: ptr("go"), SignalChannelName: "go"}},
				}}, 200
			},
			Execute: func(req iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
				return decide(next(engine.ForceCompletingState, nil)), 200
			},
		})
		runID := h.start(id, "S1", nil)
		h.eventually("S1 waiting", func() bool { return h.worker.count("S1.waitUntil") == 1 })

		caller := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1, 2, 3}, SpanID: trace.SpanID{4, 5, 6}, TraceFlags: trace.FlagsSampled})
		ctx, signalSpan := tr.Start(trace.ContextWithRemoteSpanContext(context.Background(), caller), "POST /api/v1/workflow/signal")
		if err := h.eng.SignalWorkflow(ctx, iwfapi.WorkflowSignalRequest{WorkflowId: id, SignalChannelName: "go"}); err != nil {
			t.Fatal(err)
		}
		signalSpan.End()
		h.result(id)

		var waitUntil, execute, workerExecute []sdktrace.ReadOnlySpan
		for _, s := range rec.Ended() {
			var run string
			for _, a := range s.Attributes() {
				if a.Key == engine.AttrRunID {
					run = a.Value.AsString()
				}
			}
			if run != runID {
				continue
			}
			switch s.Name() {
			case "waitUntil S1":
				waitUntil = append(waitUntil, s)
			case "execute S1":
				execute = append(execute, s)
			case "worker execute":
				workerExecute = append(workerExecute, s)
			}
		}
		if len(waitUntil) != 1 || len(execute) != 1 || len(workerExecute) != 1 {
			t.Fatalf("spans of the run: %d waitUntil, %d execute, %d worker execute; want 1 each", len(waitUntil), len(execute), len(workerExecute))
		}
		if got := waitUntil[0].SpanContext().TraceID(); got == caller.TraceID() || !got.IsValid() {
			t.Errorf("waitUntil, before the signal: trace %s, want one of the run's own", got)
		}
		if got := execute[0].SpanContext().TraceID(); got != caller.TraceID() {
			t.Errorf("execute, after the signal: trace %s, want the signal's %s", got, caller.TraceID())
		}
		// Before and after the signal, the phases name one state span: its
		// id derives from the run and execution ids, in whichever trace.
		if waitUntil[0].Parent().SpanID() != execute[0].Parent().SpanID() {
			t.Errorf("the phases of S1-1 name different state spans: %s and %s", waitUntil[0].Parent().SpanID(), execute[0].Parent().SpanID())
		}
		if workerExecute[0].Parent().SpanID() != execute[0].SpanContext().SpanID() || workerExecute[0].SpanKind() != trace.SpanKindClient {
			t.Errorf("worker execute: parent %s kind %v, want the execute phase %s, client", workerExecute[0].Parent().SpanID(), workerExecute[0].SpanKind(), execute[0].SpanContext().SpanID())
		}
	})
}
