package chaos

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/internal/crashtest"
	"github.com/iwf-server/iwf-server/internal/faultproxy"
)

// livenessTimeout is the --db-liveness-timeout of the network-fault runs:
// a black-holed node must notice within it plus the probe interval.
const livenessTimeout = 3 * time.Second

// netfaultsFor reads CHAOS_NETFAULTS: how often each network fault strikes
// (default 1, the `make test` size).
func netfaultsFor(t *testing.T) int {
	n := 1
	if v := os.Getenv("CHAOS_NETFAULTS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			t.Fatalf("CHAOS_NETFAULTS=%q: want a positive number", v)
		}
	}
	return n
}

// netStats are the measured times of the black holes of one run.
type netStats struct {
	mu       sync.Mutex
	detect   []time.Duration // fault to the node's first 503
	recovery []time.Duration // heal to the node's first answer from the database
	slowest  time.Duration   // the longest 503 answer after detection
}

func (s *netStats) add(detect, recovery, slowest time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.detect = append(s.detect, detect)
	s.recovery = append(s.recovery, recovery)
	s.slowest = max(s.slowest, slowest)
}

func maxOf(ds []time.Duration) time.Duration {
	var m time.Duration
	for _, d := range ds {
		m = max(m, d)
	}
	return m
}

// TestNetFaults runs the mixed workload on two nodes and PostgreSQL; node a
// reaches the database through a fault proxy (toxiproxy), node b directly.
// Each network fault strikes node a's link at a random moment: 200 ms of
// latency, a 32 KB/s bandwidth limit, connection resets, and a black hole
// (connections accepted and kept, nothing answered either way). With the
// black hole node a must notice within --db-liveness-timeout plus the probe
// interval, answer 503 (quickly) meanwhile, and answer from the database
// again once the link heals; node b takes over node a's work when its
// leases expire. Then every workflow is checked as in TestChaos: nothing
// lost, nothing applied twice.
func TestNetFaults(t *testing.T) {
	if os.Getenv("IWF_CHAOS_NET") != "1" {
		t.Skip("IWF_CHAOS_NET=1 runs it: `make chaos-net`, which CI runs")
	}
	db := crashtest.PostgresDB(t)
	u, err := url.Parse(db)
	if err != nil {
		t.Fatal(err)
	}
	proxy := faultproxy.New(t, u.Host)
	viaProxy := *u
	viaProxy.Host = proxy.Addr()
	node := func(name, db string) *crashtest.Server {
		return crashtest.NewServer(t, crashtest.Options{Bin: serverBin, DB: db, Name: "node-" + name,
			LeaseDuration: leaseDuration, PollInterval: pollInterval, LogLevel: "info",
			Args: []string{"--worker-header", crashtest.NodeHeader + ": " + name, "--db-liveness-timeout", livenessTimeout.String()}})
	}
	a, b := node("a", viaProxy.String()), node("b", db)
	crashtest.StartAll(t, a, b)

	n := netfaultsFor(t)
	stats := &netStats{}
	p := plan{clients: 3, linear: linearFor(t, "postgres-netfaults")}
	// Each fault holds until node a has made worker calls through it (it
	// works, slowly) or has failed a request (it noticed), then heals.
	p.extra = []extraFault{
		{name: "latency", n: n, do: func(d *driver, _ func(*workflow), _ func() *workflow) error {
			return holdWhileWorking(t, d, proxy, func() error { return proxy.Latency(200, faultproxy.Downstream) })
		}},
		{name: "bandwidth", n: n, do: func(d *driver, _ func(*workflow), _ func() *workflow) error {
			return holdWhileWorking(t, d, proxy, func() error { return proxy.Bandwidth(32, faultproxy.Both...) })
		}},
		{name: "reset", n: n, do: func(d *driver, _ func(*workflow), _ func() *workflow) error {
			if err := proxy.Reset(faultproxy.Both...); err != nil {
				return err
			}
			if _, _, err := untilStatus(a, http.StatusServiceUnavailable, 2*time.Minute); err != nil {
				proxy.Heal()
				return fmt.Errorf("resets: %w", err)
			}
			if err := proxy.Heal(); err != nil {
				return err
			}
			_, _, err := untilStatus(a, http.StatusBadRequest, 2*time.Minute)
			return err
		}},
		{name: "blackhole", n: n, do: func(d *driver, _ func(*workflow), _ func() *workflow) error {
			return blackHole(t, a, proxy, stats)
		}},
	}
	chaosRun(t, newCluster(a, b), p, nil)

	fmt.Printf("netfaults=%d each (latency 200ms, bandwidth 32KB/s, resets, black hole) liveness_timeout=%s blackhole_detect_max=%s recovery_max=%s slowest_503=%s\n",
		n, livenessTimeout, maxOf(stats.detect).Round(time.Millisecond), maxOf(stats.recovery).Round(time.Millisecond), stats.slowest.Round(time.Millisecond))
	t.Logf("black hole: detection %v, recovery %v", stats.detect, stats.recovery)
	// Wide bounds: the point is that a node notices at all and recovers by
	// itself, on a loaded machine; the figures are printed above.
	if d := maxOf(stats.detect); d > livenessTimeout+20*time.Second {
		t.Errorf("a black-holed node took %s to notice (liveness timeout %s)", d, livenessTimeout)
	}
	if stats.slowest > 10*time.Second {
		t.Errorf("a 503 during the black hole took %s: the node hangs instead of failing fast", stats.slowest)
	}
}

// probeID is a workflow that never exists: its get answers 400 (WORKFLOW_NOT_EXISTS) when the
// node reads the database, 503 when the node has found it unreachable.
const probeID = "netfault-probe-never-started"

// probe asks srv for probeID and returns the status and how long the
// answer took (status 0: no answer within the timeout).
func probe(srv *crashtest.Server, timeout time.Duration) (int, time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	began := time.Now()
	resp, err := srv.Client().GetWorkflowWithResponse(ctx, iwfapi.WorkflowGetRequest{WorkflowId: probeID})
	if err != nil {
		return 0, time.Since(began)
	}
	return resp.StatusCode(), time.Since(began)
}

// untilStatus probes srv until it answers status, and returns when that
// answer came and how long it took.
func untilStatus(srv *crashtest.Server, status int, timeout time.Duration) (at time.Time, took time.Duration, err error) {
	deadline := time.Now().Add(timeout)
	last := 0
	for time.Now().Before(deadline) {
		got, took := probe(srv, time.Minute)
		if got == status {
			return time.Now(), took, nil
		}
		last = got
		time.Sleep(50 * time.Millisecond) // poll again
	}
	return time.Time{}, 0, fmt.Errorf("%s did not answer %d within %s (last answer %d)", srv.Name(), status, timeout, last)
}

// holdWhileWorking sets a fault on the proxy, waits until node a made five
// worker calls under it (the node goes on working through a slow link),
// and heals it.
func holdWhileWorking(t *testing.T, d *driver, proxy *faultproxy.Proxy, set func() error) error {
	since := time.Now()
	if err := set(); err != nil {
		return err
	}
	defer proxy.Heal()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		calls := 0
		for _, c := range d.worker.Calls(nil) {
			if c.Node == "a" && c.At.After(since) {
				calls++
			}
		}
		if calls >= 5 {
			return nil
		}
		time.Sleep(50 * time.Millisecond) // poll the worker's record
	}
	return fmt.Errorf("node a made no five worker calls within 2 minutes through the slow link")
}

// blackHole black-holes node a's database link, measures how long a takes
// to answer 503, checks that its 503s come quickly while the black hole
// lasts (past the lease duration, so that node b takes a's tasks over),
// heals the link and measures how long a takes to answer from the
// database again.
func blackHole(t *testing.T, a *crashtest.Server, proxy *faultproxy.Proxy, stats *netStats) error {
	began := time.Now()
	if err := proxy.BlackHole(faultproxy.Both...); err != nil {
		return err
	}
	noticed, _, err := untilStatus(a, http.StatusServiceUnavailable, 2*time.Minute)
	if err != nil {
		proxy.Heal()
		return fmt.Errorf("black hole: %w", err)
	}
	detect := noticed.Sub(began)
	// Meanwhile: quick 503s, for longer than a lease.
	var slowest time.Duration
	for time.Since(noticed) < leaseDuration+time.Second {
		status, took := probe(a, time.Minute)
		if status != http.StatusServiceUnavailable {
			proxy.Heal()
			return fmt.Errorf("black hole: node a answered %d (in %s) after it had answered 503", status, took)
		}
		slowest = max(slowest, took)
		time.Sleep(100 * time.Millisecond) // probe again
	}
	healed := time.Now()
	if err := proxy.Heal(); err != nil {
		return err
	}
	back, _, err := untilStatus(a, http.StatusBadRequest, 2*time.Minute)
	if err != nil {
		return fmt.Errorf("after the black hole: %w", err)
	}
	stats.add(detect, back.Sub(healed), slowest)
	t.Logf("black hole: node a answered 503 after %s, slowest 503 %s; answered from the database %s after the link healed",
		detect.Round(time.Millisecond), slowest.Round(time.Millisecond), back.Sub(healed).Round(time.Millisecond))
	return nil
}
