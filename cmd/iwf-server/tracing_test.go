package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/iwf-server/iwf-server/sdk-go/iwf"
)

// otlpReceiver is an in-process OTLP/HTTP trace receiver: it decodes the
// protobuf ExportTraceServiceRequest the server posts to /v1/traces.
type otlpReceiver struct {
	srv   *httptest.Server
	mu    sync.Mutex
	spans []*tracepb.Span
	// services are the service.name values of the resources received.
	services map[string]bool
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	r := &otlpReceiver{services: map[string]bool{}}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/x-protobuf" {
			http.Error(w, "want POST /v1/traces with application/x-protobuf", http.StatusBadRequest)
			return
		}
		var body io.Reader = req.Body
		if req.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(req.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		raw, err := io.ReadAll(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var msg coltrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(raw, &msg); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		for _, rs := range msg.ResourceSpans {
			for _, a := range rs.GetResource().GetAttributes() {
				if a.Key == "service.name" {
					r.services[a.GetValue().GetStringValue()] = true
				}
			}
			for _, ss := range rs.ScopeSpans {
				r.spans = append(r.spans, ss.Spans...)
			}
		}
		r.mu.Unlock()
		out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *otlpReceiver) all() []*tracepb.Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*tracepb.Span(nil), r.spans...)
}

// tracedServer is the server binary run with tracing on, stopped with
// SIGTERM (the graceful stop, which exports the buffered spans).
type tracedServer struct {
	t    *testing.T
	cmd  *exec.Cmd
	url  string
	out  *bytes.Buffer
	done chan struct{}
}

func startTracedServer(t *testing.T, db, endpoint string) *tracedServer {
	t.Helper()
	cmd := exec.Command(serverBinary(t), "--addr", "127.0.0.1:0", "--db", db, "--shutdown-grace", "1s",
		"--log-format", "json", "--log-level", "info")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.TempDir(),
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + endpoint, "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
		"OTEL_BSP_SCHEDULE_DELAY=100", "OTEL_SERVICE_NAME=iwf-tracing-test"}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	s := &tracedServer{t: t, cmd: cmd, out: &bytes.Buffer{}, done: make(chan struct{})}
	var mu sync.Mutex
	cmd.Stderr = &lockedWriter{mu: &mu, w: s.out}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	urls := make(chan string, 1)
	go func() {
		defer close(s.done)
		sc := bufio.NewScanner(stdout)
		re := regexp.MustCompile(`listening on (http://\S+),`)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case urls <- m[1]:
				default:
				}
			}
		}
		cmd.Wait()
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			<-s.done
		}
	})
	select {
	case s.url = <-urls:
	case <-s.done:
		t.Fatalf("the server exited before listening:\n%s", s.out)
	case <-time.After(2 * time.Minute):
		t.Fatalf("the server did not listen within 2 minutes:\n%s", s.out)
	}
	return s
}

// stop stops the server with SIGTERM and waits until it has exited.
func (s *tracedServer) stop() {
	s.t.Helper()
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(2 * time.Minute):
		s.cmd.Process.Kill()
		s.t.Fatalf("the server did not stop within 2 minutes")
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// seen is what the worker saw of one call.
type seen struct {
	api, execution string
	attempt        int
	sc             trace.SpanContext
}

// tracedWorker runs two states: S1 (waitUntil, then an execute whose first
// attempt blocks until the server gives up on it) and S2.
type tracedWorker struct {
	mu      sync.Mutex
	calls   []seen
	blocked chan struct{} // closed when S1's first execute is in progress
	once    sync.Once
}

func (w *tracedWorker) saw(ctx iwf.Context, api string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	// The SDK hands over the call's traceparent; OpenTelemetry reads it
	// as the docs show.
	tc, _ := iwf.TraceContextFrom(ctx)
	otelCtx := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": tc.TraceParent, "tracestate": tc.TraceState})
	w.calls = append(w.calls, seen{api: api, execution: ctx.StateExecutionID(), attempt: ctx.Attempt(), sc: trace.SpanContextFromContext(otelCtx)})
}

type stateOne struct{ w *tracedWorker }

func (stateOne) ID() string { return "S1" }

func (s stateOne) WaitUntil(ctx iwf.Context, _ iwf.Object, _ iwf.Persistence, _ iwf.Communication) (*iwf.CommandRequest, error) {
	s.w.saw(ctx, "waitUntil")
	return iwf.AllCommandsCompleted(), nil
}

func (s stateOne) Execute(ctx iwf.Context, input iwf.Object, _ iwf.CommandResults, _ iwf.Persistence, _ iwf.Communication) (*iwf.StateDecision, error) {
	s.w.saw(ctx, "execute")
	if ctx.Attempt() == 1 {
		// Hold the first attempt until the server, stopping, cancels it.
		s.w.once.Do(func() { close(s.w.blocked) })
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return iwf.SingleNextState(stateTwo{s.w}, "from S1"), nil
}

type stateTwo struct{ w *tracedWorker }

func (stateTwo) ID() string { return "S2" }

func (s stateTwo) WaitUntil(ctx iwf.Context, _ iwf.Object, _ iwf.Persistence, _ iwf.Communication) (*iwf.CommandRequest, error) {
	s.w.saw(ctx, "waitUntil")
	return iwf.AllCommandsCompleted(), nil
}

func (s stateTwo) Execute(ctx iwf.Context, input iwf.Object, _ iwf.CommandResults, _ iwf.Persistence, _ iwf.Communication) (*iwf.StateDecision, error) {
	s.w.saw(ctx, "execute")
	return iwf.GracefulCompleteWorkflow("done"), nil
}

// TestBinaryTracingAcrossRestart runs a two-state workflow through the
// real binary with tracing on and an OTLP/HTTP receiver in the test. The
// server is stopped while S1's execute is in progress and started again
// on the same database; the workflow then finishes. Every span of the
// run, from both processes, is in the caller's trace and forms one tree
// under the start request, and the worker saw the trace context of the
// server's client span of each call.
func TestBinaryTracingAcrossRestart(t *testing.T) {
	receiver := newOTLPReceiver(t)
	db := "sqlite://" + filepath.Join(t.TempDir(), "iwf.db")

	w := &tracedWorker{blocked: make(chan struct{})}
	wf := &iwf.Workflow{Type: "Traced", StartState: stateOne{w}, States: []iwf.WorkflowState{stateTwo{w}}}
	registry, err := iwf.NewRegistry(wf)
	if err != nil {
		t.Fatal(err)
	}
	worker := httptest.NewServer(iwf.NewWorkerService(registry, nil))
	defer worker.Close()

	// The caller's span: the start request carries it as traceparent.
	callerTrace, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	callerSpan, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ctx := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: callerTrace, SpanID: callerSpan, TraceFlags: trace.FlagsSampled, Remote: true}))
	// The SDK's client sends the trace context of its ctx.
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, carrier)
	ctx = iwf.WithTraceContext(ctx, iwf.TraceContext{TraceParent: carrier["traceparent"], TraceState: carrier["tracestate"]})
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()

	first := startTracedServer(t, db, receiver.srv.URL)
	client, err := iwf.NewClient(first.url, &iwf.ClientOptions{WorkerURL: worker.URL})
	if err != nil {
		t.Fatal(err)
	}
	runID, err := client.StartWorkflow(ctx, wf, "traced-1", 0, "in", nil)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-w.blocked:
	case <-ctx.Done():
		t.Fatalf("S1's execute was not called:\n%s", first.out)
	}
	first.stop()

	second := startTracedServer(t, db, receiver.srv.URL)
	client, err = iwf.NewClient(second.url, &iwf.ClientOptions{WorkerURL: worker.URL})
	if err != nil {
		t.Fatal(err)
	}
	out, err := iwf.GetSimpleWorkflowResult[string](ctx, client, "traced-1", runID)
	if err != nil || out != "done" {
		t.Fatalf("result %q, %v:\n%s", out, err, second.out)
	}
	second.stop()

	spans := receiver.all()
	if !receiver.services["iwf-tracing-test"] {
		t.Errorf("service names received: %v, want iwf-tracing-test (OTEL_SERVICE_NAME)", receiver.services)
	}
	byID := map[string]*tracepb.Span{}
	for _, s := range spans {
		if got := hex.EncodeToString(s.TraceId); got != callerTrace.String() {
			t.Errorf("span %q has trace id %s, want the caller's %s", s.Name, got, callerTrace)
		}
		byID[hex.EncodeToString(s.SpanId)] = s
	}
	t.Logf("the trace as the receiver decoded it:\n%s", formatTrace(spans, callerSpan.String()))

	// The tree: caller → start request → state spans → phases → worker
	// calls and store transactions.
	find := func(name string, attempt int64) *tracepb.Span {
		t.Helper()
		var found []*tracepb.Span
		for _, s := range spans {
			if s.Name == name && (attempt == 0 || intAttr(s, "iwf.attempt") == attempt) {
				found = append(found, s)
			}
		}
		if len(found) != 1 {
			t.Fatalf("%d spans %q (attempt %d), want 1:\n%s", len(found), name, attempt, formatTrace(spans, callerSpan.String()))
		}
		return found[0]
	}
	parentOf := func(s *tracepb.Span) string { return hex.EncodeToString(s.ParentSpanId) }
	idOf := func(s *tracepb.Span) string { return hex.EncodeToString(s.SpanId) }
	start := find("POST /api/v1/workflow/start", 0)
	if parentOf(start) != callerSpan.String() || start.Kind != tracepb.Span_SPAN_KIND_SERVER {
		t.Errorf("start request span: parent %s kind %v, want the caller's %s, server", parentOf(start), start.Kind, callerSpan)
	}
	if strAttr(start, "iwf.run_id") != runID || strAttr(start, "iwf.workflow_id") != "traced-1" {
		t.Errorf("start request span attributes: %v", start.Attributes)
	}
	s1, s2 := find("state S1 (S1-1)", 0), find("state S2 (S2-1)", 0)
	for _, st := range []*tracepb.Span{s1, s2} {
		if parentOf(st) != idOf(start) {
			t.Errorf("%s: parent %s, want the start request %s", st.Name, parentOf(st), idOf(start))
		}
		if strAttr(st, "iwf.run_id") != runID || strAttr(st, "iwf.workflow_id") != "traced-1" {
			t.Errorf("%s: attributes %v", st.Name, st.Attributes)
		}
	}
	phases := []struct {
		name    string
		attempt int64
		state   *tracepb.Span
		worker  string
	}{
		{"waitUntil S1", 1, s1, "worker waitUntil"},
		{"execute S1", 1, s1, "worker execute"}, // cancelled by the first process's stop
		{"execute S1", 2, s1, "worker execute"}, // the second process
		{"waitUntil S2", 1, s2, "worker waitUntil"},
		{"execute S2", 1, s2, "worker execute"},
	}
	workerSpans := map[string]*tracepb.Span{}
	for _, p := range phases {
		ph := find(p.name, p.attempt)
		if parentOf(ph) != idOf(p.state) {
			t.Errorf("%s attempt %d: parent %s, want its state span %s", p.name, p.attempt, parentOf(ph), idOf(p.state))
		}
		if strAttr(ph, "iwf.state_execution_id") != strAttr(p.state, "iwf.state_execution_id") || strAttr(ph, "iwf.run_id") != runID {
			t.Errorf("%s attempt %d: attributes %v", p.name, p.attempt, ph.Attributes)
		}
		var calls, updates int
		for _, c := range spans {
			if parentOf(c) != idOf(ph) {
				continue
			}
			switch c.Name {
			case p.worker:
				calls++
				if c.Kind != tracepb.Span_SPAN_KIND_CLIENT || intAttr(c, "iwf.attempt") != p.attempt {
					t.Errorf("%s under %s: kind %v attributes %v", c.Name, p.name, c.Kind, c.Attributes)
				}
				workerSpans[idOf(c)] = c
			case "store.update":
				updates++
			}
		}
		wantUpdates := 1
		if p.name == "execute S1" && p.attempt == 1 {
			wantUpdates = 0 // its answer never came
		}
		if calls != 1 || updates < wantUpdates {
			t.Errorf("%s attempt %d: %d worker call spans and %d store transactions, want 1 and at least %d", p.name, p.attempt, calls, updates, wantUpdates)
		}
	}
	if st := find("execute S1", 1); st.Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR {
		t.Errorf("the cancelled execute S1 attempt: status %v, want an error", st.Status)
	}

	// What the worker saw: each call's traceparent names the server's
	// client span of that call, in the caller's trace.
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.calls) != 5 {
		t.Fatalf("the worker saw %d calls, want 5: %+v", len(w.calls), w.calls)
	}
	for _, c := range w.calls {
		if c.sc.TraceID() != callerTrace || !c.sc.IsRemote() {
			t.Errorf("%s %s attempt %d: the handler's ctx has trace %s (remote %v), want the caller's %s", c.api, c.execution, c.attempt, c.sc.TraceID(), c.sc.IsRemote(), callerTrace)
		}
		ws, ok := workerSpans[c.sc.SpanID().String()]
		if !ok || ws.Name != "worker "+c.api || strAttr(ws, "iwf.state_execution_id") != c.execution || intAttr(ws, "iwf.attempt") != int64(c.attempt) {
			t.Errorf("%s %s attempt %d: the parent span %s is not the server's span of that call", c.api, c.execution, c.attempt, c.sc.SpanID())
		}
	}
}

func strAttr(s *tracepb.Span, key string) string {
	for _, a := range s.Attributes {
		if a.Key == key {
			return a.GetValue().GetStringValue()
		}
	}
	return ""
}

func intAttr(s *tracepb.Span, key string) int64 {
	for _, a := range s.Attributes {
		if a.Key == key {
			return a.GetValue().GetIntValue()
		}
	}
	return 0
}

// formatTrace prints spans as a tree under root (a span id), children in
// start order, with their ids and iwf.* attributes.
func formatTrace(spans []*tracepb.Span, root string) string {
	children := map[string][]*tracepb.Span{}
	ids := map[string]bool{}
	for _, s := range spans {
		ids[hex.EncodeToString(s.SpanId)] = true
	}
	for _, s := range spans {
		p := hex.EncodeToString(s.ParentSpanId)
		if !ids[p] && p != root {
			p = "orphan"
		}
		children[p] = append(children[p], s)
	}
	var b strings.Builder
	var walk func(parent string, depth int)
	walk = func(parent string, depth int) {
		kids := children[parent]
		sort.Slice(kids, func(i, j int) bool { return kids[i].StartTimeUnixNano < kids[j].StartTimeUnixNano })
		for _, s := range kids {
			var attrs []string
			for _, a := range s.Attributes {
				if strings.HasPrefix(a.Key, "iwf.") {
					v := a.GetValue()
					if v.GetStringValue() != "" {
						attrs = append(attrs, a.Key+"="+v.GetStringValue())
					} else {
						attrs = append(attrs, fmt.Sprintf("%s=%d", a.Key, v.GetIntValue()))
					}
				}
			}
			status := ""
			if s.Status.GetCode() == tracepb.Status_STATUS_CODE_ERROR {
				status = " ERROR"
			}
			fmt.Fprintf(&b, "%s%s [%s %s parent=%s %s]%s %s\n", strings.Repeat("  ", depth), s.Name,
				strings.TrimPrefix(s.Kind.String(), "SPAN_KIND_"), hex.EncodeToString(s.SpanId), hex.EncodeToString(s.ParentSpanId),
				time.Duration(s.EndTimeUnixNano-s.StartTimeUnixNano).Round(time.Microsecond), status, strings.Join(attrs, " "))
			walk(hex.EncodeToString(s.SpanId), depth+1)
		}
	}
	fmt.Fprintf(&b, "caller %s\n", root)
	walk(root, 1)
	if len(children["orphan"]) > 0 {
		b.WriteString("spans whose parent was not received:\n")
		walk("orphan", 1)
	}
	return b.String()
}

// doneState completes its workflow with "done" at once.
type doneState struct{}

func (doneState) ID() string { return "Done" }

func (doneState) WaitUntil(iwf.Context, iwf.Object, iwf.Persistence, iwf.Communication) (*iwf.CommandRequest, error) {
	return iwf.AllCommandsCompleted(), nil
}

func (doneState) Execute(iwf.Context, iwf.Object, iwf.CommandResults, iwf.Persistence, iwf.Communication) (*iwf.StateDecision, error) {
	return iwf.GracefulCompleteWorkflow("done"), nil
}

// TestMainTracingWithLimits: tracing on together with every kind of limit
// starts and serves on both stores. Tracing once wrapped the store and hid
// its permits from the engine, so this combination refused to start
// ("limits are configured but the store keeps no permits").
func TestMainTracingWithLimits(t *testing.T) {
	for _, store := range []string{"sqlite", "postgres"} {
		t.Run(store, func(t *testing.T) {
			receiver := newOTLPReceiver(t)
			wf := &iwf.Workflow{Type: "Limited", StartState: doneState{}}
			registry, err := iwf.NewRegistry(wf)
			if err != nil {
				t.Fatal(err)
			}
			worker := httptest.NewServer(iwf.NewWorkerService(registry, nil))
			defer worker.Close()
			host := strings.TrimPrefix(worker.URL, "http://")
			args := []string{"--worker-concurrency", host + "=2", "--worker-rate", host + "=1000", "--type-concurrency", "Limited=2"}
			if store == "postgres" {
				args = append(args, "--db", postgresDB(t))
			}
			m, out := startMainEnv(t, env{"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.srv.URL, "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}, args...)
			client, err := iwf.NewClient("http://"+m.Addr(), &iwf.ClientOptions{WorkerURL: worker.URL})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			runID, err := client.StartWorkflow(ctx, wf, "limited-1", 0, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got, err := iwf.GetSimpleWorkflowResult[string](ctx, client, "limited-1", runID); err != nil || got != "done" {
				t.Fatalf("result %q, %v:\n%s", got, err, out)
			}
		})
	}
}
