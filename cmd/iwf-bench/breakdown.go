package main

// The breakdown of W1 @1 (-breakdown): where one workflow's time goes.
//
// After a store's other runs, a server of its own runs breakdownCount W1
// workflows one at a time with tracing on, its spans exported over
// OTLP/HTTP to a receiver in this process and kept until the server stops
// (a queue larger than the run: nothing is sent while it runs). Each
// workflow starts in a trace the client chooses (its start and getWithWait
// requests carry a traceparent), so every server span of the run falls in
// that trace; each worker call carries the traceparent of the server's span
// of that call, which names the call's phase span, and the phase span's
// store.update child is the commit of the answer. Client, worker and server
// share the machine's clock, so the bench's own timestamps (start issued,
// worker call received and answered, getWithWait returned) and the spans'
// (the commits: a store.update span ends when the store's Update returned)
// fall on one time line. The legs are contiguous: each workflow's legs add
// up to its start -> getWithWait exactly.

import (
	"compress/gzip"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/iwf-server/iwf-server/api/iwfapi"
)

// The breakdown run's shape: measured workflows, and workflows before them
// that are not measured (-quick: breakdownQuick after breakdownQuickWarmup).
const (
	breakdownCount       = 200
	breakdownWarmup      = 20
	breakdownQuick       = 20
	breakdownQuickWarmup = 5
)

// The server spans the breakdown reads (internal/tracing, engine/tracing.go,
// engine/storetrace.go).
const (
	spanStart       = "POST /api/v1/workflow/start"
	spanGetWithWait = "POST /api/v1/workflow/getWithWait"
	spanStoreUpdate = "store.update"
)

// workerCall is what the worker saw of one call (the breakdown run only).
type workerCall struct {
	api, state string // "execute", "S1"
	// traceparent is the call's header: its parent id is the server's
	// span of this worker call.
	traceparent string
	// arrived is when the handler began, answered when it returned
	// (net/http flushes the answer just after).
	arrived, answered time.Time
}

// callLog collects the worker calls of one flight.
type callLog struct {
	mu    sync.Mutex
	calls []workerCall
}

// add records a call that arrived at arrived and is answered now.
func (l *callLog) add(api, state string, r *http.Request, arrived time.Time) {
	answered := time.Now()
	l.mu.Lock()
	l.calls = append(l.calls, workerCall{api: api, state: state, traceparent: r.Header.Get("traceparent"), arrived: arrived, answered: answered})
	l.mu.Unlock()
}

// all returns the calls recorded so far, in arrival order.
func (l *callLog) all() []workerCall {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := slices.Clone(l.calls)
	slices.SortStableFunc(out, func(a, b workerCall) int { return a.arrived.Compare(b.arrived) })
	return out
}

// bdWorkflow is the bench's own record of one workflow of the breakdown run.
type bdWorkflow struct {
	traceID  string       // hex, the trace the client started it in
	sent     time.Time    // the start call was issued
	returned time.Time    // getWithWait returned COMPLETED
	calls    []workerCall // in arrival order
}

// bdSpan is what the breakdown reads of one server span.
type bdSpan struct {
	id, parent string // hex span ids; parent "" for a root
	name       string
	start, end time.Time
}

// leg is one contiguous piece of a workflow's critical path; parts, when
// the spans split it, add up to d.
type leg struct {
	name  string
	d     time.Duration
	parts []legPart
}

// legPart is one piece of a leg.
type legPart struct {
	name string
	d    time.Duration
}

// legsOf cuts one workflow's start -> getWithWait returned into contiguous
// legs, from the bench's timestamps and the server spans of its trace; it
// also returns that total. It fails when a span the legs need is missing.
func legsOf(w bdWorkflow, spans []bdSpan) ([]leg, time.Duration, error) {
	byID := make(map[string]*bdSpan, len(spans))
	children := map[string][]*bdSpan{}
	for i := range spans {
		s := &spans[i]
		byID[s.id] = s
		children[s.parent] = append(children[s.parent], s)
	}
	// All on the wall clock, as the spans are: the legs then telescope.
	sent, returned := w.sent.Round(0), w.returned.Round(0)
	var start *bdSpan
	for i := range spans {
		if spans[i].name == spanStart && (start == nil || spans[i].end.After(start.end)) {
			start = &spans[i]
		}
	}
	if start == nil {
		return nil, 0, errors.New("no span of the start request")
	}
	commit := lastUpdate(children[start.id])
	if commit == nil {
		return nil, 0, errors.New("no store.update in the start request")
	}
	legs := []leg{{name: "start -> run committed", d: commit.end.Sub(sent), parts: []legPart{
		{"client->server", start.start.Sub(sent)}, {"handler", commit.start.Sub(start.start)}, {"tx", commit.end.Sub(commit.start)},
	}}}
	prev := commit.end
	for i, c := range w.calls {
		call := byID[spanIDOf(c.traceparent)]
		if call == nil {
			return nil, 0, fmt.Errorf("no span of worker call %d (traceparent %q)", i+1, c.traceparent)
		}
		phase := byID[call.parent]
		if phase == nil {
			return nil, 0, fmt.Errorf("no phase span of worker call %d", i+1)
		}
		apply := firstUpdate(children[phase.id], call.end)
		if apply == nil {
			return nil, 0, fmt.Errorf("no store.update after worker call %d", i+1)
		}
		name := c.api + " " + c.state
		arrived, answered := c.arrived.Round(0), c.answered.Round(0)
		answer := "answer -> committed"
		if i == len(w.calls)-1 {
			answer = "answer -> run closed, committed"
		}
		legs = append(legs,
			leg{name: "commit -> " + name + " received", d: arrived.Sub(prev), parts: []legPart{
				{"dispatch", phase.start.Sub(prev)}, {"read inputs", call.start.Sub(phase.start)}, {"call", arrived.Sub(call.start)},
			}},
			leg{name: name + " in the worker", d: answered.Sub(arrived)},
			leg{name: name + " " + answer, d: apply.end.Sub(answered), parts: []legPart{
				{"reply", call.end.Sub(answered)}, {"apply", apply.start.Sub(call.end)}, {"tx", apply.end.Sub(apply.start)},
			}})
		prev = apply.end
	}
	last := leg{name: "close commit -> getWithWait returned", d: returned.Sub(prev)}
	var poll *bdSpan
	for i := range spans {
		if spans[i].name == spanGetWithWait && (poll == nil || spans[i].end.After(poll.end)) {
			poll = &spans[i]
		}
	}
	if poll != nil {
		last.parts = []legPart{{"server", poll.end.Sub(prev)}, {"reply", returned.Sub(poll.end)}}
	}
	return append(legs, last), returned.Sub(sent), nil
}

// lastUpdate returns the store.update among spans that ended last.
func lastUpdate(spans []*bdSpan) *bdSpan {
	var out *bdSpan
	for _, s := range spans {
		if s.name == spanStoreUpdate && (out == nil || s.end.After(out.end)) {
			out = s
		}
	}
	return out
}

// firstUpdate returns the first store.update among spans that started at
// or after from.
func firstUpdate(spans []*bdSpan, from time.Time) *bdSpan {
	var out *bdSpan
	for _, s := range spans {
		if s.name == spanStoreUpdate && !s.start.Before(from) && (out == nil || s.start.Before(out.start)) {
			out = s
		}
	}
	return out
}

// spanIDOf returns the parent id of a W3C traceparent, "" when it has none.
func spanIDOf(traceparent string) string {
	f := strings.Split(traceparent, "-")
	if len(f) < 4 || len(f[2]) != 16 {
		return ""
	}
	return f[2]
}

// legStat is one leg over the workflows: its percentiles and its parts'
// p50s.
type legStat struct {
	name     string
	p50, p90 time.Duration
	parts    []legPart // each part's p50
}

// breakdownResult is the breakdown of one store.
type breakdownResult struct {
	n, warmup int // workflows measured, and before them
	legs      []legStat
	// total is start issued -> getWithWait returned; sumP50 the legs' p50s
	// added up.
	total  dist
	p90    time.Duration
	sumP50 time.Duration
	// left counts measured workflows left out (spans missing, or calls of
	// another shape than the most common one, e.g. a retry); why is the
	// first reason.
	left int
	why  string
	err  string // the run failed
}

// summarizeLegs takes the legs and totals of each workflow and returns the
// p50 and p90 of every leg and of the total over the workflows of the most
// common shape (the same legs in the same order).
func summarizeLegs(per [][]leg, totals []time.Duration) *breakdownResult {
	b := &breakdownResult{}
	shapes := map[string]int{}
	shapeOf := func(ls []leg) string {
		names := make([]string, len(ls))
		for i, l := range ls {
			names[i] = l.name
		}
		return strings.Join(names, "|")
	}
	best := ""
	for _, ls := range per {
		s := shapeOf(ls)
		shapes[s]++
		if shapes[s] > shapes[best] || (shapes[s] == shapes[best] && s < best) {
			best = s
		}
	}
	var kept [][]leg
	var tot []time.Duration
	for i, ls := range per {
		if shapeOf(ls) != best {
			b.left++
			if b.why == "" {
				b.why = "calls of another shape (a retry?)"
			}
			continue
		}
		kept = append(kept, ls)
		tot = append(tot, totals[i])
	}
	b.n = len(kept)
	if b.n == 0 {
		return b
	}
	for j, l := range kept[0] {
		ds := make([]time.Duration, len(kept))
		for i, ls := range kept {
			ds[i] = ls[j].d
		}
		slices.Sort(ds)
		st := legStat{name: l.name, p50: percentile(ds, 50), p90: percentile(ds, 90)}
		for k, p := range l.parts {
			ps := make([]time.Duration, 0, len(kept))
			for _, ls := range kept {
				if k < len(ls[j].parts) {
					ps = append(ps, ls[j].parts[k].d)
				}
			}
			slices.Sort(ps)
			st.parts = append(st.parts, legPart{name: p.name, d: percentile(ps, 50)})
		}
		b.legs = append(b.legs, st)
		b.sumP50 += st.p50
	}
	b.total = summarize(tot)
	b.p90 = percentile(tot, 90) // tot is sorted by summarize
	return b
}

// spanRecv is an OTLP/HTTP trace receiver (protobuf): it keeps the spans
// the server exports, by trace id.
type spanRecv struct {
	srv *http.Server
	ln  net.Listener
	url string // the traces endpoint, http://127.0.0.1:PORT/v1/traces

	mu      sync.Mutex
	byTrace map[string][]bdSpan
	bad     int // requests it could not read
}

// startSpanRecv listens on a free loopback port.
func startSpanRecv() (*spanRecv, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &spanRecv{ln: ln, url: "http://" + ln.Addr().String() + "/v1/traces", byTrace: map[string][]bdSpan{}}
	r.srv = &http.Server{Handler: http.HandlerFunc(r.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
}

func (r *spanRecv) serve(w http.ResponseWriter, req *http.Request) {
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			r.fail(w, err)
			return
		}
		body = zr
	}
	raw, err := io.ReadAll(body)
	if err != nil {
		r.fail(w, err)
		return
	}
	var msg coltrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(raw, &msg); err != nil {
		r.fail(w, err)
		return
	}
	r.mu.Lock()
	for _, rs := range msg.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				tid := hex.EncodeToString(s.TraceId)
				r.byTrace[tid] = append(r.byTrace[tid], bdSpan{
					id: hex.EncodeToString(s.SpanId), parent: hex.EncodeToString(s.ParentSpanId), name: s.Name,
					start: time.Unix(0, int64(s.StartTimeUnixNano)), end: time.Unix(0, int64(s.EndTimeUnixNano)),
				})
			}
		}
	}
	r.mu.Unlock()
	out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func (r *spanRecv) fail(w http.ResponseWriter, err error) {
	r.mu.Lock()
	r.bad++
	r.mu.Unlock()
	http.Error(w, err.Error(), http.StatusBadRequest)
}

// spans returns the spans of a trace.
func (r *spanRecv) spans(traceID string) []bdSpan {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.byTrace[traceID]
}

// badRequests returns the number of exports the receiver could not read.
func (r *spanRecv) badRequests() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.bad
}

func (r *spanRecv) close() { _ = r.srv.Close() }

// env is the tracing configuration of the breakdown's server: every span
// sampled, all kept in memory and exported when the server stops.
func (r *spanRecv) env() []string {
	const queue = "1000000"
	return []string{
		"OTEL_SDK_DISABLED=false", "OTEL_TRACES_EXPORTER=otlp", "OTEL_TRACES_SAMPLER=parentbased_always_on",
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=" + r.url, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf",
		"OTEL_BSP_MAX_QUEUE_SIZE=" + queue, "OTEL_BSP_MAX_EXPORT_BATCH_SIZE=" + queue, "OTEL_BSP_SCHEDULE_DELAY=3600000",
	}
}

// newTraceparent returns a new sampled trace context: its trace id (hex)
// and the traceparent header that carries it.
func newTraceparent() (traceID, header string) {
	var b [24]byte
	_, _ = rand.Read(b[:])
	b[16] |= 1 // a span id is never zero
	traceID = hex.EncodeToString(b[:16])
	return traceID, "00-" + traceID + "-" + hex.EncodeToString(b[16:]) + "-01"
}

// breakdownLoop runs warm+n W1 workflows one at a time, each started and
// awaited (getWithWait) in a trace of its own, and returns the bench's
// record of the last n.
func (t *target) breakdownLoop(ctx context.Context, n, warm int) ([]bdWorkflow, error) {
	var out []bdWorkflow
	for i := range warm + n {
		id := fmt.Sprintf("%s-%d", t.prefix, i+1)
		traceID, tp := newTraceparent()
		edit := func(_ context.Context, req *http.Request) error {
			req.Header.Set("traceparent", tp)
			return nil
		}
		f := newFlight()
		f.calls = &callLog{}
		t.worker.register(id, f)
		f.start = time.Now()
		resp, err := t.api.StartWorkflowWithResponse(ctx, t.startRequest("W1", id), edit)
		if err == nil && resp.StatusCode() != http.StatusOK {
			err = fmt.Errorf("%s %s", resp.Status(), resp.Body)
		}
		if err != nil {
			t.worker.forget(id)
			return nil, fmt.Errorf("start %s: %w", id, err)
		}
		st, err := t.awaitClose(ctx, id, completionTimeout, edit)
		returned := time.Now()
		if err == nil && st != iwfapi.WorkflowStatusCompleted {
			err = fmt.Errorf("status %s", st)
		}
		if err != nil {
			t.worker.forget(id)
			return nil, fmt.Errorf("workflow %s: %w", id, err)
		}
		select {
		case <-f.done:
		case <-time.After(completionTimeout):
			return nil, fmt.Errorf("workflow %s: %w", id, errTimeout)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		t.worker.forget(id)
		if i >= warm {
			out = append(out, bdWorkflow{traceID: traceID, sent: f.start, returned: returned, calls: f.calls.all()})
		}
	}
	return out, nil
}

// runBreakdown runs the breakdown on a fresh server and database of store.
func runBreakdown(ctx context.Context, o *options, store, bin, tmp string, w *worker, pg *pgAdmin, tag string) *breakdownResult {
	n, warm := breakdownCount, breakdownWarmup
	if o.quick {
		n, warm = breakdownQuick, breakdownQuickWarmup
	}
	fail := func(err error) *breakdownResult { return &breakdownResult{n: n, warmup: warm, err: err.Error()} }
	name := fmt.Sprintf("iwf_bench_%s_breakdown", tag)
	db := "sqlite://" + filepath.Join(tmp, name+".db")
	if pg != nil {
		var err error
		if db, err = pg.createDatabase(ctx, name); err != nil {
			return fail(err)
		}
		if !o.keep {
			defer func() { _ = pg.dropDatabase(context.Background(), name) }()
		}
	}
	recv, err := startSpanRecv()
	if err != nil {
		return fail(err)
	}
	defer recv.close()
	srv, err := startServerEnv(ctx, bin, db, filepath.Join(tmp, name+".log"), o.serverArgs, false, recv.env())
	if err != nil {
		return fail(err)
	}
	defer srv.stop()
	api, tr, err := newAPIClient(srv.url)
	if err != nil {
		return fail(err)
	}
	t := &target{srv: srv, api: api, worker: w, prefix: name}
	wfs, err := t.breakdownLoop(ctx, n, warm)
	tr.CloseIdleConnections()
	if err != nil {
		return fail(err)
	}
	// The server exports its spans as it stops; the export has been
	// received when the process has exited.
	srv.stop()
	if n, first := srv.logErrors(); n > 0 {
		return fail(fmt.Errorf("the server logged %d errors, first: %s", n, truncate(first, 300)))
	}
	var per [][]leg
	var totals []time.Duration
	left, why := 0, ""
	for _, wf := range wfs {
		legs, total, err := legsOf(wf, recv.spans(wf.traceID))
		if err != nil {
			left++
			if why == "" {
				why = err.Error()
			}
			continue
		}
		per, totals = append(per, legs), append(totals, total)
	}
	b := summarizeLegs(per, totals)
	b.warmup = warm
	b.left += left
	if why != "" {
		b.why = why
	}
	if bad := recv.badRequests(); bad > 0 {
		b.why += fmt.Sprintf(" (the receiver refused %d exports)", bad)
	}
	if b.n == 0 {
		b.err = "no workflow with all its spans: " + b.why
	}
	return b
}

// breakdownLines prints a store's breakdown, to go under its W1 @1 row;
// untraced is the getWithWait p50 of the store's W1 @1 run (0: none).
func breakdownLines(store string, b *breakdownResult, untraced time.Duration) []string {
	head := fmt.Sprintf("  breakdown of W1 @1 on %s", store)
	if b.err != "" {
		return []string{head + " FAILED: " + b.err}
	}
	out := []string{fmt.Sprintf("%s: %d workflows one at a time after %d, server traced; p50 / p90 ms (parts: p50 ms)", head, b.n, b.warmup)}
	width := len("total: start -> getWithWait returned")
	for _, l := range b.legs {
		width = max(width, len(l.name))
	}
	ms := func(d time.Duration) string { return fmt.Sprintf("%.2f", float64(d)/float64(time.Millisecond)) }
	for _, l := range b.legs {
		line := fmt.Sprintf("    %-*s %6s / %6s", width, l.name, ms(l.p50), ms(l.p90))
		if len(l.parts) > 0 {
			parts := make([]string, len(l.parts))
			for i, p := range l.parts {
				parts[i] = p.name + " " + ms(p.d)
			}
			line += "   " + strings.Join(parts, ", ")
		}
		out = append(out, line)
	}
	out = append(out, fmt.Sprintf("    %-*s %6s / %6s   legs' p50s add up to %s (each workflow's legs add up to its total)",
		width, "total: start -> getWithWait returned", ms(b.total.p50), ms(b.p90), ms(b.sumP50)))
	if untraced > 0 {
		out[len(out)-1] += fmt.Sprintf("; the W1 @1 run, untraced: p50 %s", ms(untraced))
	}
	if b.left > 0 {
		out = append(out, fmt.Sprintf("    %d workflows left out, first: %s", b.left, b.why))
	}
	return out
}

// withBreakdown returns the run table of sr with its breakdown's lines
// under the W1 @1 row (at the end when there is none).
func withBreakdown(table string, sr *storeReport) string {
	if sr.breakdown == nil {
		return table
	}
	var untraced time.Duration
	if r := sr.find(goal{workload: "W1", latency: true}); r != nil && r.latWait != nil {
		untraced = r.latWait.p50
	}
	lines := breakdownLines(sr.store, sr.breakdown, untraced)
	rows := strings.SplitAfter(table, "\n")
	for i, r := range rows {
		if strings.HasPrefix(strings.TrimSpace(r), "W1 @1 ") {
			return strings.Join(rows[:i+1], "") + strings.Join(lines, "\n") + "\n" + strings.Join(rows[i+1:], "")
		}
	}
	return table + strings.Join(lines, "\n") + "\n"
}
