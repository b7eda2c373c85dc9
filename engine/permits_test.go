package engine_test

import (
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine"
)

// inflight measures, at the worker, the calls in flight and their maximum.
type inflight struct {
	now, max atomic.Int64
}

func (f *inflight) enter() {
	n := f.now.Add(1)
	for {
		m := f.max.Load()
		if n <= m || f.max.CompareAndSwap(m, n) {
			return
		}
	}
}

func (f *inflight) leave() { f.now.Add(-1) }

// hostPort is the HOST:PORT a limit names the test worker by.
func hostPort(t *testing.T, w *testWorker) string {
	u, err := url.Parse(w.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

func skipStart(r *iwfapi.WorkflowStartRequest) {
	r.StateOptions = &iwfapi.WorkflowStateOptions{SkipWaitUntil: ptr(true)}
}

// limitWaiting reads iwf_limit_waiting of a limit from the metrics.
func (h *harness) limitWaiting(key string) int {
	h.t.Helper()
	m := regexp.MustCompile(`(?m)^iwf_limit_waiting\{limit="` + regexp.QuoteMeta(key) + `"\} (\d+)$`).FindStringSubmatch(h.metrics())
	if m == nil {
		h.t.Fatalf("no iwf_limit_waiting for %s", key)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// TestWorkerConcurrencyLimitFIFO: with a worker host limited to one call
// at a time, calls wait their turn in the order they began to wait, the
// worker never sees two at once, and describe and the metrics show the
// waiting ones.
func TestWorkerConcurrencyLimitFIFO(t *testing.T) {
	forEachStoreOpen(t, func(t *testing.T, st engine.Store) {
		w := newTestWorker(t)
		key := "worker:" + hostPort(t, w)
		h := newHarnessOn(t, st, w, func(c *engine.Config) {
			c.Limits = engine.Limits{WorkerConcurrency: map[string]int{hostPort(t, w): 1}}
		})
		var (
			f       inflight
			mu      sync.Mutex
			release = map[string]chan struct{}{}
		)
		arrived := make(chan string, 16)
		w.state("S", stateHandlers{Execute: func(req iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
			f.enter()
			defer f.leave()
			id := req.Context.WorkflowId
			mu.Lock()
			ch := release[id]
			mu.Unlock()
			arrived <- id
			<-ch
			return decide(next("_SYS_GRACEFUL_COMPLETING_WORKFLOW", nil)), 200
		}})
		const n = 6
		for i := 0; i < n; i++ {
			release[fmt.Sprint("fifo-", i)] = make(chan struct{})
		}
		h.start("fifo-0", "S", nil, skipStart)
		if got := <-arrived; got != "fifo-0" {
			t.Fatalf("first call from %s", got)
		}
		// Each next workflow begins to wait after the previous one did.
		for i := 1; i < n; i++ {
			h.start(fmt.Sprint("fifo-", i), "S", nil, skipStart)
			h.eventually(fmt.Sprintf("%d calls waiting", i), func() bool { return h.limitWaiting(key) == i })
		}
		d := h.describe("fifo-3")
		if len(d.PendingStates) != 1 || deref(d.PendingStates[0].WaitingForLimit) != key || d.PendingStates[0].WaitingForLimitSinceTimestampMs == nil {
			t.Fatalf("describe of a waiting call: %s", mustJSON(d.PendingStates))
		}
		if d := h.describe("fifo-0"); len(d.PendingStates) != 1 || d.PendingStates[0].WaitingForLimit != nil {
			t.Fatalf("describe of the call in flight: %s", mustJSON(d.PendingStates))
		}
		for i := 0; i < n; i++ {
			close(release[fmt.Sprint("fifo-", i)])
			if i+1 < n {
				if got, want := <-arrived, fmt.Sprint("fifo-", i+1); got != want {
					t.Fatalf("call %d came from %s, want %s (FIFO)", i+1, got, want)
				}
			}
		}
		for i := 0; i < n; i++ {
			if s := h.result(fmt.Sprint("fifo-", i)).WorkflowStatus; s != iwfapi.WorkflowStatusCompleted {
				t.Fatalf("fifo-%d: %s", i, s)
			}
		}
		if m := f.max.Load(); m != 1 {
			t.Fatalf("the worker saw %d calls at once, limit 1", m)
		}
		if !regexp.MustCompile(`iwf_limit_wait_seconds_count\{limit="` + regexp.QuoteMeta(key) + `"\} 6`).MatchString(h.metrics()) {
			t.Fatalf("wait times not counted:\n%s", h.metrics())
		}
	})
}

// TestLimitsConcurrency: many workflows through a worker host limited to
// 3 calls and a workflow type limited to 2: the worker never sees more
// than 2 of that type at once, nor more than 3 in all, and all complete.
func TestLimitsConcurrency(t *testing.T) {
	forEachStoreOpen(t, func(t *testing.T, st engine.Store) {
		w := newTestWorker(t)
		h := newHarnessOn(t, st, w, func(c *engine.Config) {
			c.Limits = engine.Limits{WorkerConcurrency: map[string]int{hostPort(t, w): 3}, TypeConcurrency: map[string]int{"Narrow": 2}}
		})
		var all, narrow inflight
		w.state("S", stateHandlers{
			WaitUntil: func(req iwfapi.WorkflowStateStartRequest) (iwfapi.WorkflowStateStartResponse, int) {
				all.enter()
				defer all.leave()
				if req.WorkflowType == "Narrow" {
					narrow.enter()
					defer narrow.leave()
				}
				time.Sleep(5 * time.Millisecond) // the worker's work
				return iwfapi.WorkflowStateStartResponse{}, 200
			},
			Execute: func(req iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
				all.enter()
				defer all.leave()
				if req.WorkflowType == "Narrow" {
					narrow.enter()
					defer narrow.leave()
				}
				time.Sleep(5 * time.Millisecond)
				return decide(next("_SYS_GRACEFUL_COMPLETING_WORKFLOW", nil)), 200
			}})
		const n = 30
		for i := 0; i < n; i++ {
			typ := "Wide"
			if i%2 == 0 {
				typ = "Narrow"
			}
			h.start(fmt.Sprint("c-", i), "S", nil, func(r *iwfapi.WorkflowStartRequest) { r.IwfWorkflowType = typ })
		}
		for i := 0; i < n; i++ {
			if s := h.result(fmt.Sprint("c-", i)).WorkflowStatus; s != iwfapi.WorkflowStatusCompleted {
				t.Fatalf("c-%d: %s", i, s)
			}
		}
		if m := all.max.Load(); m > 3 {
			t.Fatalf("the worker saw %d calls at once, limit 3", m)
		}
		if m := narrow.max.Load(); m > 2 {
			t.Fatalf("the worker saw %d calls of Narrow at once, limit 2", m)
		}
		t.Logf("at most %d calls at once, %d of Narrow", all.max.Load(), narrow.max.Load())
	})
}

// TestWorkerRateLimit: calls to a worker host limited to R per second
// arrive spread out: no window of a second holds more than R plus the
// bucket's burst.
func TestWorkerRateLimit(t *testing.T) {
	forEachStoreOpen(t, func(t *testing.T, st engine.Store) {
		w := newTestWorker(t)
		const rate = 5
		h := newHarnessOn(t, st, w, func(c *engine.Config) {
			c.Limits = engine.Limits{WorkerRate: map[string]float64{hostPort(t, w): rate}}
		})
		var (
			mu    sync.Mutex
			times []time.Time
		)
		w.state("S", stateHandlers{Execute: func(req iwfapi.WorkflowStateDecideRequest) (iwfapi.WorkflowStateDecideResponse, int) {
			mu.Lock()
			times = append(times, time.Now())
			mu.Unlock()
			return decide(next("_SYS_GRACEFUL_COMPLETING_WORKFLOW", nil)), 200
		}})
		const n = 12
		for i := 0; i < n; i++ {
			h.start(fmt.Sprint("r-", i), "S", nil, skipStart)
		}
		for i := 0; i < n; i++ {
			if s := h.result(fmt.Sprint("r-", i)).WorkflowStatus; s != iwfapi.WorkflowStatusCompleted {
				t.Fatalf("r-%d: %s", i, s)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if len(times) != n {
			t.Fatalf("%d calls, want %d", len(times), n)
		}
		for i, t0 := range times {
			in := 0
			for _, t1 := range times[i:] {
				if t1.Sub(t0) < time.Second {
					in++
				}
			}
			if in > rate+engine.PermitBurst {
				t.Fatalf("%d calls in the second from call %d, limit %d/s with a burst of %d", in, i, rate, engine.PermitBurst)
			}
		}
		t.Logf("%d calls over %s", n, times[n-1].Sub(times[0]))
	})
}

// metrics returns the engine's metrics now.
func (h *harness) metrics() string {
	h.t.Helper()
	var b strings.Builder
	if err := h.eng.WriteMetrics(&b); err != nil {
		h.t.Fatal(err)
	}
	return b.String()
}
