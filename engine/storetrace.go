package engine

// Store spans. The engine traces its own store operations — a span per
// transaction (Update, View) and per single-statement read (ReadForCall,
// ReadRun) made on behalf of a traced operation — instead of wrapping the
// store. A wrapper has to re-declare every optional interface of what it
// wraps (CallReader, RunReader, ChangeFeed, PermitStore, RunsDeleteTimer,
// …) and silently hides the ones it forgets; here the engine keeps the
// store as it was given and only brackets its own calls.

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// storeSpan starts the span of one store operation, or returns a nil span
// when tracing is off or ctx carries no span to be its parent: work no
// traced operation asked for (the poller's claims, lease renewals,
// retention sweeps) sends nothing.
func (e *Engine) storeSpan(ctx context.Context, name string) (context.Context, trace.Span) {
	if e.cfg.Tracer == nil || !trace.SpanContextFromContext(ctx).IsValid() {
		return ctx, nil
	}
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient)}
	if e.cfg.TraceDBSystem != "" {
		opts = append(opts, trace.WithAttributes(attribute.String("db.system.name", e.cfg.TraceDBSystem)))
	}
	return e.cfg.Tracer.Start(ctx, name, opts...)
}

// endStoreSpan ends span (nil: nothing) with err's outcome. Not found and
// an expectation that did not hold are answers, not failures of the store.
func endStoreSpan(span trace.Span, err error) {
	if span == nil {
		return
	}
	if err != nil && !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrUnexpected) {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// storeUpdate runs fn in a read-write transaction, in a "store.update" span.
func (e *Engine) storeUpdate(ctx context.Context, fn func(ctx context.Context, tx Tx) error) error {
	ctx, span := e.storeSpan(ctx, "store.update")
	err := e.store.Update(ctx, fn)
	endStoreSpan(span, err)
	return err
}

// storeView runs fn in a read-only transaction, in a "store.view" span.
func (e *Engine) storeView(ctx context.Context, fn func(ctx context.Context, tx ReadTx) error) error {
	ctx, span := e.storeSpan(ctx, "store.view")
	err := e.store.View(ctx, fn)
	endStoreSpan(span, err)
	return err
}

// readForCall reads what a state API call needs through cr, in a
// "store.readForCall" span.
func (e *Engine) readForCall(ctx context.Context, cr CallReader, runID, executionID string) (*CallRead, error) {
	ctx, span := e.storeSpan(ctx, "store.readForCall")
	in, err := cr.ReadForCall(ctx, runID, executionID)
	endStoreSpan(span, err)
	return in, err
}

// readRun reads a run through rr, in a "store.readRun" span.
func (e *Engine) readRun(ctx context.Context, rr RunReader, workflowID, runID string) (*Run, error) {
	ctx, span := e.storeSpan(ctx, "store.readRun")
	run, err := rr.ReadRun(ctx, workflowID, runID)
	endStoreSpan(span, err)
	return run, err
}
