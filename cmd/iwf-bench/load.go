package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
)

// completionTimeout bounds how long the generator waits for one workflow.
const completionTimeout = 60 * time.Second

// maxErrors aborts a run that keeps failing.
const maxErrors = 200

// target is one running server with its client and the shared worker.
type target struct {
	srv    *serverProc
	api    *iwfapi.ClientWithResponses
	worker *worker
	// prefix makes workflow ids unique across runs.
	prefix string
	// dbPIDs lists the PostgreSQL backends serving the server; nil on SQLite.
	dbPIDs func() []int
}

// sample reads the CPU counters of the run.
func (t *target) sample() cpuSample {
	s := sampleCPU(t.srv.pid, t.dbPIDs)
	s.metrics = t.srv.metrics()
	return s
}

// newAPIClient returns a client of the server's REST API with a connection
// pool large enough for every goroutine of the generator.
func newAPIClient(serverURL string) (*iwfapi.ClientWithResponses, *http.Transport, error) {
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        1024,
		MaxIdleConnsPerHost: 1024,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	c, err := iwfapi.NewClientWithResponses(serverURL, iwfapi.WithHTTPClient(&http.Client{Transport: tr}))
	return c, tr, err
}

// errorLog counts errors and keeps the first message.
type errorLog struct {
	n     atomic.Int64
	mu    sync.Mutex
	first string
}

func (l *errorLog) add(format string, args ...any) {
	if l.n.Add(1) == 1 {
		l.mu.Lock()
		l.first = fmt.Sprintf(format, args...)
		l.mu.Unlock()
	}
}

func (l *errorLog) firstMessage() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.first
}

// startRequest builds the start request of one workflow of a workload.
func (t *target) startRequest(workload, id string) iwfapi.WorkflowStartRequest {
	req := iwfapi.WorkflowStartRequest{
		WorkflowId:   id,
		IwfWorkerUrl: t.worker.url,
		StartStateId: ptr(stateS1),
	}
	switch workload {
	case "W1", "W1b", "W1x":
		req.IwfWorkflowType = typeW1
		req.StateOptions = &iwfapi.WorkflowStateOptions{SkipWaitUntil: ptr(true)}
	case "W6", "W6x":
		req.IwfWorkflowType = typeW6
		req.StateOptions = &iwfapi.WorkflowStateOptions{SkipWaitUntil: ptr(true)}
	case "W5":
		req.IwfWorkflowType = typeW5
		req.StateOptions = &iwfapi.WorkflowStateOptions{SkipWaitUntil: ptr(true)}
		req.WorkflowStartOptions = &iwfapi.WorkflowStartOptions{SearchAttributes: ptr(w5Attributes(id))}
	case "W2":
		req.IwfWorkflowType = typeW2
	case "W3":
		req.IwfWorkflowType = typeW3
	case "W4":
		req.IwfWorkflowType = typeW4
	case "X":
		req.IwfWorkflowType = typeW2
	}
	return req
}

// startOne registers a flight with the worker and starts the workflow (for
// W2 it also sends the signal). The flight's start is the moment before the
// start call.
func (t *target) startOne(ctx context.Context, workload, id string) (*flight, error) {
	f := newFlight()
	f.start = time.Now()
	t.worker.register(id, f)
	resp, err := t.api.StartWorkflowWithResponse(ctx, t.startRequest(workload, id))
	if err != nil {
		t.worker.forget(id)
		return nil, fmt.Errorf("start %s: %w", id, err)
	}
	if resp.StatusCode() != http.StatusOK {
		t.worker.forget(id)
		return nil, fmt.Errorf("start %s: %s %s", id, resp.Status(), resp.Body)
	}
	if workload == "W2" {
		sig, err := t.api.SignalWorkflowWithResponse(ctx, iwfapi.WorkflowSignalRequest{
			WorkflowId: id, SignalChannelName: signalChannel,
			SignalValue: &iwfapi.EncodedObject{Encoding: ptr("json"), Data: ptr(`"go"`)},
		})
		if err != nil {
			return f, fmt.Errorf("signal %s: %w", id, err)
		}
		if sig.StatusCode() != http.StatusOK {
			return f, fmt.Errorf("signal %s: %s %s", id, sig.Status(), sig.Body)
		}
	}
	return f, nil
}

// awaitClose waits with getWithWait until the workflow is closed and
// returns its status. edits change each request (the breakdown run's
// traceparent).
func (t *target) awaitClose(ctx context.Context, id string, wait time.Duration, edits ...iwfapi.RequestEditorFn) (iwfapi.WorkflowStatus, error) {
	deadline := time.Now().Add(wait)
	for {
		secs := int32(max(1, time.Until(deadline)/time.Second))
		resp, err := t.api.GetWorkflowWithWaitWithResponse(ctx, iwfapi.WorkflowGetRequest{WorkflowId: id, WaitTimeSeconds: &secs}, edits...)
		if err != nil {
			return "", err
		}
		if resp.JSON200 != nil {
			return resp.JSON200.WorkflowStatus, nil
		}
		// 420 is the long-poll timeout: ask again until the deadline.
		if resp.StatusCode() != 420 || time.Now().After(deadline) {
			return "", fmt.Errorf("getWithWait %s: %s %s", id, resp.Status(), resp.Body)
		}
	}
}

// verify checks that a sample of the run's workflows ended COMPLETED.
func (t *target) verify(ctx context.Context, ids []string, r *result) {
	const samples = 20
	if len(ids) == 0 {
		return
	}
	step := max(1, len(ids)/samples)
	for i := 0; i < len(ids); i += step {
		st, err := t.awaitClose(ctx, ids[i], 60*time.Second)
		r.verified++
		if err != nil || st != iwfapi.WorkflowStatusCompleted {
			r.verifyFailed++
			if r.verifyError == "" {
				r.verifyError = fmt.Sprintf("%s: status %q, %v", ids[i], st, err)
			}
		}
	}
}

// loopSpec describes a closed-loop run.
type loopSpec struct {
	workload string
	inFlight int
	warmup   time.Duration
	duration time.Duration // measured window, unless count > 0
	count    int           // measure exactly this many workflows
	// warmupCount, when positive, opens the window once that many
	// workflows completed, instead of after warmup.
	warmupCount int
	// withWait also waits for each workflow with getWithWait and records
	// that latency; the next workflow starts only after both completions.
	withWait bool
	profile  string // CPU profile path, "" for none
}

// sample is one measured workflow.
type sample struct {
	id         string
	start, end time.Time
	waited     time.Time // getWithWait returned (withWait only)
}

// closedLoop keeps spec.inFlight workflows running: each generator
// goroutine starts a workflow, waits until the worker sees its final execute
// call, and starts the next. After the warm-up it measures a window: the
// CPU counters are read at both ends, throughput counts the workflows that
// completed inside the window, latency covers the workflows started inside
// it. In count mode the window closes when the count-th measured workflow
// completes.
func (t *target) closedLoop(ctx context.Context, spec loopSpec) (*result, error) {
	r := &result{workload: spec.workload, inFlight: spec.inFlight, statesPerWorkflow: statesPer(spec.workload)}
	var (
		seq          atomic.Int64
		measured     atomic.Int64 // measured workflows started (count mode)
		measuredDone atomic.Int64
		stop         atomic.Bool
		errs         errorLog
		windowOpen   = make(chan struct{})
		warmed       = make(chan struct{}) // warmupCount workflows completed
		completions  atomic.Int64
		s0, s1       cpuSample
		endOnce      sync.Once
		profDone     <-chan error
	)
	endWindow := func() {
		endOnce.Do(func() {
			s1 = t.sample()
			stop.Store(true)
		})
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	// The controller opens and (in duration mode) closes the window.
	ctlDone := make(chan struct{})
	go func() {
		defer close(ctlDone)
		warm := time.After(spec.warmup)
		if spec.warmupCount > 0 {
			warm = nil
		}
		select {
		case <-warm:
		case <-warmed:
		case <-ctx.Done():
			return
		}
		s0 = t.sample()
		if spec.profile != "" {
			d := spec.duration
			if spec.count > 0 {
				d = 5 * time.Second
			}
			profDone = t.srv.cpuProfile(d, spec.profile)
		}
		close(windowOpen)
		if spec.count > 0 {
			return
		}
		if spec.profile != "" {
			select {
			case <-time.After(spec.duration / 2):
				_ = t.srv.saveGoroutines(strings.TrimSuffix(spec.profile, ".pprof") + "-goroutines.txt")
			case <-ctx.Done():
				return
			}
		}
		select {
		case <-time.After(time.Until(s0.at.Add(spec.duration))):
			endWindow()
		case <-ctx.Done():
		}
	}()

	per := make([][]sample, spec.inFlight)
	var wg sync.WaitGroup
	for g := range spec.inFlight {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() && ctx.Err() == nil {
				isMeasured := false
				select {
				case <-windowOpen:
					isMeasured = true
					if spec.count > 0 && measured.Add(1) > int64(spec.count) {
						return
					}
				default:
				}
				id := t.prefix + "-" + strconv.FormatInt(seq.Add(1), 10)
				f, err := t.startOne(ctx, spec.workload, id)
				if err != nil {
					if ctx.Err() == nil {
						errs.add("%v", err)
					}
					if f == nil {
						time.Sleep(10 * time.Millisecond)
						if errs.n.Load() > maxErrors {
							cancel()
						}
						continue
					}
				}
				s := sample{id: id}
				if spec.withWait {
					st, err := t.awaitClose(ctx, id, completionTimeout)
					s.waited = time.Now()
					if err != nil || st != iwfapi.WorkflowStatusCompleted {
						errs.add("workflow %s: status %q, %v", id, st, err)
					}
				}
				select {
				case <-f.done:
					s.start, s.end = f.start, f.end
				case <-time.After(completionTimeout):
					errs.add("workflow %s: %v", id, errTimeout)
				case <-ctx.Done():
				}
				t.worker.forget(id)
				if !s.end.IsZero() {
					per[g] = append(per[g], s)
					if completions.Add(1) == int64(spec.warmupCount) {
						close(warmed)
					}
				}
				if isMeasured && spec.count > 0 && !s.end.IsZero() && measuredDone.Add(1) == int64(spec.count) {
					endWindow()
				}
				if errs.n.Load() > maxErrors {
					cancel()
				}
			}
		}()
	}
	wg.Wait()
	<-ctlDone
	// In count mode a failed measured workflow leaves the count unreached:
	// the window then ends when the last generator goroutine is done.
	endWindow()
	if errs.n.Load() > maxErrors {
		return nil, fmt.Errorf("%s: more than %d errors, first: %s", spec.workload, maxErrors, errs.firstMessage())
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if profDone != nil {
		if err := <-profDone; err != nil {
			r.note = "cpu profile failed: " + err.Error()
		} else {
			r.profile = spec.profile
		}
	}
	r.cpu = cpuBetween(s0, s1)
	var lat, latWait []time.Duration
	var ids []string
	for _, ss := range per {
		for _, s := range ss {
			if !s.end.Before(s0.at) && !s.end.After(s1.at) {
				r.completed++
			}
			if s.start.Before(s0.at) {
				continue
			}
			ids = append(ids, s.id)
			lat = append(lat, s.end.Sub(s.start))
			if spec.withWait && !s.waited.IsZero() {
				latWait = append(latWait, s.waited.Sub(s.start))
			}
		}
	}
	r.started = seq.Load()
	r.ran = completions.Load()
	r.lat = summarize(lat)
	if spec.withWait {
		d := summarize(latWait)
		r.latWait = &d
	}
	r.errors, r.firstError = errs.n.Load(), errs.firstMessage()
	t.verify(ctx, ids, r)
	return r, nil
}

// sleepers runs W3: n workflows each sleep on a durable timer at the same
// time. They are started as fast as inFlight concurrent start calls allow;
// the worker records each timer's due time when it answers waitUntil and
// the arrival of the execute call that follows the timer.
func (t *target) sleepers(ctx context.Context, workload string, n, inFlight int, timer time.Duration) (*result, error) {
	r := &result{workload: workload, inFlight: n, statesPerWorkflow: statesPer(workload)}
	var (
		seq   atomic.Int64
		errs  errorLog
		mu    sync.Mutex
		fl    = make([]*flight, 0, n)
		ids   = make([]string, 0, n)
		wg    sync.WaitGroup
		begin = t.sample()
	)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for range inFlight {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := seq.Add(1)
				if i > int64(n) {
					return
				}
				id := t.prefix + "-" + strconv.FormatInt(i, 10)
				f, err := t.startOne(ctx, workload, id)
				if err != nil {
					errs.add("%v", err)
					if errs.n.Load() > maxErrors {
						cancel()
					}
					continue
				}
				mu.Lock()
				fl = append(fl, f)
				ids = append(ids, id)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	startsDone := time.Now()
	if errs.n.Load() > maxErrors {
		return nil, fmt.Errorf("%s: more than %d errors, first: %s", workload, maxErrors, errs.firstMessage())
	}
	// The backlog when the start burst ends: workflows whose waitUntil call
	// has not been answered yet, and timers already due whose execute call
	// has not arrived yet.
	for _, f := range fl {
		select {
		case <-f.done:
			continue
		default:
		}
		if due, ok := f.dueTime(); !ok {
			r.backlogWaitUntil++
		} else if !due.After(startsDone) {
			r.backlogOverdue++
		}
	}
	r.startRate = float64(len(fl)) / startsDone.Sub(begin.at).Seconds()
	r.startSpan = startsDone.Sub(begin.at)

	deadline := time.NewTimer(timer + completionTimeout)
	defer deadline.Stop()
	var late []time.Duration
	var last time.Time
	for i, f := range fl {
		select {
		case <-f.done:
		case <-deadline.C:
			return nil, fmt.Errorf("%s: %d of %d timers had not fired %s after the last start", workload, len(fl)-i, len(fl), timer+completionTimeout)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		due, ok := f.dueTime()
		if !ok {
			// Cannot happen with this worker; keep late aligned with fl.
			errs.add("workflow %s: execute without a recorded waitUntil", ids[i])
			due = f.end
		}
		l := f.end.Sub(due)
		if l < 0 {
			r.early++
		}
		late = append(late, l)
		if f.end.After(last) {
			last = f.end
		}
	}
	end := t.sample()
	for _, id := range ids {
		t.worker.forget(id)
	}
	r.cpu = cpuBetween(begin, end)
	r.maxAsleep = maxAsleep(fl, timer)
	var calm []time.Duration
	for i, f := range fl {
		if due, ok := f.dueTime(); ok && due.After(startsDone) {
			calm = append(calm, late[i])
		}
	}
	r.latenessCalm = summarize(calm)
	r.worst = worstWindow(fl, late, begin.at, 10*time.Second)
	r.lateness = summarize(late)
	r.lat = r.lateness
	r.completed = int64(len(late))
	r.started = int64(len(fl))
	r.errors, r.firstError = errs.n.Load(), errs.firstMessage()
	t.verify(ctx, ids, r)
	return r, nil
}

// maxAsleep returns the largest number of workflows that slept on their
// timer at the same moment: from the waitUntil answer (due - timer) to the
// arrival of the execute call.
// lateWindow is a window of due times (from the first start) and the
// lateness of the timers due in it.
type lateWindow struct {
	from, to time.Duration
	d        dist
}

// worstWindow cuts the due times into windows of width and returns the one
// whose timers have the highest p99 lateness: it tells a short stall (one
// window) from a backlog that grows over the run. late[i] belongs to fl[i].
func worstWindow(fl []*flight, late []time.Duration, origin time.Time, width time.Duration) lateWindow {
	byWindow := map[int][]time.Duration{}
	for i, f := range fl {
		if due, ok := f.dueTime(); ok {
			k := int(due.Sub(origin) / width)
			byWindow[k] = append(byWindow[k], late[i])
		}
	}
	var w lateWindow
	for k, v := range byWindow {
		if d := summarize(v); w.d.n == 0 || d.p99 > w.d.p99 {
			w = lateWindow{from: time.Duration(k) * width, to: time.Duration(k+1) * width, d: d}
		}
	}
	return w
}

func maxAsleep(fl []*flight, timer time.Duration) int {
	type edge struct {
		at    time.Time
		delta int
	}
	edges := make([]edge, 0, 2*len(fl))
	for _, f := range fl {
		due, ok := f.dueTime()
		if !ok || f.end.IsZero() {
			continue
		}
		edges = append(edges, edge{due.Add(-timer), 1}, edge{f.end, -1})
	}
	slices.SortFunc(edges, func(a, b edge) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return a.delta - b.delta // wake-ups first at equal times
	})
	n, peak := 0, 0
	for _, e := range edges {
		n += e.delta
		peak = max(peak, n)
	}
	return peak
}

// statesPer is the number of state executions of one workflow.
func statesPer(workload string) int {
	switch workload {
	case "W1", "W1b", "W1x", "W6", "W6x":
		return 2
	}
	return 1
}

// crossNode runs X: the generator starts a W2 workflow on node A (this
// target), waits until the worker answered its waitUntil call (the state now
// waits for the signal) and a moment for node A to commit that answer, then
// issues getWithWait on node A and, with the long poll under way, sends the
// signal through node B (apiB). Node B applies the signal and runs the
// execute call itself; node A learns of the completion from the store. It
// measures, one workflow at a time, signal sent -> getWithWait on node A
// returned COMPLETED (the gated figure), and signal sent -> the worker
// received the final execute call.
func (t *target) crossNode(ctx context.Context, apiB *iwfapi.ClientWithResponses, n int) (*result, error) {
	r := &result{workload: "X", inFlight: 1, statesPerWorkflow: 1}
	var (
		errs     errorLog
		viaA     []time.Duration
		toExec   []time.Duration
		ids      []string
		begin    = t.sample()
		beganAll = time.Now()
	)
	for i := 1; i <= n && ctx.Err() == nil; i++ {
		if errs.n.Load() > maxErrors/10 {
			return nil, fmt.Errorf("X: more than %d errors, first: %s", maxErrors/10, errs.firstMessage())
		}
		id := t.prefix + "-" + strconv.Itoa(i)
		f := newFlight()
		f.start = time.Now()
		t.worker.register(id, f)
		resp, err := t.api.StartWorkflowWithResponse(ctx, t.startRequest("X", id))
		if err != nil || resp.StatusCode() != http.StatusOK {
			t.worker.forget(id)
			errs.add("start %s on node A: %v %v", id, err, resp)
			continue
		}
		select {
		case <-f.waited:
		case <-time.After(completionTimeout):
			errs.add("workflow %s: no waitUntil call", id)
			continue
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		// Let node A commit the waitUntil answer (a few milliseconds), so
		// that the signal finds the state waiting rather than in flight.
		time.Sleep(50 * time.Millisecond)
		type got struct {
			at  time.Time
			st  iwfapi.WorkflowStatus
			err error
		}
		gw := make(chan got, 1)
		go func() {
			st, err := t.awaitClose(ctx, id, completionTimeout)
			gw <- got{time.Now(), st, err}
		}()
		// Give the long poll time to reach node A and subscribe; a poll
		// that arrives late still returns at once with COMPLETED.
		time.Sleep(5 * time.Millisecond)
		sent := time.Now()
		sig, err := apiB.SignalWorkflowWithResponse(ctx, iwfapi.WorkflowSignalRequest{
			WorkflowId: id, SignalChannelName: signalChannel,
			SignalValue: &iwfapi.EncodedObject{Encoding: ptr("json"), Data: ptr(`"go"`)},
		})
		if err != nil || sig.StatusCode() != http.StatusOK {
			errs.add("signal %s on node B: %v %v", id, err, sig)
		}
		g := <-gw
		if g.err != nil || g.st != iwfapi.WorkflowStatusCompleted {
			errs.add("workflow %s: status %q on node A, %v", id, g.st, g.err)
		} else {
			viaA = append(viaA, g.at.Sub(sent))
		}
		select {
		case <-f.done:
			toExec = append(toExec, f.end.Sub(sent))
		case <-time.After(completionTimeout):
			errs.add("workflow %s: %v", id, errTimeout)
		}
		t.worker.forget(id)
		ids = append(ids, id)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	end := t.sample()
	r.cpu = cpuBetween(begin, end)
	r.lat = summarize(viaA)
	d := summarize(toExec)
	r.latExec = &d
	r.completed, r.started = int64(len(viaA)), int64(len(ids))
	r.startSpan = time.Since(beganAll)
	r.errors, r.firstError = errs.n.Load(), errs.firstMessage()
	t.verify(ctx, ids, r)
	return r, nil
}
