package engine

import (
	"fmt"
	"io"
	"math"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// Metrics are the engine's counters and latency histograms, written in the
// Prometheus text exposition format by WriteMetrics (served on GET /metrics).
// They are kept with atomics: recording costs no lock on the hot path.
type metrics struct {
	started       counterVec   // workflows started
	closed        counterVec   // workflows closed, by status
	apiCalls      counterVec   // worker calls, by api and outcome
	apiSeconds    histogramVec // worker call latency, by api
	txSeconds     histogramVec // store write transaction latency
	timersFired   counterVec   // durable timers fired
	timerLateness histogramVec
	claimed       counterVec // tasks claimed by the poller
	stale         counterVec // results dropped: their task moved on or is another process's
	notices       counterVec // change announcements received from other processes
	retaken       counterVec // answers whose task taken as read had changed, taken again

	runsDeleted      counterVec   // runs deleted by retention sweeps
	runsArchived     counterVec   // runs written to the archive by retention sweeps
	archiveFailures  counterVec   // archive writes that failed
	sweepSeconds     histogramVec // retention sweep durations
	retentionBacklog atomic.Int64 // expired runs left after the last sweep

	stateCalls       counterVec   // state API calls, by workflow type, state, api and outcome
	stateLabels      labelLimiter // bounds stateCalls' workflow_type and state labels
	storeUnavailable counterVec   // operations that found the store unavailable
	lastClaim        atomic.Int64 // unix milliseconds of the last claim query that succeeded

	batchItems       counterVec   // batch items processed (done or failed)
	batchItemsFailed counterVec   // batch items the operation failed on
	limitWait        histogramVec // how long calls waited for a limit's permit, by limit (configured keys only)
	callsHeld        counterVec   // waitUntil and execute calls held by a pause (parked)
}

func newMetrics() *metrics {
	latency := []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}
	return &metrics{
		started:       newCounterVec("iwf_workflows_started_total", "Workflow runs started (including retries, cron runs and resets)."),
		closed:        newCounterVec("iwf_workflows_closed_total", "Workflow runs closed, by final status.", "status"),
		apiCalls:      newCounterVec("iwf_worker_calls_total", "Calls to workers, by API and outcome.", "api", "outcome"),
		apiSeconds:    newHistogramVec("iwf_worker_call_seconds", "Latency of calls to workers, by API.", latency, "api"),
		txSeconds:     newHistogramVec("iwf_store_update_seconds", "Latency of store write transactions.", latency),
		timersFired:   newCounterVec("iwf_timers_fired_total", "Durable timers fired."),
		timerLateness: newHistogramVec("iwf_timer_lateness_seconds", "How late durable timers fired.", latency),
		claimed:       newCounterVec("iwf_tasks_claimed_total", "Tasks claimed by the poller (recovery, far timers, other nodes' work)."),
		stale:         newCounterVec("iwf_stale_results_total", "Worker answers and timer firings dropped because their task was gone or leased to another process."),
		notices:       newCounterVec("iwf_change_notices_received_total", "Change announcements received from other server processes (PostgreSQL LISTEN/NOTIFY), by kind.", "kind"),
		runsDeleted:   newCounterVec("iwf_retention_runs_deleted_total", "Closed runs deleted by retention sweeps."),
		runsArchived:  newCounterVec("iwf_retention_runs_archived_total", "Closed runs written to the archive (--archive-url) before retention deleted them."),
		archiveFailures: newCounterVec("iwf_retention_archive_failures_total",
			"Archive writes of expired runs that failed; such a run is kept and archived again at the next sweep."),
		sweepSeconds: newHistogramVec("iwf_retention_sweep_seconds", "Duration of retention sweeps.",
			[]float64{.01, .05, .1, .5, 1, 5, 10, 30, 60, 300, 900}),
		stateCalls: newCounterVec("iwf_state_calls_total",
			fmt.Sprintf("Calls to workers' state APIs, by workflow type, state, API and outcome; the first %d types and %d states per type are named, the others count as %s.", MaxMetricWorkflowTypes, MaxMetricStatesPerType, OtherLabel),
			"workflow_type", "state", "api", "outcome"),
		storeUnavailable: newCounterVec("iwf_store_unavailable_total",
			"Store operations (claims, lease renewals, tasks, sweeps, health checks) that found the database unavailable."),
		batchItems:       newCounterVec("iwf_batch_items_processed_total", "Runs of batch operations processed by this process: the operation applied, or the run marked failed."),
		batchItemsFailed: newCounterVec("iwf_batch_items_failed_total", "Runs of batch operations the operation failed on (closed, deleted, refused); describe the batch for the reasons."),
		retaken:          newCounterVec("iwf_answers_retaken_total", "Worker answers whose run, task or execution changed during the call: their first transaction, which took the task as read before the call, was rolled back and run again."),
		limitWait: newHistogramVec("iwf_limit_wait_seconds", "How long waitUntil and execute calls of this process waited for a permit of a concurrency or rate limit, by limit (type:TYPE, worker:HOST:PORT, rate:HOST:PORT; only configured limits).",
			[]float64{.001, .01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}, "limit"),
		callsHeld: newCounterVec("iwf_worker_calls_held_total", "waitUntil and execute calls this process held because their run, workflow type or worker host is paused; each is made once its pause ends."),
	}
}

// WriteMetrics writes the engine's metrics in the Prometheus text format.
func (e *Engine) WriteMetrics(w io.Writer) error {
	m := e.metrics
	var b strings.Builder
	m.started.write(&b)
	m.closed.write(&b)
	m.apiCalls.write(&b)
	m.apiSeconds.write(&b)
	m.txSeconds.write(&b)
	m.timersFired.write(&b)
	m.timerLateness.write(&b)
	m.claimed.write(&b)
	m.stale.write(&b)
	m.notices.write(&b)
	m.retaken.write(&b)
	m.runsDeleted.write(&b)
	m.runsArchived.write(&b)
	m.archiveFailures.write(&b)
	m.sweepSeconds.write(&b)
	m.stateCalls.write(&b)
	m.storeUnavailable.write(&b)
	m.batchItems.write(&b)
	m.batchItemsFailed.write(&b)
	m.callsHeld.write(&b)
	if e.limiter.active() {
		e.writeLimitMetrics(&b)
	}
	e.writeStateMetrics(&b)
	e.payloadMetrics.write(&b)
	fmt.Fprintf(&b, "# HELP iwf_retention_backlog_runs Closed runs past their retention that the last sweep left (counted up to a million).\n# TYPE iwf_retention_backlog_runs gauge\niwf_retention_backlog_runs %d\n", m.retentionBacklog.Load())
	fmt.Fprintf(&b, "# HELP iwf_paused_scopes Workflow types and worker hosts paused, as this process last read them.\n# TYPE iwf_paused_scopes gauge\niwf_paused_scopes %d\n", e.pausedScopes())
	fmt.Fprintf(&b, "# HELP iwf_tasks_in_memory Tasks this process holds: scheduled or running.\n# TYPE iwf_tasks_in_memory gauge\niwf_tasks_in_memory %d\n", e.disp.inMemory())
	fmt.Fprintf(&b, "# HELP iwf_tasks_ready Due tasks of this process waiting for a free goroutine (--concurrency).\n# TYPE iwf_tasks_ready gauge\niwf_tasks_ready %d\n", e.disp.backlog())
	fmt.Fprintf(&b, "# HELP iwf_tasks_claim_last_success_timestamp_seconds When this process's poller last claimed due work successfully (Unix time; 0 before the first claim).\n# TYPE iwf_tasks_claim_last_success_timestamp_seconds gauge\niwf_tasks_claim_last_success_timestamp_seconds %.3f\n", float64(m.lastClaim.Load())/1000)
	fmt.Fprintf(&b, "# HELP iwf_long_polls_waiting Long polls (getWithWait, waitForStateCompletion) of this process waiting for a change.\n# TYPE iwf_long_polls_waiting gauge\niwf_long_polls_waiting %d\n", e.waits.count())
	fmt.Fprintf(&b, "# HELP go_goroutines Goroutines of this process (a leak shows as steady growth).\n# TYPE go_goroutines gauge\ngo_goroutines %d\n", runtime.NumGoroutine())
	_, err := io.WriteString(w, b.String())
	return err
}

// counterVec is a counter with a fixed list of label names.
type counterVec struct {
	name, help string
	labels     []string
	values     sync.Map // label values joined by \xff -> *atomic.Int64
}

func newCounterVec(name, help string, labels ...string) counterVec {
	return counterVec{name: name, help: help, labels: labels}
}

func (c *counterVec) inc(values ...string) { c.add(1, values...) }

func (c *counterVec) add(n int64, values ...string) {
	key := strings.Join(values, "\xff")
	v, ok := c.values.Load(key)
	if !ok {
		v, _ = c.values.LoadOrStore(key, new(atomic.Int64))
	}
	v.(*atomic.Int64).Add(n)
}

func (c *counterVec) write(b *strings.Builder) {
	fmt.Fprintf(b, "# HELP %s %s\n# TYPE %s counter\n", c.name, c.help, c.name)
	entries := sortedEntries(&c.values)
	if len(entries) == 0 && len(c.labels) == 0 {
		// A counter without labels exists from the start, at 0, so that
		// rate() and alerts see it before its first increment.
		fmt.Fprintf(b, "%s 0\n", c.name)
	}
	for _, kv := range entries {
		fmt.Fprintf(b, "%s%s %d\n", c.name, labelText(c.labels, kv.key, ""), kv.value.(*atomic.Int64).Load())
	}
}

// histogramVec is a histogram with fixed buckets and label names.
type histogramVec struct {
	name, help string
	labels     []string
	buckets    []float64
	values     sync.Map // label values -> *histogram
}

type histogram struct {
	counts []atomic.Int64 // one per bucket, plus +Inf
	sum    atomic.Uint64  // float64 bits
}

func newHistogramVec(name, help string, buckets []float64, labels ...string) histogramVec {
	return histogramVec{name: name, help: help, labels: labels, buckets: buckets}
}

func (h *histogramVec) observe(d time.Duration, values ...string) {
	key := strings.Join(values, "\xff")
	v, ok := h.values.Load(key)
	if !ok {
		v, _ = h.values.LoadOrStore(key, &histogram{counts: make([]atomic.Int64, len(h.buckets)+1)})
	}
	hist := v.(*histogram)
	s := d.Seconds()
	i := sort.SearchFloat64s(h.buckets, s)
	hist.counts[i].Add(1)
	for {
		old := hist.sum.Load()
		if hist.sum.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+s)) {
			break
		}
	}
}

func (h *histogramVec) write(b *strings.Builder) {
	fmt.Fprintf(b, "# HELP %s %s\n# TYPE %s histogram\n", h.name, h.help, h.name)
	for _, kv := range sortedEntries(&h.values) {
		hist := kv.value.(*histogram)
		var cum int64
		for i, le := range h.buckets {
			cum += hist.counts[i].Load()
			fmt.Fprintf(b, "%s_bucket%s %d\n", h.name, labelText(h.labels, kv.key, fmt.Sprint(le)), cum)
		}
		cum += hist.counts[len(h.buckets)].Load()
		fmt.Fprintf(b, "%s_bucket%s %d\n", h.name, labelText(h.labels, kv.key, "+Inf"), cum)
		fmt.Fprintf(b, "%s_sum%s %g\n", h.name, labelText(h.labels, kv.key, ""), math.Float64frombits(hist.sum.Load()))
		fmt.Fprintf(b, "%s_count%s %d\n", h.name, labelText(h.labels, kv.key, ""), cum)
	}
}

type entry struct {
	key   string
	value any
}

func sortedEntries(m *sync.Map) []entry {
	var out []entry
	m.Range(func(k, v any) bool {
		out = append(out, entry{k.(string), v})
		return true
	})
	sort.Slice(out, func(i, j int) bool { return out[i].key < out[j].key })
	return out
}

// labelText renders {a="x",b="y"} (plus le for histogram buckets).
func labelText(names []string, joined, le string) string {
	var parts []string
	if len(names) > 0 {
		values := strings.Split(joined, "\xff")
		for i, n := range names {
			v := ""
			if i < len(values) {
				v = values[i]
			}
			parts = append(parts, n+`="`+labelEscaper.Replace(strings.ToValidUTF8(v, "\uFFFD"))+`"`)
		}
	}
	if le != "" {
		parts = append(parts, fmt.Sprintf("le=%q", le))
	}
	if len(parts) == 0 {
		return ""
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// labelEscaper escapes a label value for the text exposition format.
var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

// Per-type labels. iwf_state_calls_total names the workflow type and state
// of each call, which come from users: the first MaxMetricWorkflowTypes
// types a process sees, and the first MaxMetricStatesPerType states of
// each, keep their names; later ones count under OtherLabel, so the
// number of series stays bounded whatever the workload.
const (
	// MaxMetricWorkflowTypes bounds the workflow types named in metrics.
	MaxMetricWorkflowTypes = 100
	// MaxMetricStatesPerType bounds the states named per workflow type.
	MaxMetricStatesPerType = 50
	// OtherLabel stands for the workflow types and states past the bounds.
	OtherLabel = "_other"
	// maxLabelBytes bounds the length of a named type or state.
	maxLabelBytes = 128
)

// labelLimiter admits the first workflow types and states it sees.
type labelLimiter struct {
	mu    sync.RWMutex
	types map[string]map[string]bool // admitted type -> admitted states
}

// labels returns the workflow_type and state label values for a call.
func (l *labelLimiter) labels(workflowType, state string) (string, string) {
	workflowType, state = truncateLabel(workflowType), truncateLabel(state)
	l.mu.RLock()
	states, typeOK := l.types[workflowType]
	stateOK := typeOK && states[state]
	full := len(l.types) >= MaxMetricWorkflowTypes
	statesFull := len(states) >= MaxMetricStatesPerType
	l.mu.RUnlock()
	switch {
	case stateOK:
		return workflowType, state
	case !typeOK && full:
		return OtherLabel, OtherLabel
	case typeOK && statesFull:
		return workflowType, OtherLabel
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.types == nil {
		l.types = map[string]map[string]bool{}
	}
	states, typeOK = l.types[workflowType]
	if !typeOK {
		if len(l.types) >= MaxMetricWorkflowTypes {
			return OtherLabel, OtherLabel
		}
		states = map[string]bool{}
		l.types[workflowType] = states
	}
	if !states[state] {
		if len(states) >= MaxMetricStatesPerType {
			return workflowType, OtherLabel
		}
		states[state] = true
	}
	return workflowType, state
}

// truncateLabel makes s valid UTF-8 (label values are joined with \xff,
// which never occurs in valid UTF-8) and cuts it to maxLabelBytes, on a
// character boundary.
func truncateLabel(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= maxLabelBytes {
		return s
	}
	i := maxLabelBytes
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i]
}

// writeLimitMetrics writes the limits' gauges and wait times; each limit
// in force is a series (the store keeps at most MaxLimits).
func (e *Engine) writeLimitMetrics(b *strings.Builder) {
	waiting, held := e.limiter.waiting(), e.limiter.heldCounts()
	cur := e.limiter.limits()
	b.WriteString("# HELP iwf_limit_value A concurrency (calls in flight) or rate (calls per second) limit in force on worker calls, by limit; 0 means paused.\n# TYPE iwf_limit_value gauge\n")
	for _, k := range cur.keys() {
		v, _ := cur.value(k)
		fmt.Fprintf(b, "iwf_limit_value%s %s\n", labelText([]string{"limit"}, k, ""), strconv.FormatFloat(v, 'g', -1, 64))
	}
	b.WriteString("# HELP iwf_limit_waiting Calls of this process waiting for a permit of a concurrency or rate limit (the limit's queue depth here), by limit.\n# TYPE iwf_limit_waiting gauge\n")
	for _, k := range e.limiter.allKeys() {
		fmt.Fprintf(b, "iwf_limit_waiting%s %d\n", labelText([]string{"limit"}, k, ""), waiting[k])
	}
	b.WriteString("# HELP iwf_limit_held Permits of a concurrency limit held by calls of this process, by limit.\n# TYPE iwf_limit_held gauge\n")
	for _, k := range e.limiter.allKeys() {
		if !strings.HasPrefix(k, "rate:") {
			fmt.Fprintf(b, "iwf_limit_held%s %d\n", labelText([]string{"limit"}, k, ""), held[k])
		}
	}
	e.metrics.limitWait.write(b)
}
