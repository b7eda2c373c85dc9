package tracing

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/iwf-server/iwf-server/engine"
)

// WrapStore returns st with a span around every transaction (Update,
// View) and single-statement read (ReadForCall, ReadRun) made on behalf of
// a traced operation: an API request or a state execution's phase. Work
// with no span in its context (the poller's claims, lease renewals,
// retention sweeps) is not traced, so that an idle server sends nothing.
// system names the database in the spans' db.system.name ("sqlite",
// "postgresql"). The optional interfaces st implements (engine.CallReader,
// engine.RunReader, engine.ChangeFeed) are kept. With a nil tracer
// (tracing off) it returns st itself.
func WrapStore(st engine.Store, tr trace.Tracer, system string) engine.Store {
	if tr == nil {
		return st
	}
	s := &store{Store: st, tr: tr, system: attribute.String("db.system.name", system)}
	cr, hasCR := st.(engine.CallReader)
	rr, hasRR := st.(engine.RunReader)
	cf, hasCF := st.(engine.ChangeFeed)
	c, r := callReader{s: s, cr: cr}, runReader{s: s, rr: rr}
	switch {
	case hasCR && hasRR && hasCF:
		return &struct {
			*store
			callReader
			runReader
			engine.ChangeFeed
		}{s, c, r, cf}
	case hasCR && hasRR:
		return &struct {
			*store
			callReader
			runReader
		}{s, c, r}
	case hasCR && hasCF:
		return &struct {
			*store
			callReader
			engine.ChangeFeed
		}{s, c, cf}
	case hasRR && hasCF:
		return &struct {
			*store
			runReader
			engine.ChangeFeed
		}{s, r, cf}
	case hasCR:
		return &struct {
			*store
			callReader
		}{s, c}
	case hasRR:
		return &struct {
			*store
			runReader
		}{s, r}
	case hasCF:
		return &struct {
			*store
			engine.ChangeFeed
		}{s, cf}
	}
	return s
}

// store is the traced store.
type store struct {
	engine.Store
	tr     trace.Tracer
	system attribute.KeyValue
}

// start starts the span of one store operation, or returns a nil span
// when ctx carries no span to be its parent.
func (s *store) start(ctx context.Context, name string) (context.Context, trace.Span) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ctx, nil
	}
	return s.tr.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(s.system))
}

func end(span trace.Span, err error) {
	if span == nil {
		return
	}
	// Not found and an expectation that did not hold are answers, not
	// failures of the store.
	if err != nil && !errors.Is(err, engine.ErrNotFound) && !errors.Is(err, engine.ErrUnexpected) {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// Update runs a read-write transaction in a "store.update" span.
func (s *store) Update(ctx context.Context, fn func(ctx context.Context, tx engine.Tx) error) error {
	ctx, span := s.start(ctx, "store.update")
	err := s.Store.Update(ctx, fn)
	end(span, err)
	return err
}

// View runs a read-only transaction in a "store.view" span.
func (s *store) View(ctx context.Context, fn func(ctx context.Context, tx engine.ReadTx) error) error {
	ctx, span := s.start(ctx, "store.view")
	err := s.Store.View(ctx, fn)
	end(span, err)
	return err
}

type callReader struct {
	s  *store
	cr engine.CallReader
}

// ReadForCall reads what a state API call needs in a "store.readForCall"
// span.
func (c callReader) ReadForCall(ctx context.Context, runID, executionID string) (*engine.CallRead, error) {
	ctx, span := c.s.start(ctx, "store.readForCall")
	in, err := c.cr.ReadForCall(ctx, runID, executionID)
	end(span, err)
	return in, err
}

type runReader struct {
	s  *store
	rr engine.RunReader
}

// ReadRun reads a run in a "store.readRun" span.
func (r runReader) ReadRun(ctx context.Context, workflowID, runID string) (*engine.Run, error) {
	ctx, span := r.s.start(ctx, "store.readRun")
	run, err := r.rr.ReadRun(ctx, workflowID, runID)
	end(span, err)
	return run, err
}
