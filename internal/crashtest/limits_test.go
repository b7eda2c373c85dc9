package crashtest

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/iwf-server/iwf-server/api/iwfapi"
)

// concurrency measures, at the worker, the calls in flight and their
// maximum.
type concurrency struct{ now, max atomic.Int64 }

func (c *concurrency) enter() {
	n := c.now.Add(1)
	for m := c.max.Load(); n > m && !c.max.CompareAndSwap(m, n); m = c.max.Load() {
	}
}

func (c *concurrency) leave() { c.now.Add(-1) }

// limitedState registers state S: execute takes d (the worker's work),
// counted in c, and completes the workflow.
func limitedState(w *Worker, c *concurrency, d time.Duration) {
	w.State("S", State{Execute: func(*iwfapi.WorkflowStateDecideRequest) *iwfapi.WorkflowStateDecideResponse {
		c.enter()
		defer c.leave()
		if d > 0 {
			time.Sleep(d)
		}
		return decide(nil, iwfapi.StateMovement{StateId: "_SYS_GRACEFUL_COMPLETING_WORKFLOW"})
	}})
}

func workerHost(t *testing.T, w *Worker) string {
	u, err := url.Parse(w.URL())
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

var skipWaitUntil = &iwfapi.WorkflowStateOptions{SkipWaitUntil: ptr(true)}

// TestTwoNodesWorkerConcurrencyLimit: two server processes on one
// PostgreSQL schema, a limit of 5 calls on the worker host, workflows
// whose execute takes 200 ms started through both: the worker never sees
// more than 5 calls at once, and all complete. make test runs 40
// workflows; make limits-check runs 200 (IWF_LIMITS_WORKFLOWS) and
// compares the duration with its target, 8 s ± 20 % (IWF_LIMITS_TARGET).
func TestTwoNodesWorkerConcurrencyLimit(t *testing.T) {
	db := PostgresDB(t)
	n := 40
	if v := os.Getenv("IWF_LIMITS_WORKFLOWS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n <= 0 {
			t.Fatalf("IWF_LIMITS_WORKFLOWS=%q", v)
		}
	}
	const limit = 5
	w := NewWorker(t)
	var c concurrency
	limitedState(w, &c, 200*time.Millisecond)
	flag := fmt.Sprintf("%s=%d", workerHost(t, w), limit)
	lease := leaseDuration
	if v := os.Getenv("IWF_LIMITS_LEASE"); v != "" {
		var err error
		if lease, err = time.ParseDuration(v); err != nil {
			t.Fatalf("IWF_LIMITS_LEASE=%q", v)
		}
	}
	node := func(name string) *Server {
		return NewServer(t, Options{Bin: serverBin, DB: db, Name: "node-" + name, LeaseDuration: lease,
			PollInterval: pollInterval, LogLevel: "info", Args: []string{"--worker-concurrency", flag, "--worker-header", NodeHeader + ": " + name}})
	}
	a, b := node("a"), node("b")
	StartAll(t, a, b)
	nodes := []*Server{a, b}
	t.Cleanup(func() {
		if t.Failed() {
			dumpLimitState(t, db, nodes, "worker:"+workerHost(t, w))
		}
	})
	begin := time.Now()
	parallel(t, n, 16, func(i int) error {
		return tryStart(nodes[i%2], w, fmt.Sprint("lim-", i), "S", "", skipWaitUntil)
	})
	// One deadline for all: a stall fails the test in minutes, not in
	// minutes per workflow.
	deadline := time.Now().Add(5 * time.Minute)
	parallel(t, n, 16, func(i int) error {
		r, err := awaitResult(nodes[i%2], fmt.Sprint("lim-", i), max(time.Until(deadline), time.Second))
		if err == nil && r.WorkflowStatus != iwfapi.WorkflowStatusCompleted {
			err = fmt.Errorf("lim-%d: %s", i, r.WorkflowStatus)
		}
		return err
	})
	took := time.Since(begin)
	byNode := map[string]int{}
	perWorkflow := map[string][]Call{}
	for _, call := range w.Calls(Match("", "S", Execute)) {
		byNode[call.Node]++
		perWorkflow[call.WorkflowID] = append(perWorkflow[call.WorkflowID], call)
	}
	for id, calls := range perWorkflow {
		if len(calls) > 1 {
			for _, c := range calls {
				t.Logf("%s called again: node %s attempt %d at %s answered %v", id, c.Node, c.Attempt, c.At.Sub(begin), !c.Answered.IsZero())
			}
		}
	}
	line := fmt.Sprintf("max_concurrency=%d workflows=%d duration=%s calls_by_node=%v", c.max.Load(), n, took.Round(10*time.Millisecond), byNode)
	t.Log(line)
	if os.Getenv("IWF_LIMITS_CHECK") != "" {
		fmt.Println(line)
	}
	if m := c.max.Load(); m > limit {
		t.Fatalf("the worker saw %d calls at once, limit %d", m, limit)
	}
	if v := os.Getenv("IWF_LIMITS_TARGET"); v != "" {
		target, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("IWF_LIMITS_TARGET=%q", v)
		}
		if took < target*8/10 || took > target*12/10 {
			t.Fatalf("%d workflows took %s, target %s ± 20%%", n, took, target)
		}
	}
}

// TestKilledNodeGivesPermitsBack: a node killed (SIGKILL) while it holds
// every permit of a worker host's limit does not hold them forever. On
// PostgreSQL the other node's waiting call gets a permit once the dead
// node's lease expired; on SQLite the next process releases them at
// start. Every workflow completes, and no more calls than the limit run
// at once after the kill.
func TestKilledNodeGivesPermitsBack(t *testing.T) {
	forEachStore(t, func(t *testing.T, db string) {
		const limit = 2
		w := NewWorker(t)
		var c concurrency
		limitedState(w, &c, 0)
		args := []string{"--worker-concurrency", fmt.Sprintf("%s=%d", workerHost(t, w), limit)}
		a := startServer(t, db, "node-a", args...)
		hold := w.Hold(limit, func(call Call) bool { return call.API == Execute && call.WorkflowID != "k-2" })
		for i := 0; i < limit; i++ {
			startWorkflow(t, a, w, fmt.Sprint("k-", i), "S", "", skipWaitUntil)
		}
		hold.Wait(t, limit, time.Minute) // a holds both permits, its calls in flight
		other := a
		var b *Server
		if db[:6] != "sqlite" {
			b = startServer(t, db, "node-b", args...)
			other = b
		}
		startWorkflow(t, other, w, "k-2", "S", "", skipWaitUntil)
		waiting := fmt.Sprintf("iwf_limit_waiting{limit=%q}", "worker:"+workerHost(t, w))
		eventually(t, time.Minute, "k-2 waiting for the limit", func() bool { return metric(other, waiting) == 1 })
		if n := w.Count("k-2", "S", Execute); n != 0 {
			t.Fatalf("k-2 called %d times while the limit was full", n)
		}
		killed := time.Now()
		a.Kill()
		if b == nil {
			a.Start()
			other = a
		}
		for i := 0; i <= limit; i++ {
			id := fmt.Sprint("k-", i)
			if r := result(t, other, id, time.Minute); r.WorkflowStatus != iwfapi.WorkflowStatusCompleted {
				t.Fatalf("%s: %s", id, r.WorkflowStatus)
			}
		}
		calls := w.Calls(Match("k-2", "S", Execute))
		t.Logf("k-2 called %s after the kill", calls[0].At.Sub(killed).Round(time.Millisecond))
		if m := c.max.Load(); m > limit {
			t.Fatalf("%d calls at once after the kill, limit %d", m, limit)
		}
	})
}

// dumpLimitState logs, for a failed limit test on PostgreSQL, what a stall
// would be made of: the permit rows, the tasks not done, and each node's
// limit metrics (its server log follows from the harness).
func dumpLimitState(t *testing.T, db string, nodes []*Server, limit string) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, db)
	if err != nil {
		t.Logf("dump: %v", err)
		return
	}
	defer conn.Close(ctx)
	for _, q := range []struct{ what, sql string }{
		{"limit_permits", `SELECT limit_key, waiter, owner, held, waiting_since, expires_at,
			(extract(epoch from clock_timestamp()) * 1000)::bigint AS now FROM limit_permits ORDER BY limit_key, waiting_since, waiter`},
		{"tasks (first 40)", `SELECT id, workflow_id, execution_id, kind, due_at, attempt, coalesce(lease_owner, '-'), lease_expires_at
			FROM tasks ORDER BY id LIMIT 40`},
	} {
		rows, err := conn.Query(ctx, q.sql)
		if err != nil {
			t.Logf("dump %s: %v", q.what, err)
			continue
		}
		var lines []string
		for rows.Next() {
			v, err := rows.Values()
			if err != nil {
				break
			}
			lines = append(lines, fmt.Sprintf("%v", v))
		}
		rows.Close()
		t.Logf("dump %s (%d rows):\n%s", q.what, len(lines), strings.Join(lines, "\n"))
	}
	for _, n := range nodes {
		t.Logf("dump %s: iwf_limit_waiting=%v iwf_limit_held=%v", n.Name(), metric(n, fmt.Sprintf("iwf_limit_waiting{limit=%q}", limit)),
			metric(n, fmt.Sprintf("iwf_limit_held{limit=%q}", limit)))
	}
	for _, n := range nodes {
		n.DumpGoroutines(10 * time.Second)
	}
}
