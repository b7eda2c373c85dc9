package chaos

import (
	"bufio"
	"context"
	"encoding/csv"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/iwf-server/iwf-server/internal/crashtest"
	"github.com/iwf-server/iwf-server/internal/store/postgres/pgtest"
)

// The soak's sampling period, and its bounds on growth after the warm-up.
const (
	soakSample       = 10 * time.Second
	soakMaxGrowth    = 0.10 // RSS, goroutines, open files, connections
	soakMaxP99Drift  = 0.25
	soakMinWarmup    = 30 * time.Second
	soakDefaultWarm  = 10 * time.Minute
	soakDefaultHours = time.Hour
	// soakCapacityClients run workflows back to back to measure capacity.
	soakCapacityClients = 32
)

// soakSampleRow is one line of the soak's CSV.
type soakSampleRow struct {
	at                     time.Duration // since the load began
	rssMB                  float64
	goroutines, openFiles  int
	dbConns                int
	storeMB                float64
	p50ms, p99ms           float64
	requests, errs, wfDone int
}

// TestSoak runs the chaos workload for SOAK_DURATION (`make soak`; skipped
// without it) on each store at half the capacity measured first, samples
// the server's RSS, goroutines (go_goroutines on /metrics), open files
// (/proc/pid/fd), database connections, store size and the p50/p99 latency
// of the client's requests every 10 s into soak-<store>.csv, draws them
// into soak-<store>.png (SOAK_DIR, default a temporary directory), and
// fails when, after the warm-up (10 minutes for an hour, scaled down for a
// shorter run), RSS, goroutines, open files or connections grow by more
// than 10 %, p99 drifts by more than 25 %, any request errs, or the checker
// finds a workflow lost or applied twice.
func TestSoak(t *testing.T) {
	v := os.Getenv("SOAK_DURATION")
	if v == "" {
		t.Skip("SOAK_DURATION not set: `make soak` runs it")
	}
	dur, err := time.ParseDuration(v)
	if err != nil || dur < time.Minute {
		t.Fatalf("SOAK_DURATION=%q: want a duration of at least 1m", v)
	}
	warm := max(soakMinWarmup, time.Duration(float64(soakDefaultWarm)*float64(dur)/float64(soakDefaultHours)))
	dir := os.Getenv("SOAK_DIR")
	if dir == "" {
		dir = t.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, store := range []string{"sqlite", "postgres"} {
		t.Run(store, func(t *testing.T) {
			var db, app string
			var conns func() int
			var size func() float64
			switch store {
			case "sqlite":
				d := t.TempDir()
				db = "sqlite://" + d + "/iwf.db"
				size = func() float64 { return dirMB(d) }
			case "postgres":
				// A server of the soak's own, with autovacuum on as in
				// production: the shared test server runs without it, and an
				// hour of churn on the task tables without vacuum measures
				// bloat, not the engine.
				pg := pgtest.StartOwnWith(t, pgtest.OwnOptions{Settings: map[string]string{"autovacuum": "on"}})
				app = "iwf-soak-" + strconv.FormatUint(rand.Uint64(), 36)
				u, err := url.Parse(pg.URL)
				if err != nil {
					t.Fatal(err)
				}
				q := u.Query()
				q.Set("application_name", app)
				u.RawQuery = q.Encode()
				db = u.String()
				conns = func() int {
					return pgCount(t, pg.URL, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, app)
				}
				size = func() float64 {
					return float64(pgCount(t, pg.URL, `SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint FROM pg_class c
						JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public' AND c.relkind = 'r'`)) / (1 << 20)
				}
			}
			srv := crashtest.StartServer(t, crashtest.Options{Bin: serverBin, DB: db, Name: "server", LogLevel: "warn",
				LeaseDuration: leaseDuration, PollInterval: pollInterval})
			if conns == nil {
				conns = func() int { return sqliteFDs(srv) }
			}
			soakStore(t, store, srv, dur, warm, dir, conns, size)
		})
	}
}

// soakStore measures capacity, runs the load at half of it for dur and
// checks the samples.
func soakStore(t *testing.T, store string, srv *crashtest.Server, dur, warm time.Duration, dir string, conns func() int, size func() float64) {
	w := crashtest.NewWorker(t)
	registerWorkload(w)
	c := newCluster(srv)
	var (
		mu      sync.Mutex
		lat     []time.Duration // latencies of the current sample period
		all     []timedLatency  // every latency of the load, for the verdict
		nReq    atomic.Int64
		errs    atomic.Int64
		errList []string
	)
	d := &driver{c: c, worker: w, onErr: func(what string, err error) {
		if strings.HasPrefix(what, "await") || strings.Contains(what, ": wait for") {
			return // a long poll or a poll that found nothing new yet
		}
		errs.Add(1)
		mu.Lock()
		if len(errList) < 20 {
			errList = append(errList, what+": "+err.Error())
		}
		mu.Unlock()
	}}
	timed := func(op func() error) error {
		began := time.Now()
		err := op()
		took := time.Since(began)
		mu.Lock()
		lat = append(lat, took)
		all = append(all, timedLatency{at: began, took: took})
		mu.Unlock()
		nReq.Add(1)
		return err
	}
	prefix := strconv.FormatUint(rand.Uint64()%100000, 36)
	var next atomic.Int64
	var wfMu sync.Mutex
	var workflows []*workflow
	var done atomic.Int64
	runOne := func() {
		i := next.Add(1) - 1
		wf := &workflow{id: fmt.Sprintf("soak-%s-%06d", prefix, i), kind: kinds[i%int64(len(kinds))]}
		wfMu.Lock()
		workflows = append(workflows, wf)
		wfMu.Unlock()
		wf.err = soakScript(d, wf, timed)
		if _, err := d.await(wf.id); err != nil && wf.err == nil {
			wf.err = err
		}
		done.Add(1)
	}

	// Capacity: closed-loop clients, each starting its next workflow as
	// soon as the last one closed, for a short while. A workflow takes
	// over a second (its durable timer), so it takes many clients to
	// find the server's limit rather than the clients'.
	capDur := min(max(dur/12, 15*time.Second), 3*time.Minute)
	var stop atomic.Bool
	var wg sync.WaitGroup
	began := time.Now()
	for range soakCapacityClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				runOne()
			}
		}()
	}
	time.Sleep(capDur) // the measuring period
	stop.Store(true)
	wg.Wait()
	capacity := float64(done.Load()) / time.Since(began).Seconds()
	rate := capacity / 2
	t.Logf("%s: capacity %.1f workflows/s (%d clients, %s); soak at %.1f/s for %s, warm-up %s", store, capacity, soakCapacityClients, capDur, rate, dur, warm)

	// The load: open loop at rate, while the sampler runs.
	mu.Lock()
	lat, all = nil, nil
	mu.Unlock()
	errs.Store(0)
	done.Store(0)
	nReq.Store(0)
	loadStart := time.Now()
	var rows []soakSampleRow
	sampleDone := make(chan struct{})
	go func() {
		defer close(sampleDone)
		tick := time.NewTicker(soakSample)
		defer tick.Stop()
		for time.Since(loadStart) < dur {
			<-tick.C
			mu.Lock()
			window := lat
			lat = nil
			mu.Unlock()
			pid := srv.Pid()
			row := soakSampleRow{at: time.Since(loadStart), rssMB: rssMB(pid), goroutines: int(metricValue(srv, "go_goroutines")),
				openFiles: countFDs(pid), dbConns: conns(), storeMB: size(),
				requests: int(nReq.Load()), errs: int(errs.Load()), wfDone: int(done.Load())}
			row.p50ms, row.p99ms = quantileMs(window, 0.5), quantileMs(window, 0.99)
			rows = append(rows, row)
		}
	}()
	interval := time.Duration(float64(time.Second) / rate)
	sem := make(chan struct{}, 512)
	behind := 0
	for next := time.Now(); time.Since(loadStart) < dur; next = next.Add(interval) {
		time.Sleep(time.Until(next)) // the open loop's pace
		select {
		case sem <- struct{}{}:
		default:
			behind++
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			runOne()
		}()
	}
	wg.Wait()
	<-sampleDone

	// Files.
	csvPath := filepath.Join(dir, "soak-"+store+".csv")
	if err := writeSoakCSV(csvPath, rows); err != nil {
		t.Fatal(err)
	}
	pngPath := filepath.Join(dir, "soak-"+store+".png")
	if err := drawSoak(pngPath, store, rows, warm, rate, dur); err != nil {
		t.Fatal(err)
	}

	// The check of every workflow.
	runs := map[string]map[string]bool{}
	for _, call := range w.Calls(nil) {
		if runs[call.WorkflowID] == nil {
			runs[call.WorkflowID] = map[string]bool{}
		}
		runs[call.WorkflowID][call.RunID] = true
	}
	var f findings
	for _, wf := range workflows {
		r, err := d.await(wf.id)
		if err != nil {
			f.add(&f.lost, wf, "%v", err)
			continue
		}
		dd, err := crashtest.ReadDump(srv, wf.id)
		if err != nil {
			f.add(&f.wrong, wf, "%v", err)
			continue
		}
		f.check(wf, r, dd, len(runs[wf.id]))
	}

	growth, _ := soakVerdict(rows, warm)
	mu.Lock()
	drift := p99Drift(all, loadStart.Add(warm), loadStart.Add(dur))
	mu.Unlock()
	fmt.Printf("soak store=%s duration=%s rate=%.1f/s (capacity %.1f) workflows=%d requests=%d errors=%d behind=%d lost=%d double_applied=%d %s p99_drift=%+.0f%% csv=%s png=%s\n",
		store, dur, rate, capacity, len(workflows), nReq.Load(), errs.Load(), behind, len(f.lost), len(f.double), growth.String(), drift*100, csvPath, pngPath)
	for _, e := range errList {
		t.Errorf("request error: %s", e)
	}
	for _, s := range f.lost {
		t.Errorf("lost: %s", s)
	}
	for _, s := range f.double {
		t.Errorf("applied twice: %s", s)
	}
	for _, s := range f.wrong {
		t.Errorf("wrong outcome: %s", s)
	}
	for name, g := range growth {
		if g > soakMaxGrowth {
			t.Errorf("%s grew by %.0f%% after the warm-up (bound %.0f%%)", name, g*100, soakMaxGrowth*100)
		}
	}
	if drift > soakMaxP99Drift {
		t.Errorf("p99 latency drifted by %+.0f%% after the warm-up (bound %.0f%%)", drift*100, soakMaxP99Drift*100)
	}
	if behind > 0 {
		t.Logf("the load fell behind its pace %d times (512 workflows in flight)", behind)
	}
}

// soakScript is the chaos script of one workflow with each client request
// timed (the polls that wait for a state are not requests of the load).
func soakScript(d *driver, wf *workflow, timed func(func() error) error) error {
	if err := timed(func() error { return d.start(wf) }); err != nil {
		return err
	}
	switch wf.kind {
	case kindMixed:
		for i := range 2 {
			if err := timed(func() error { return d.rpc(wf, i) }); err != nil {
				return err
			}
		}
		return timed(func() error { return d.signal(wf, "sig") })
	case kindReset, kindStop:
		if err := d.waitFor(wf, "W-1 waiting", func(dd *crashtest.Dump) bool {
			for _, x := range dd.Executions {
				if x.ExecutionID == "W-1" && x.Status == "WAITING" {
					return true
				}
			}
			return false
		}); err != nil {
			return err
		}
		if wf.kind == kindStop {
			return timed(func() error { return d.stop(wf) })
		}
		if err := timed(func() error { return d.reset(wf) }); err != nil {
			return err
		}
		return timed(func() error { return d.signal(wf, "go") })
	}
	return nil
}

// timedLatency is one request's latency and when it began.
type timedLatency struct {
	at   time.Time
	took time.Duration
}

// p99Drift compares the p99 latency of the requests of the first third of
// the time from warm to end with that of the last third. A window's own
// p99 (the CSV's) rests on a few hundred requests at most and jumps with
// every burst of the machine's other work; a third of the run pools
// enough requests for a p99 that means something.
func p99Drift(all []timedLatency, warm, end time.Time) float64 {
	third := end.Sub(warm) / 3
	var first, last []time.Duration
	for _, l := range all {
		switch {
		case l.at.Before(warm):
		case l.at.Before(warm.Add(third)):
			first = append(first, l.took)
		case !l.at.Before(end.Add(-third)):
			last = append(last, l.took)
		}
	}
	a, b := quantileMs(first, 0.99), quantileMs(last, 0.99)
	if a <= 0 {
		return 0
	}
	return (b - a) / a
}

// growthMap is each watched series' relative growth after the warm-up.
type growthMap map[string]float64

func (g growthMap) String() string {
	var parts []string
	for _, k := range []string{"rss", "goroutines", "open_files", "db_conns"} {
		parts = append(parts, fmt.Sprintf("%s_growth=%+.0f%%", k, g[k]*100))
	}
	return strings.Join(parts, " ")
}

// soakVerdict compares the median of the first third of the samples after
// the warm-up with the median of the last third (its second result, the
// drift of the windows' p99, is for the record; p99Drift decides): a leak grows steadily, so
// it shows between the two, while medians ride out the samples that catch
// a burst.
func soakVerdict(rows []soakSampleRow, warm time.Duration) (growthMap, float64) {
	var after []soakSampleRow
	for _, r := range rows {
		if r.at >= warm {
			after = append(after, r)
		}
	}
	g := growthMap{}
	if len(after) < 3 {
		return g, 0
	}
	third := len(after) / 3
	first, last := after[:third], after[len(after)-third:]
	series := map[string]func(soakSampleRow) float64{
		"rss":        func(r soakSampleRow) float64 { return r.rssMB },
		"goroutines": func(r soakSampleRow) float64 { return float64(r.goroutines) },
		"open_files": func(r soakSampleRow) float64 { return float64(r.openFiles) },
		"db_conns":   func(r soakSampleRow) float64 { return float64(r.dbConns) },
	}
	rel := func(get func(soakSampleRow) float64) float64 {
		a, b := median(first, get), median(last, get)
		if a <= 0 {
			if b <= 0 {
				return 0
			}
			return 1
		}
		return (b - a) / a
	}
	for name, get := range series {
		g[name] = rel(get)
	}
	return g, rel(func(r soakSampleRow) float64 { return r.p99ms })
}

func median(rows []soakSampleRow, get func(soakSampleRow) float64) float64 {
	v := make([]float64, len(rows))
	for i, r := range rows {
		v[i] = get(r)
	}
	slices.Sort(v)
	return v[len(v)/2]
}

func quantileMs(d []time.Duration, q float64) float64 {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return float64(s[int(q*float64(len(s)-1))]) / float64(time.Millisecond)
}

func writeSoakCSV(path string, rows []soakSampleRow) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	_ = w.Write([]string{"seconds", "rss_mb", "goroutines", "open_files", "db_connections", "store_mb", "p50_ms", "p99_ms", "requests", "errors", "workflows_done"})
	for _, r := range rows {
		_ = w.Write([]string{
			strconv.FormatFloat(r.at.Seconds(), 'f', 1, 64), strconv.FormatFloat(r.rssMB, 'f', 1, 64),
			strconv.Itoa(r.goroutines), strconv.Itoa(r.openFiles), strconv.Itoa(r.dbConns),
			strconv.FormatFloat(r.storeMB, 'f', 2, 64), strconv.FormatFloat(r.p50ms, 'f', 1, 64), strconv.FormatFloat(r.p99ms, 'f', 1, 64),
			strconv.Itoa(r.requests), strconv.Itoa(r.errs), strconv.Itoa(r.wfDone),
		})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// rssMB reads VmRSS of a process.
func rssMB(pid int) float64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
			return kb / 1024
		}
	}
	return 0
}

func countFDs(pid int) int {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return 0
	}
	return len(ents)
}

// sqliteFDs counts the server's open descriptors of its database files:
// the SQLite store's connections.
func sqliteFDs(srv *crashtest.Server) int {
	dir := fmt.Sprintf("/proc/%d/fd", srv.Pid())
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range ents {
		if target, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil && strings.Contains(target, "iwf.db") {
			n++
		}
	}
	return n
}

func dirMB(dir string) float64 {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	var total int64
	for _, e := range ents {
		if info, err := e.Info(); err == nil {
			total += info.Size()
		}
	}
	return float64(total) / (1 << 20)
}

// metricValue reads one unlabelled sample from the server's /metrics.
func metricValue(srv *crashtest.Server, name string) float64 {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL()+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	s := bufio.NewScanner(resp.Body)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), name+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}

// pgCount runs a one-value query on the PostgreSQL server at dbURL; -1 when it cannot.
func pgCount(t *testing.T, dbURL, query string, args ...any) int {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return -1
	}
	defer conn.Close(ctx)
	var n int64
	if err := conn.QueryRow(ctx, query, args...).Scan(&n); err != nil {
		return -1
	}
	return int(n)
}
