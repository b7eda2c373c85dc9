package chaos

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/iwf-server/iwf-server/internal/chaos/pgpair"
	"github.com/iwf-server/iwf-server/internal/crashtest"
	"github.com/iwf-server/iwf-server/internal/store/postgres/pgtest"
)

var jsonMarshal = json.Marshal

// serverBin is the iwf-server binary built by TestMain.
var serverBin string

// TestMain builds the server binary once, or uses IWF_CRASHTEST_BIN.
func TestMain(m *testing.M) {
	flag.Parse()
	if bin := os.Getenv("IWF_CRASHTEST_BIN"); bin != "" {
		serverBin = bin
		code := m.Run()
		pgpair.Cleanup()
		os.Exit(code)
	}
	dir, err := os.MkdirTemp("", "chaos-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(1)
	}
	serverBin, err = crashtest.BuildServer(dir)
	if err != nil {
		os.RemoveAll(dir)
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	pgpair.Cleanup()
	os.Exit(code)
}

// The timing of every server of the run.
const (
	leaseDuration = 2 * time.Second
	pollInterval  = 100 * time.Millisecond
)

// plan is what one chaos run does.
type plan struct {
	kills, pauses, cuts int
	clients             int
	// scopePauses is the number of pauses of the workload's workflow type,
	// and as many of the worker's host, through the API
	// (scopepause_test.go).
	scopePauses int
	// extra are further faults: each is done n times at random moments.
	extra []extraFault
	// worker, when set, is the worker the workload runs on (a test that
	// must name its address in the servers' flags makes it first); else
	// chaosRun makes one.
	worker *crashtest.Worker
	// linear, when set, runs the linearizability workload (linear_test.go)
	// beside the mixed one: with a number of operations, the faults go on
	// until they are made; without, its clients run while the faults strike.
	linear *linearPlan
}

// extraFault is a fault that needs a particular setup (a tmpfs, an owned
// PostgreSQL). do strikes once; it may start workflows of its own with
// launch.
type extraFault struct {
	name string
	n    int
	do   func(d *driver, launch func(started *workflow), newWorkflow func() *workflow) error
	// unrecorded: do records the faults it makes itself (d.c.record), so
	// that the time it spends waiting explains no repeated call.
	unrecorded bool
	// linger is how long the fault's effects outlast it
	// (recordLingering): the repeats it causes after do has returned.
	linger time.Duration
}

// planFor reads CHAOS_KILLS (default 10, the `make test` size).
func planFor(t *testing.T, twoNodes bool) plan {
	kills := 10
	if v := os.Getenv("CHAOS_KILLS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("CHAOS_KILLS=%q: want a positive number", v)
		}
		kills = n
	}
	p := plan{kills: kills, clients: 3, scopePauses: max(1, kills/50)}
	if kills > 10 {
		p.clients = 6
	}
	if twoNodes {
		p.pauses = max(1, kills/20)
		p.cuts = max(2, kills/5)
	}
	return p
}

// TestChaos runs the mixed workload on each store while the servers are
// killed at random moments (and, on PostgreSQL, one of two nodes is paused
// past its lease and the nodes' database connections are cut), then checks
// every workflow. It prints one summary line per store.
func TestChaos(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		p := planFor(t, false)
		p.linear = linearFor(t, "sqlite")
		dir := t.TempDir()
		if err := mountTmpfs(t, dir); err != nil {
			t.Logf("no disk-full faults: cannot mount a tmpfs for the database (%v)", err)
		} else {
			p.extra = append(p.extra, extraFault{name: "disk_full", n: max(1, p.kills/50), do: diskFull(dir)})
		}
		srv := crashtest.StartServer(t, crashtest.Options{Bin: serverBin, DB: "sqlite://" + dir + "/iwf.db", Name: "server",
			LeaseDuration: leaseDuration, PollInterval: pollInterval, LogLevel: "info"})
		chaosRun(t, newCluster(srv), p, nil)
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		db := crashtest.PostgresDB(t)
		app := "iwf-chaos-" + strconv.FormatUint(rand.Uint64(), 36)
		u, err := url.Parse(db)
		if err != nil {
			t.Fatal(err)
		}
		q := u.Query()
		q.Set("application_name", app)
		u.RawQuery = q.Encode()
		node := func(name string) *crashtest.Server {
			return crashtest.NewServer(t, crashtest.Options{Bin: serverBin, DB: u.String(), Name: "node-" + name,
				LeaseDuration: leaseDuration, PollInterval: pollInterval, LogLevel: "info",
				Args: []string{"--worker-header", crashtest.NodeHeader + ": " + name}})
		}
		a, b := node("a"), node("b")
		crashtest.StartAll(t, a, b)
		cut := func() (int, error) { return cutConnections(pgtest.URL(t), app) }
		p := planFor(t, true)
		p.linear = linearFor(t, "postgres")
		chaosRun(t, newCluster(a, b), p, cut)
	})
}

// restartLinger is how long a PostgreSQL restart counts as a fault after
// the server is back (TestChaosPostgresRestart). While it was down the
// nodes could renew no lease, and a node whose task failed on the store
// (reading the call's inputs, committing the answer) kept it to try again
// a second later. Once the server is back, the other node claims a task
// whose lease ran out meanwhile and calls the worker with the next
// attempt, while the node that held it, at its next try, calls with the
// attempt it had (docs/reliability.md, promise 2); the lease check
// refuses the later answer. Both calls of such a pair come after the
// restart, up to a second or so on a loaded machine: the restart's record,
// ended when the server accepted connections again, would not explain
// them.
const restartLinger = leaseDuration

// TestChaosPostgresRestart runs the workload on two nodes and a PostgreSQL
// server that the test owns, and restarts that server (as well as killing
// nodes) at random moments. It never touches the shared server. A restart
// counts as a fault until restartLinger after the server is back.
func TestChaosPostgresRestart(t *testing.T) {
	pg := pgtest.StartOwn(t)
	p := planFor(t, false)
	p.kills = max(2, p.kills/10)
	p.extra = []extraFault{{name: "postgres_restart", n: max(2, p.kills/2), linger: restartLinger, do: func(*driver, func(*workflow), func() *workflow) error {
		pg.Stop()
		pg.Start()
		return nil
	}}}
	p.linear = linearFor(t, "postgres-restart")
	node := func(name string) *crashtest.Server {
		return crashtest.NewServer(t, crashtest.Options{Bin: serverBin, DB: pg.URL, Name: "node-" + name,
			LeaseDuration: leaseDuration, PollInterval: pollInterval, LogLevel: "info",
			Args: []string{"--worker-header", crashtest.NodeHeader + ": " + name}})
	}
	a, b := node("a"), node("b")
	crashtest.StartAll(t, a, b)
	chaosRun(t, newCluster(a, b), p, nil)
}

// cutConnections terminates the PostgreSQL backends of the servers of one
// run (those with application_name app), and no others: the server is
// shared with other tests.
func cutConnections(base, app string) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	var n int
	err = conn.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid() AND application_name = $1`, app).Scan(&n)
	return n, err
}

// runResult is what chaosRun found, for a caller's own summary line.
type runResult struct {
	workflows, lost, double int
}

// chaosRun drives the workload through the plan's faults, waits until every
// workflow has closed, checks them all and prints the summary line.
func chaosRun(t *testing.T, c *cluster, p plan, cut func() (int, error)) runResult {
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, seed>>7))
	w := p.worker
	if w == nil {
		w = crashtest.NewWorker(t)
	}
	registerWorkload(w)
	d := &driver{c: c, worker: w}
	began := time.Now()

	// Clients start workflows one after another until the faults are done.
	var (
		stop      atomic.Bool
		next      atomic.Int64
		mu        sync.Mutex
		workflows []*workflow
		wg        sync.WaitGroup
	)
	prefix := strconv.FormatUint(seed%100000, 36)
	newWorkflow := func() *workflow {
		i := next.Add(1) - 1
		wf := &workflow{id: fmt.Sprintf("chaos-%s-%04d", prefix, i), kind: kinds[i%int64(len(kinds))]}
		mu.Lock()
		workflows = append(workflows, wf)
		mu.Unlock()
		return wf
	}
	runScript := func(wf *workflow) {
		d.run(wf)
		if _, err := d.await(wf.id); err != nil && wf.err == nil {
			wf.err = err
		}
	}
	launch := func(wf *workflow) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runScript(wf)
		}()
	}
	var lin *linearRun
	if p.linear != nil {
		var err error
		if lin, err = newLinearRun(d, *p.linear, prefix); err != nil {
			t.Fatalf("linear workload: %v", err)
		}
		lin.run()
	}
	for range p.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				runScript(newWorkflow())
			}
		}()
	}

	// The faults, in random order, each at a random moment after the
	// worker saw a call since the previous one (so that each strikes a
	// system at work).
	var events []string
	for range p.kills {
		events = append(events, "kill")
	}
	for range p.pauses {
		events = append(events, "pause")
	}
	for range p.cuts {
		events = append(events, "cut")
	}
	for range p.scopePauses {
		events = append(events, scopeType, scopeHost)
	}
	extra := map[string]extraFault{}
	for _, x := range p.extra {
		extra[x.name] = x
		for range x.n {
			events = append(events, x.name)
		}
	}
	rng.Shuffle(len(events), func(i, j int) { events[i], events[j] = events[j], events[i] })
	cutBackends := 0
	var scopePauses []scopePause
	strike := func(ev string) {
		seen := len(w.Calls(nil))
		waitUntil(t, 2*time.Minute, "a worker call since the last fault", func() bool { return len(w.Calls(nil)) > seen })
		time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond) // the random moment
		n := c.nodes[rng.IntN(len(c.nodes))]
		switch ev {
		case "kill":
			over := c.record("kill")
			n.Kill()
			n.Start()
			over()
		case "pause":
			c.setPaused(n, true)
			// Once resumed, the node goes on with calls it took before the
			// pause, whose leases have passed meanwhile: those, and the
			// repeats they lead to, are the pause's doing for a lease
			// duration after it.
			over := c.recordLingering("pause", leaseDuration)
			n.Pause()
			time.Sleep(leaseDuration + time.Second) // past its lease: the workload's fault, not a wait for a result
			n.Resume()
			c.setPaused(n, false)
			over()
		case scopeType, scopeHost:
			// Every other one kills and restarts a node while paused.
			kill := len(scopePauses)%2 == 0
			probe := func() *workflow {
				wf := newWorkflow()
				wf.kind = kindMixed // one run: its held call is in the current run's history
				launch(wf)
				return wf
			}
			sp, err := d.pauseScope(ev, probe, func() bool {
				if !kill {
					return false
				}
				over := c.record("kill_while_scope_paused")
				n.Kill()
				n.Start()
				over()
				return true
			})
			scopePauses = append(scopePauses, sp)
			if err != nil {
				t.Errorf("%s: %v", ev, err)
			}
		case "cut":
			over := c.record("cut")
			k, err := cut()
			over()
			if err != nil {
				t.Errorf("cutting the servers' connections: %v", err)
			}
			cutBackends += k
		default:
			over := func() {}
			if !extra[ev].unrecorded {
				over = c.recordLingering(ev, extra[ev].linger)
			}
			if err := extra[ev].do(d, launch, newWorkflow); err != nil {
				t.Errorf("%s: %v", ev, err)
			}
			over()
		}
	}
	for _, ev := range events {
		strike(ev)
	}
	for lin != nil && !lin.done() && len(events) > 0 {
		strike(events[rng.IntN(len(events))])
	}
	if lin != nil {
		if err := lin.finish(); err != nil {
			t.Errorf("linear workload: %v", err)
		}
	}
	stop.Store(true)
	wg.Wait()
	faultsTook := time.Since(began)
	if lin != nil {
		lin.report(t, c)
	}

	// The check: every workflow from a healthy node.
	var f findings
	dumps, current := map[string]*crashtest.Dump{}, map[string]string{}
	runsSeen := map[string]map[string]bool{}
	for _, call := range w.Calls(nil) {
		if runsSeen[call.WorkflowID] == nil {
			runsSeen[call.WorkflowID] = map[string]bool{}
		}
		runsSeen[call.WorkflowID][call.RunID] = true
	}
	for _, wf := range workflows {
		if !wf.started {
			f.add(&f.wrong, wf, "never started: %v", wf.err)
			continue
		}
		r, err := d.await(wf.id)
		if err != nil {
			f.add(&f.lost, wf, "%v", err)
			continue
		}
		dd, err := crashtest.ReadDump(c.pick(), wf.id)
		if err != nil {
			f.add(&f.wrong, wf, "%v", err)
			continue
		}
		dumps[wf.id], current[wf.id] = dd, r.WorkflowRunId
		before := len(f.lost) + len(f.double) + len(f.wrong)
		f.check(wf, r, dd, len(runsSeen[wf.id]))
		if len(f.lost)+len(f.double)+len(f.wrong) > before {
			t.Logf("%s: history %s", wf.id, mustJSON(dd.History))
		}
	}
	repeated, unexplained := repeats(c, w.Calls(nil))
	pausedCalls, heldMade := reportScopePauses(t, c, scopePauses, w.Calls(nil), workflows, dumps, current)

	fmt.Printf("kills=%d pauses=%d workflows=%d lost=%d double_applied=%d repeated_calls=%d scope_pauses=%d held_calls=%d paused_calls=%d\n",
		c.count("kill"), c.count("pause"), len(workflows), len(f.lost), len(f.double), repeated, len(scopePauses), heldMade, pausedCalls)
	t.Logf("seed %d; faults took %s, all done in %s; %d connection cuts terminated %d backends; %d worker calls",
		seed, faultsTook.Round(time.Millisecond), time.Since(began).Round(time.Millisecond), c.count("cut"), cutBackends, len(w.Calls(nil)))
	for _, x := range p.extra {
		t.Logf("%s faults: %d", x.name, c.count(x.name))
	}
	report := func(what string, list []string) {
		for i, s := range list {
			if i == 20 {
				t.Errorf("... and %d more", len(list)-20)
				break
			}
			t.Errorf("%s: %s", what, s)
		}
	}
	report("lost", f.lost)
	report("applied twice", f.double)
	report("wrong outcome", f.wrong)
	report("repeated call not explained by a fault", unexplained)
	if c.count("kill") > 0 && repeated == 0 && p.kills >= 10 {
		t.Logf("no worker call was repeated: the kills struck no call in flight")
	}
	return runResult{workflows: len(workflows), lost: len(f.lost), double: len(f.double)}
}

// waitUntil polls cond every 20 ms until it holds, failing the test after
// timeout.
func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
