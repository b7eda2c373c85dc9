package chaos

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/internal/chaos/pgpair"
	"github.com/iwf-server/iwf-server/internal/crashtest"
)

// failoversFor reads CHAOS_FAILOVERS (default 1, the `make test` size).
func failoversFor(t *testing.T) int {
	n := 1
	if v := os.Getenv("CHAOS_FAILOVERS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			t.Fatalf("CHAOS_FAILOVERS=%q: want a positive number", v)
		}
	}
	return n
}

// failoverNodes starts two nodes on the pair, each given both hosts of the
// pair in one URL.
func failoverNodes(t *testing.T, pair *pgpair.Pair) (a, b *crashtest.Server) {
	node := func(name string) *crashtest.Server {
		return crashtest.NewServer(t, crashtest.Options{Bin: serverBin, DB: pair.URL, Name: "node-" + name,
			LeaseDuration: leaseDuration, PollInterval: pollInterval, LogLevel: "info",
			Args: []string{"--worker-header", crashtest.NodeHeader + ": " + name}})
	}
	a, b = node("a"), node("b")
	crashtest.StartAll(t, a, b)
	return a, b
}

// TestChaosFailover runs the mixed workload on two nodes whose database is
// a primary with a synchronous standby (pgpair), and CHAOS_FAILOVERS times
// kills the primary with SIGKILL, promotes the standby and rebuilds the old
// primary as the new standby. The nodes are never restarted: they find the
// new primary through their two-host URL. The checker then verifies that
// nothing acknowledged was lost and nothing applied twice. It prints
//
//	failovers=N workflows=W lost=0 double_applied=0 longest_unavailable=D
//
// where D is the longest time from a 503 that the workload received to the
// next 200 it received.
//
// CHAOS_FAILOVER_ASYNC=1 runs the same on an asynchronous standby, to
// measure what a failover loses there: the test then fails when the
// checker finds a loss, as it should.
func TestChaosFailover(t *testing.T) {
	n := failoversFor(t)
	async := os.Getenv("CHAOS_FAILOVER_ASYNC") == "1"
	pair := pgpair.Start(t, pgpair.Options{Async: async})
	a, b := failoverNodes(t, pair)
	watch := watchOutages(a, b)
	defer watch.stop()

	p := plan{clients: 3, linear: linearFor(t, "postgres-failover")}
	if n > 10 {
		p.clients = 6
	}
	p.extra = []extraFault{{name: "failover", n: n, do: func(*driver, func(*workflow), func() *workflow) error {
		if err := pair.KillPrimary(); err != nil {
			return err
		}
		if err := pair.Promote(); err != nil {
			return err
		}
		return pair.Rebuild()
	}}}
	res := chaosRun(t, newCluster(a, b), p, nil)
	watch.stop()
	longest, outages, codes := watch.result()
	mode := ""
	if async {
		mode = " replication=async"
	}
	fmt.Printf("failovers=%d workflows=%d lost=%d double_applied=%d longest_unavailable=%s%s\n",
		pair.Failovers(), res.workflows, res.lost, res.double, longest.Round(time.Millisecond), mode)
	slices.Sort(outages)
	var ds []string
	for _, o := range outages {
		ds = append(ds, o.Round(time.Millisecond).String())
	}
	t.Logf("%d periods of unavailability (%s); answers other than 200 during the run: %v", len(outages), strings.Join(ds, " "), codes)
	if pair.Failovers() != n {
		t.Errorf("%d failovers done, want %d", pair.Failovers(), n)
	}
	for _, s := range []*crashtest.Server{a, b} {
		if !s.Running() {
			t.Errorf("%s is not running after the failovers", s.Name())
		}
	}
}

// outageWatch measures unavailability as the workload saw it: from the
// first 503 (or failed call) after a 200 to the next 200.
type outageWatch struct {
	hosts  map[string]bool
	stopFn func()

	mu       sync.Mutex
	down     time.Time // zero while available
	longest  time.Duration
	outages  []time.Duration
	nonOK    map[string]int
	stopOnce sync.Once
}

// watchOutages observes the API answers of the given servers.
func watchOutages(servers ...*crashtest.Server) *outageWatch {
	w := &outageWatch{hosts: map[string]bool{}, nonOK: map[string]int{}}
	for _, s := range servers {
		if u, err := url.Parse(s.URL()); err == nil {
			w.hosts[u.Host] = true
		}
	}
	w.stopFn = crashtest.ObserveResponses(w.observe)
	return w
}

func (w *outageWatch) observe(host string, status int, err error) {
	if !w.hosts[host] {
		return
	}
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case status == http.StatusOK:
		if !w.down.IsZero() {
			w.longest = max(w.longest, now.Sub(w.down))
			w.outages = append(w.outages, now.Sub(w.down))
			w.down = time.Time{}
		}
	case status == http.StatusServiceUnavailable || err != nil:
		if w.down.IsZero() {
			w.down = now
		}
	}
	if status != http.StatusOK {
		key := strconv.Itoa(status)
		if err != nil {
			key = "error"
		}
		w.nonOK[key]++
	}
}

func (w *outageWatch) stop() { w.stopOnce.Do(w.stopFn) }

// result is the longest unavailability, each of those that ended, and the
// count of each answer other than 200 (an outage still open counts until
// now).
func (w *outageWatch) result() (time.Duration, []time.Duration, map[string]int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	longest := w.longest
	if !w.down.IsZero() {
		longest = max(longest, time.Since(w.down))
	}
	codes := map[string]int{}
	for k, v := range w.nonOK {
		codes[k] = v
	}
	return longest, append([]time.Duration(nil), w.outages...), codes
}

// TestFailoverAsyncLoses shows what "acknowledged" is worth without
// synchronous replication, deterministically: workflows run to completion
// (every call acknowledged) while the asynchronous standby receives
// nothing; the primary is then killed and the standby promoted. The
// checker must report each of those workflows as lost, and nothing of the
// workflows that completed before the standby stopped.
func TestFailoverAsyncLoses(t *testing.T) {
	pair := pgpair.Start(t, pgpair.Options{Async: true})
	node := crashtest.StartServer(t, crashtest.Options{Bin: serverBin, DB: pair.URL, Name: "node",
		LeaseDuration: leaseDuration, PollInterval: pollInterval, LogLevel: "info"})
	c := newCluster(node)
	w := crashtest.NewWorker(t)
	registerWorkload(w)
	d := &driver{c: c, worker: w}

	runAll := func(prefix string, n int) []*workflow {
		var out []*workflow
		var wg sync.WaitGroup
		for i := range n {
			wf := &workflow{id: fmt.Sprintf("async-%s-%d-%d", prefix, time.Now().UnixNano()%100000, i), kind: kinds[i%len(kinds)]}
			out = append(out, wf)
			wg.Add(1)
			go func() {
				defer wg.Done()
				d.run(wf)
				if _, err := d.await(wf.id); err != nil && wf.err == nil {
					wf.err = err
				}
			}()
		}
		wg.Wait()
		for _, wf := range out {
			if wf.err != nil || !wf.started {
				t.Fatalf("%s (%s) did not complete before the failover: %v", wf.id, wf.kind, wf.err)
			}
		}
		return out
	}
	kept := runAll("kept", 4)
	if err := pair.WaitCaughtUp(); err != nil {
		t.Fatal(err)
	}
	if err := pair.StopStandby(); err != nil {
		t.Fatal(err)
	}
	gone := runAll("gone", 4) // acknowledged by the primary alone
	if err := pair.KillPrimary(); err != nil {
		t.Fatal(err)
	}
	if err := pair.StartStandby(); err != nil {
		t.Fatal(err)
	}
	if err := pair.Promote(); err != nil {
		t.Fatal(err)
	}

	f := checkAfterLoss(t, d, append(append([]*workflow{}, kept...), gone...))
	lostIDs := map[string]bool{}
	for _, s := range f.lost {
		lostIDs[strings.SplitN(s, " ", 2)[0]] = true
	}
	for _, wf := range kept {
		if lostIDs[wf.id] {
			t.Errorf("%s completed before the standby stopped, yet the checker reports it lost", wf.id)
		}
	}
	for _, wf := range gone {
		if !lostIDs[wf.id] {
			t.Errorf("%s was acknowledged by the primary alone, yet the checker does not report it lost", wf.id)
		}
	}
	for _, s := range f.double {
		t.Errorf("applied twice: %s", s)
	}
	for _, s := range f.wrong {
		t.Errorf("wrong outcome: %s", s)
	}
	t.Logf("asynchronous standby: %d of %d completed, acknowledged workflows lost by the failover; checker: lost=%d double_applied=%d",
		len(lostIDs), len(gone), len(f.lost), len(f.double))
}

// checkAfterLoss checks workflows after a failover that may have lost
// some: a workflow the database no longer knows is reported lost at once
// (await would wait for it for opTimeout), the others are checked like
// chaosRun checks them.
func checkAfterLoss(t *testing.T, d *driver, workflows []*workflow) *findings {
	f := &findings{}
	runsSeen := map[string]map[string]bool{}
	for _, call := range d.worker.Calls(nil) {
		if runsSeen[call.WorkflowID] == nil {
			runsSeen[call.WorkflowID] = map[string]bool{}
		}
		runsSeen[call.WorkflowID][call.RunID] = true
	}
	for _, wf := range workflows {
		r, found, err := lookup(d, wf.id)
		if err != nil {
			t.Fatalf("%s: %v", wf.id, err)
		}
		if !found {
			f.add(&f.lost, wf, "the workflow, started and completed with every call acknowledged, does not exist")
			continue
		}
		if r.WorkflowStatus == iwfapi.WorkflowStatusRunning {
			if r, err = d.await(wf.id); err != nil {
				f.add(&f.lost, wf, "%v", err)
				continue
			}
		}
		dd, err := crashtest.ReadDump(d.c.pick(), wf.id)
		if err != nil {
			f.add(&f.wrong, wf, "%v", err)
			continue
		}
		f.check(wf, r, dd, len(runsSeen[wf.id]))
	}
	return f
}

// lookup gets a workflow's current run, through outages: found is false
// when the server says it does not exist.
func lookup(d *driver, id string) (iwfapi.WorkflowGetResponse, bool, error) {
	var out iwfapi.WorkflowGetResponse
	found := false
	err := d.retry("get "+id, func(ctx context.Context, srv *crashtest.Server) (bool, error) {
		resp, err := srv.Client().GetWorkflowWithResponse(ctx, iwfapi.WorkflowGetRequest{WorkflowId: id, NeedsResults: ptr(true)})
		if err != nil {
			return false, err
		}
		switch {
		case resp.JSON200 != nil:
			out, found = *resp.JSON200, true
			return true, nil
		case resp.StatusCode() == http.StatusBadRequest && strings.Contains(string(resp.Body), string(iwfapi.ErrorSubStatusWorkflowNotExists)):
			return true, nil
		}
		return false, fmt.Errorf("%d %s", resp.StatusCode(), resp.Body)
	})
	return out, found, err
}
