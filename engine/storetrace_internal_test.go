package engine

import (
	"context"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// spanStore is a Store whose transactions run fn at once with no tx.
type spanStore struct {
	Store
	updates int
}

func (f *spanStore) Update(ctx context.Context, fn func(ctx context.Context, tx Tx) error) error {
	f.updates++
	return fn(ctx, nil)
}

func (f *spanStore) View(ctx context.Context, fn func(ctx context.Context, tx ReadTx) error) error {
	return fn(ctx, nil)
}

type spanReaders struct{}

func (spanReaders) ReadForCall(context.Context, string, string) (*CallRead, error) {
	return &CallRead{}, nil
}

func (spanReaders) ReadRun(context.Context, string, string) (*Run, error) { return nil, ErrNotFound }

// TestStoreSpans: a store call gets a span only under a traced operation,
// so that background work (polls, lease renewals) sends nothing; the span
// is a client span with the database's name, a child of the operation,
// and the transaction function runs inside it. Not found is an answer,
// not a failure.
func TestStoreSpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tr := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)).Tracer("test")
	st := &spanStore{}
	e := &Engine{store: st, cfg: Config{Tracer: tr, TraceDBSystem: "postgresql"}}
	noop := func(context.Context, Tx) error { return nil }
	if err := e.storeUpdate(context.Background(), noop); err != nil {
		t.Fatal(err)
	}
	if n := len(rec.Ended()); n != 0 || st.updates != 1 {
		t.Fatalf("an untraced update: %d spans, %d updates; want 0 spans, 1 update", n, st.updates)
	}
	ctx, parent := tr.Start(context.Background(), "phase")
	var inner trace.SpanContext
	if err := e.storeUpdate(ctx, func(ctx context.Context, _ Tx) error {
		inner = trace.SpanContextFromContext(ctx)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	_ = e.storeView(ctx, func(context.Context, ReadTx) error { return nil })
	_, _ = e.readForCall(ctx, spanReaders{}, "r", "S1-1")
	_, _ = e.readRun(ctx, spanReaders{}, "w", "")
	parent.End()
	spans := rec.Ended()
	var names []string
	for _, s := range spans[:len(spans)-1] {
		names = append(names, s.Name())
		var system string
		for _, a := range s.Attributes() {
			if a.Key == "db.system.name" {
				system = a.Value.AsString()
			}
		}
		if s.Parent().SpanID() != parent.SpanContext().SpanID() || s.SpanKind() != trace.SpanKindClient || system != "postgresql" {
			t.Errorf("%s: parent %v kind %v attributes %v", s.Name(), s.Parent().SpanID(), s.SpanKind(), s.Attributes())
		}
		if s.Status().Code.String() == "Error" {
			t.Errorf("%s is marked failed (a not-found answer is not a failure)", s.Name())
		}
	}
	if got := strings.Join(names, ","); got != "store.update,store.view,store.readForCall,store.readRun" {
		t.Errorf("spans %s", got)
	}
	if inner.SpanID() != spans[0].SpanContext().SpanID() {
		t.Errorf("the transaction function's ctx carries span %s, want the store.update span", inner.SpanID())
	}
}
