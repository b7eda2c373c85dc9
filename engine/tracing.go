package engine

// Tracing: the spans of state executions, their phases and worker calls,
// and the trace context a run keeps. Everything here is skipped when
// Config.Tracer is nil (tracing off): each hook costs a nil check.
//
// A run lives longer than any process, so it cannot keep a span open. It
// keeps a trace context instead (record.Run.Trace, the W3C traceparent of
// the request that started it), and every span of the run, on any node and
// after any restart, descends from it:
//
//	caller's span (traceparent of the start request)
//	└── POST /api/v1/workflow/start            (server; the stored context)
//	    ├── store.update
//	    ├── state S1 (S1-1)                     (internal; ends with the execution)
//	    │   ├── waitUntil S1                    (internal; one per attempt)
//	    │   │   ├── worker waitUntil            (client; its traceparent goes to the worker)
//	    │   │   └── store.update
//	    │   └── execute S1
//	    │       ├── worker execute
//	    │       └── store.update
//	    └── state S2 (S2-1) …
//
// A state execution's span has an id derived from the run and execution
// ids (stateSpanID), so that its phases, started earlier or by another
// process, name it as their parent before it exists; it is emitted when
// the execution ends (its execute answer applied, or its failure), after
// that transaction's commit, with the execution's creation time as its
// start. The tracer's ID generator must honour FixedSpanID
// for the span to get that id (internal/tracing's does).

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/iwf-server/iwf-server/engine/internal/record"
)

// The attributes of the engine's spans (docs/observability.md).
const (
	// AttrWorkflowID is the workflow id.
	AttrWorkflowID = attribute.Key("iwf.workflow_id")
	// AttrRunID is the run id.
	AttrRunID = attribute.Key("iwf.run_id")
	// AttrWorkflowType is the workflow type.
	AttrWorkflowType = attribute.Key("iwf.workflow_type")
	// AttrStateID is the state id.
	AttrStateID = attribute.Key("iwf.state_id")
	// AttrStateExecutionID is the state execution id ("S1-1").
	AttrStateExecutionID = attribute.Key("iwf.state_execution_id")
	// AttrAttempt is the attempt of a state API call (1 for the first).
	AttrAttempt = attribute.Key("iwf.attempt")
	// AttrWorkerAPI is the worker endpoint a call reaches: waitUntil,
	// execute or rpc.
	AttrWorkerAPI = attribute.Key("iwf.worker_api")
	// AttrStateExecutionStatus is how a state execution ended: COMPLETED
	// or FAILED.
	AttrStateExecutionStatus = attribute.Key("iwf.state_execution_status")
	// AttrRPCName is the name of an RPC.
	AttrRPCName = attribute.Key("iwf.rpc_name")
)

type fixedSpanIDKey struct{}

// FixedSpanID reports the span id the engine asks its tracer to give the
// next span started with ctx: a state execution's span, whose id its
// phases already name as their parent. A tracer provider's ID generator
// that honours it (internal/tracing's) gives the state span that id; with
// another the state span gets a fresh id and its phases point at an id
// no span has.
func FixedSpanID(ctx context.Context) (trace.SpanID, bool) {
	id, ok := ctx.Value(fixedSpanIDKey{}).(trace.SpanID)
	return id, ok
}

// traceCarrier is a propagation.TextMapCarrier over a stored trace
// context.
type traceCarrier struct{ parent, state string }

// Get returns the stored header key.
func (c *traceCarrier) Get(key string) string {
	switch key {
	case "traceparent":
		return c.parent
	case "tracestate":
		return c.state
	}
	return ""
}

// Set stores the header key.
func (c *traceCarrier) Set(key, value string) {
	switch key {
	case "traceparent":
		c.parent = value
	case "tracestate":
		c.state = value
	}
}

// Keys lists the headers carried.
func (c *traceCarrier) Keys() []string { return []string{"traceparent", "tracestate"} }

// traceContextOf returns the W3C traceparent and tracestate of the span
// context in ctx, "" when tracing is off or ctx carries none.
func (e *Engine) traceContextOf(ctx context.Context) (parent, state string) {
	if e.cfg.Tracer == nil || !trace.SpanContextFromContext(ctx).IsValid() {
		return "", ""
	}
	var c traceCarrier
	propagation.TraceContext{}.Inject(ctx, &c)
	return c.parent, c.state
}

// runSpanContext is the context every span of a run descends from: the
// stored one, or, for a run that has none (started while tracing was off),
// a trace of its own whose id derives from the run id, so that its spans
// still share one trace.
func runSpanContext(runID string, rd *record.Run) trace.SpanContext {
	if rd.Trace != "" {
		ctx := propagation.TraceContext{}.Extract(context.Background(), &traceCarrier{parent: rd.Trace, state: rd.TraceState})
		if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
			return sc
		}
	}
	sum := sha256.Sum256([]byte("iwf-run\x00" + runID))
	var tid trace.TraceID
	copy(tid[:], sum[:16])
	var sid trace.SpanID
	copy(sid[:], sum[16:24])
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true})
}

// stateSpanID is the id of a state execution's span.
func stateSpanID(runID, executionID string) trace.SpanID {
	sum := sha256.Sum256([]byte("iwf-state\x00" + runID + "\x00" + executionID))
	var id trace.SpanID
	copy(id[:], sum[:8])
	if binary.BigEndian.Uint64(id[:]) == 0 {
		id[7] = 1
	}
	return id
}

// stateParent returns ctx with the span context of a state execution's
// span as its (remote) parent.
func stateParent(ctx context.Context, runID, executionID string, rd *record.Run) context.Context {
	run := runSpanContext(runID, rd)
	sc := run.WithSpanID(stateSpanID(runID, executionID)).WithRemote(true)
	return trace.ContextWithRemoteSpanContext(ctx, sc)
}

func callAttributes(t *Task, s *apiSnapshot) []attribute.KeyValue {
	return []attribute.KeyValue{
		AttrWorkflowID.String(s.run.WorkflowID), AttrRunID.String(s.run.RunID), AttrWorkflowType.String(s.run.WorkflowType),
		AttrStateID.String(s.x.StateID), AttrStateExecutionID.String(s.x.ExecutionID), AttrAttempt.Int(t.Attempt),
	}
}

// startPhase starts the span of one attempt of a state execution's phase
// (waitUntil or execute), begun at begin, as a child of the execution's
// span. It returns ctx and nil when tracing is off.
func (e *Engine) startPhase(ctx context.Context, phase string, begin time.Time, t *Task, s *apiSnapshot) (context.Context, trace.Span) {
	tr := e.cfg.Tracer
	if tr == nil {
		return ctx, nil
	}
	ctx = stateParent(ctx, s.run.RunID, s.x.ExecutionID, s.rd)
	return tr.Start(ctx, phase+" "+s.x.StateID, trace.WithTimestamp(begin), trace.WithAttributes(callAttributes(t, s)...))
}

// startWorkerCall starts the client span of a worker call; the worker
// client sends its context as traceparent. It returns ctx and nil when
// tracing is off.
func (e *Engine) startWorkerCall(ctx context.Context, api string, t *Task, s *apiSnapshot) (context.Context, trace.Span) {
	tr := e.cfg.Tracer
	if tr == nil {
		return ctx, nil
	}
	return tr.Start(ctx, "worker "+api, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(append(callAttributes(t, s), AttrWorkerAPI.String(api))...))
}

// startRPCCall starts the client span of an RPC's worker call, a child of
// the API request's span. It returns ctx and nil when tracing is off.
func (e *Engine) startRPCCall(ctx context.Context, run *Run, rpcName string) (context.Context, trace.Span) {
	tr := e.cfg.Tracer
	if tr == nil {
		return ctx, nil
	}
	return tr.Start(ctx, "worker rpc", trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		AttrWorkflowID.String(run.WorkflowID), AttrRunID.String(run.RunID), AttrWorkflowType.String(run.WorkflowType),
		AttrWorkerAPI.String("rpc"), AttrRPCName.String(rpcName)))
}

// endSpan ends a span started by the functions above, marking it failed
// with err. A nil span (tracing off) is ignored.
func endSpan(span trace.Span, err error) {
	if span == nil {
		return
	}
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// endedState is a state execution that a transaction ended (completed
// or failed), whose span is emitted after the commit.
type endedState struct {
	runID, workflowID, workflowType, stateID, executionID string
	status                                                ExecutionStatus
	created                                               time.Time
	trace, traceState                                     string
}

// stateEnded notes, when tracing is on, that the transaction ended the
// execution x, for its span to be emitted after the commit.
func (r *runTxn) stateEnded(x *Execution) {
	if r.e.cfg.Tracer == nil {
		return
	}
	r.fx.states = append(r.fx.states, endedState{runID: r.run.RunID, workflowID: r.run.WorkflowID, workflowType: r.run.WorkflowType,
		stateID: x.StateID, executionID: x.ExecutionID, status: x.Status, created: x.CreatedAt, trace: r.rd.Trace, traceState: r.rd.TraceState})
}

// emitState emits the span of a state execution that ended: it starts at
// the execution's creation and ends now, with the id its phases name as
// their parent.
func (e *Engine) emitState(s *endedState) {
	tr := e.cfg.Tracer
	if tr == nil {
		return
	}
	rd := &record.Run{Trace: s.trace, TraceState: s.traceState}
	parent := trace.ContextWithRemoteSpanContext(context.Background(), runSpanContext(s.runID, rd))
	parent = context.WithValue(parent, fixedSpanIDKey{}, stateSpanID(s.runID, s.executionID))
	opts := []trace.SpanStartOption{trace.WithAttributes(AttrWorkflowID.String(s.workflowID), AttrRunID.String(s.runID),
		AttrWorkflowType.String(s.workflowType), AttrStateID.String(s.stateID), AttrStateExecutionID.String(s.executionID),
		AttrStateExecutionStatus.String(string(s.status)))}
	if !s.created.IsZero() {
		opts = append(opts, trace.WithTimestamp(s.created))
	}
	_, span := tr.Start(parent, "state "+s.stateID+" ("+s.executionID+")", opts...)
	if s.status == ExecFailed {
		span.SetStatus(codes.Error, "the state execution failed")
	}
	span.End()
}

// annotateRun adds the workflow and run ids to the span of an API request
// (tracing on only).
func (e *Engine) annotateRun(ctx context.Context, workflowID, runID string) {
	if e.cfg.Tracer == nil {
		return
	}
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(AttrWorkflowID.String(workflowID))
	if runID != "" {
		span.SetAttributes(AttrRunID.String(runID))
	}
}
