package main

// Workload W5: a server on a large store. Two databases: an empty one, the
// reference, and a large one: one template BenchW5 run through the real
// server, the server stopped, N clones of it written in bulk (preload.go).
// Then W1 @1 and W1 @64 in rounds, on the empty store and on the large one
// (the empty one first in odd rounds, second in even ones), each on a fresh
// server process; the ratios compare the medians of the rounds. A single
// pair of windows moved with the machine (the empty store's W1 @64 alone
// varied by 8–17 % between runs on the 2-core VMs) more than with the
// store's size. After the rounds, a selective search, the console's list
// page and a preloaded run's page on the large store. Last, the server
// restarts with a retention of 1 ms for BenchW5 and W1 @64 runs while the
// sweep deletes the N runs.

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/jackc/pgx/v5"
)

const (
	// defaultLargeN is W5's default number of preloaded runs.
	defaultLargeN = 1_000_000
	// The targets of W5.
	largeW1Ratio    = 0.9  // W1 @64 on the large store / on the empty one, at least
	largeP50Ratio   = 1.1  // W1 @1 p50 on the large store / on the empty one, at most
	largeSearchP99  = 50.0 // ms
	largeSweepW1    = 0.8  // W1 @64 during the sweep / before it, at least
	largeSweepRate  = 2000 // runs/s, at least
	largeSearches   = 200  // selective searches measured
	largePageGets   = 20   // GETs of each console page measured
	largeSweepLimit = 2 * time.Hour
	// largeRounds is how many times W1 @1 and W1 @64 run on each store,
	// alternating (one with -quick).
	largeRounds = 3
)

// largeResult is what W5 measured on one store.
type largeResult struct {
	n int
	// The W1 runs, one per round: on the empty store and on the large
	// store; and the run during the sweep.
	emptyAt1, emptyAt64, largeAt1, largeAt64 []*result
	sweepAt64                                *result
	emptySize, largeSize                     storeSize
	preload                                  time.Duration
	search, list, runPage                    dist
	searchHits                               int // runs the first search found
	searchBad                                int // searches that found no run
	listBytes, runBytes                      int
	// The sweep: runs deleted over its whole length, and while W1 ran.
	swept, sweptInWindow int64
	sweepTime            time.Duration
	sweepEndedInWindow   bool
	errs                 []string
}

// medianOf returns the median of f over rs (the mean of the middle two of
// an even count); 0 when rs is empty.
func medianOf(rs []*result, f func(*result) float64) float64 {
	v := make([]float64, len(rs))
	for i, r := range rs {
		v[i] = f(r)
	}
	return medianFloat(v)
}

// throughputOf and p50Of are the figures the ratios compare.
func throughputOf(r *result) float64 { return r.throughput() }
func p50Of(r *result) float64        { return float64(waitP50(r)) }

// w1Ratio, p50Ratio and sweepW1 are the relative figures, of the rounds'
// medians (0: unmeasured).
func (l *largeResult) w1Ratio() float64 {
	e := medianOf(l.emptyAt64, throughputOf)
	if e == 0 || len(l.largeAt64) == 0 {
		return 0
	}
	return medianOf(l.largeAt64, throughputOf) / e
}

func (l *largeResult) p50Ratio() float64 {
	e := medianOf(l.emptyAt1, p50Of)
	if e == 0 || len(l.largeAt1) == 0 {
		return 0
	}
	return medianOf(l.largeAt1, p50Of) / e
}

// sweepW1 compares W1 @64 during the sweep with the large store's rounds.
func (l *largeResult) sweepW1() float64 {
	b := medianOf(l.largeAt64, throughputOf)
	if b == 0 || l.sweepAt64 == nil {
		return 0
	}
	return l.sweepAt64.throughput() / b
}

// sweepRate is the runs deleted per second while W1 ran; overallRate over
// the whole sweep.
func (l *largeResult) sweepRate() float64 {
	if l.sweepAt64 == nil || l.sweepAt64.cpu.wall <= 0 {
		return 0
	}
	return float64(l.sweptInWindow) / l.sweepAt64.cpu.wall.Seconds()
}

func (l *largeResult) overallRate() float64 {
	if l.sweepTime <= 0 {
		return 0
	}
	return float64(l.swept) / l.sweepTime.Seconds()
}

// waitP50 is the @1 run's p50 seen with getWithWait (the @1 target's).
func waitP50(r *result) time.Duration {
	if r.latWait != nil {
		return r.latWait.p50
	}
	return r.lat.p50
}

// largeGoal is one of W5's targets.
type largeGoal struct {
	what    string
	shown   string
	verdict string
}

// goals returns W5's targets with the measured figures.
func (l *largeResult) goals() []largeGoal {
	check := func(v, limit float64, atMost bool) string {
		switch {
		case v == 0:
			return "NOT MEASURED"
		case atMost && v <= limit, !atMost && v >= limit:
			return "PASS"
		}
		return "MISS"
	}
	pct := func(v float64) string { return fmt.Sprintf("%.0f %%", 100*v) }
	g := []largeGoal{
		{what: fmt.Sprintf("W5 W1 @64 on %s runs / empty store >= %.0f %%", fmtInt(int64(l.n)), 100*largeW1Ratio), shown: pct(l.w1Ratio()), verdict: check(l.w1Ratio(), largeW1Ratio, false)},
		{what: fmt.Sprintf("W5 W1 @1 p50 on %s runs / empty store <= %.0f %%", fmtInt(int64(l.n)), 100*largeP50Ratio), shown: pct(l.p50Ratio()), verdict: check(l.p50Ratio(), largeP50Ratio, true)},
	}
	sp := float64(l.search.p99) / float64(time.Millisecond)
	sv := check(sp, largeSearchP99, true)
	if l.search.n == 0 {
		sv = "NOT MEASURED"
	}
	g = append(g, largeGoal{what: fmt.Sprintf("W5 selective search p99 <= %.0f ms", largeSearchP99), shown: fmtDur(l.search.p99), verdict: sv},
		largeGoal{what: fmt.Sprintf("W5 W1 @64 during the sweep / before >= %.0f %%", 100*largeSweepW1), shown: pct(l.sweepW1()), verdict: check(l.sweepW1(), largeSweepW1, false)},
		largeGoal{what: fmt.Sprintf("W5 sweep while W1 runs >= %s runs/s", fmtInt(largeSweepRate)), shown: fmtRate(l.sweepRate()) + "/s", verdict: check(l.sweepRate(), largeSweepRate, false)})
	return g
}

// runLarge runs W5 on one store.
func runLarge(ctx context.Context, o *options, store, bin, tmp string, w *worker, pg *pgAdmin, tag string, progress func(string, ...any)) *largeResult {
	l := &largeResult{n: o.counts["W5"]}
	fail := func(format string, a ...any) *largeResult {
		msg := fmt.Sprintf(format, a...)
		l.errs = append(l.errs, msg)
		progress("%s W5: %s", store, msg)
		return l
	}
	// newDB creates a database and returns its URL, a function giving its
	// size, the PostgreSQL backends serving it, and a clean-up.
	newDB := func(suffix string) (db string, size func() (storeSize, error), pids func() []int, done func(), err error) {
		name := fmt.Sprintf("iwf_bench_%s_%s", tag, suffix)
		if pg == nil {
			path := filepath.Join(tmp, name+".db")
			return "sqlite://" + path, func() (storeSize, error) { return sqliteSize(path) }, nil, func() {}, nil
		}
		if db, err = pg.createDatabase(ctx, name); err != nil {
			return "", nil, nil, nil, err
		}
		conn, err := pgx.Connect(ctx, withoutPoolParams(db))
		if err != nil {
			return "", nil, nil, nil, err
		}
		size = func() (storeSize, error) { return postgresSize(ctx, conn) }
		pids = func() []int { return pg.backendPIDs(ctx, name) }
		done = func() {
			conn.Close(context.Background())
			if !o.keep {
				if derr := pg.dropDatabase(context.Background(), name); derr != nil {
					progress("dropping database %s: %v", name, derr)
				}
			}
		}
		return db, size, pids, done, nil
	}
	quiet := append(append([]string{}, o.serverArgs...), "--retention", "0")

	// The empty store, kept for the rounds.
	edb, esize, epids, edone, err := newDB("w5e")
	if err != nil {
		return fail("%v", err)
	}
	defer edone()

	// The large store: the template through the server.
	db, size, pids, done, err := newDB("w5")
	if err != nil {
		return fail("%v", err)
	}
	defer done()
	var tpl preloadTemplate
	err = largePhase(ctx, o, bin, db, filepath.Join(tmp, tag+"-w5-template.log"), quiet, w, pids, func(t *target) error {
		var err error
		tpl, err = runTemplate(ctx, t)
		return err
	})
	if err != nil {
		return fail("template: %v", err)
	}
	progress("%s W5: preloading %s runs ...", store, fmtInt(int64(l.n)))
	began := time.Now()
	last := time.Now()
	report := func(d, n int, el time.Duration) {
		if time.Since(last) >= 30*time.Second || d == n {
			last = time.Now()
			progress("  %s of %s preloaded in %.0f s (%s/s)", fmtInt(int64(d)), fmtInt(int64(n)), el.Seconds(), fmtRate(float64(d)/el.Seconds()))
		}
	}
	if pg == nil {
		err = preloadSQLite(ctx, strings.TrimPrefix(db, "sqlite://"), tpl, 0, l.n, report)
	} else {
		err = preloadPostgres(ctx, db, tpl, 0, l.n, report)
	}
	l.preload = time.Since(began)
	if err != nil {
		return fail("%v", err)
	}
	if l.largeSize, err = size(); err != nil {
		return fail("size: %v", err)
	}

	// W1 in rounds on both stores, the empty store first in odd rounds
	// and second in even ones: what one phase leaves to the next (the
	// database's checkpoint of its writes, say) then weighs on both.
	rounds := largeRounds
	if o.quick {
		rounds = 1
	}
	// w1Phase runs W1 @1 and W1 @inflight on a fresh server on one of the
	// two stores and appends the runs to that store's lists.
	w1Phase := func(what, db string, pids func() []int, at1s, at64s *[]*result) func(r int) error {
		return func(r int) error {
			logPath := filepath.Join(tmp, fmt.Sprintf("%s-w5-%s%d.log", tag, what, r))
			err := largePhase(ctx, o, bin, db, logPath, quiet, w, pids, func(t *target) error {
				at1, at64, err := measureW1(ctx, o, t)
				*at1s, *at64s = appendResult(*at1s, at1), appendResult(*at64s, at64)
				return err
			})
			if err != nil {
				return fmt.Errorf("%s store, round %d: %w", what, r, err)
			}
			return nil
		}
	}
	emptyPhase := w1Phase("empty", edb, epids, &l.emptyAt1, &l.emptyAt64)
	largeW1Phase := w1Phase("large", db, pids, &l.largeAt1, &l.largeAt64)
	for r := 1; r <= rounds; r++ {
		progress("%s W5: round %d of %d: W1 @1 and W1 @%d on the empty store and on %s runs ...", store, r, rounds, o.inFlight, fmtInt(int64(l.n)))
		first, second := emptyPhase, largeW1Phase
		if r%2 == 0 {
			first, second = largeW1Phase, emptyPhase
		}
		if err := first(r); err != nil {
			return fail("%v", err)
		}
		if err := second(r); err != nil {
			return fail("%v", err)
		}
	}
	if l.emptySize, err = esize(); err != nil {
		return fail("size: %v", err)
	}

	// The large store's reads.
	progress("%s W5: search and console pages on %s runs ...", store, fmtInt(int64(l.n)))
	err = largePhase(ctx, o, bin, db, filepath.Join(tmp, tag+"-w5-reads.log"), quiet, w, pids, func(t *target) error {
		return l.measureReads(ctx, t)
	})
	if err != nil {
		return fail("large store: %v", err)
	}

	// The sweep, with W1 @64 running.
	progress("%s W5: sweeping %s expired runs while W1 @%d runs ...", store, fmtInt(int64(l.n)), o.inFlight)
	args := append(append([]string{}, quiet...), "--retention-for", typeW5+"=1ms", "--retention-interval", "1s")
	err = largePhase(ctx, o, bin, db, filepath.Join(tmp, tag+"-w5-sweep.log"), args, w, pids, func(t *target) error {
		return l.measureSweep(ctx, o, t, progress)
	})
	if err != nil {
		return fail("sweep: %v", err)
	}
	return l
}

// appendResult appends r to rs unless it is nil (a run that failed).
func appendResult(rs []*result, r *result) []*result {
	if r == nil {
		return rs
	}
	return append(rs, r)
}

// largePhase starts a server on db, runs do against it, and stops it;
// errors in the server log fail the phase. With -pprof the server serves
// net/http/pprof and each W1 run's window is profiled (runW1).
func largePhase(ctx context.Context, o *options, bin, db, logPath string, args []string, w *worker, pids func() []int, do func(*target) error) error {
	srv, err := startServer(ctx, bin, db, logPath, args, o.pprofDir != "")
	if err != nil {
		return err
	}
	defer srv.stop()
	api, tr, err := newAPIClient(srv.url)
	if err != nil {
		return err
	}
	defer tr.CloseIdleConnections()
	t := &target{srv: srv, api: api, worker: w, prefix: strings.TrimSuffix(filepath.Base(logPath), ".log"), dbPIDs: pids}
	if err := do(t); err != nil {
		return err
	}
	if !srv.alive() {
		return fmt.Errorf("the server exited: %s", srv.logTail())
	}
	tr.CloseIdleConnections()
	srv.stop()
	if n, first := srv.logErrors(); n > 0 {
		return fmt.Errorf("the server logged %d errors, first: %s", n, truncate(first, 300))
	}
	return nil
}

// measureW1 runs W1 @1 (with getWithWait) and W1 @inflight on t.
func measureW1(ctx context.Context, o *options, t *target) (at1, at64 *result, err error) {
	prefix := t.prefix
	t.prefix = prefix + "-1"
	at1, err = t.runW1(ctx, o, 1, true)
	if err != nil {
		return nil, nil, err
	}
	t.prefix = prefix + "-n"
	at64, err = t.runW1(ctx, o, o.inFlight, false)
	t.prefix = prefix
	return at1, at64, err
}

// runW1 is one closed-loop W1 run with the figures runOne adds.
func (t *target) runW1(ctx context.Context, o *options, inFlight int, withWait bool) (*result, error) {
	bg := -1.0
	if !o.quick {
		bg = backgroundLoad(ctx)
	}
	spec := loopSpec{workload: "W1", inFlight: inFlight, warmup: o.warmup, duration: o.duration, withWait: withWait}
	if o.pprofDir != "" {
		// t.prefix names the phase and the run: w5-empty-1, w5-large-n,
		// w5-sweep (the server's log name without the tag).
		spec.profile = filepath.Join(o.pprofDir, fmt.Sprintf("%s-%d.pprof", t.prefix, inFlight))
	}
	r, err := t.closedLoop(ctx, spec)
	if err != nil {
		return nil, err
	}
	r.background = bg
	r.peakRSS, _ = peakRSS(t.srv.pid)
	r.pgCommits, r.pgRollbacks = -1, -1
	return r, nil
}

// runTemplate runs the template BenchW5 workflow through the server and
// returns its ids.
func runTemplate(ctx context.Context, t *target) (preloadTemplate, error) {
	run, err := runW5(ctx, t, w5TemplateID)
	return preloadTemplate{workflowID: w5TemplateID, runID: run, customer: w5TemplateCustomer}, err
}

// runW5 runs one BenchW5 workflow through the server until it is
// COMPLETED and returns its run id.
func runW5(ctx context.Context, t *target, id string) (string, error) {
	f, err := t.startOne(ctx, "W5", id)
	if err != nil {
		return "", err
	}
	defer t.worker.forget(id)
	select {
	case <-f.done:
	case <-time.After(completionTimeout):
		return "", fmt.Errorf("%s did not complete in %s", id, completionTimeout)
	case <-ctx.Done():
		return "", ctx.Err()
	}
	st, err := t.awaitClose(ctx, id, completionTimeout)
	if err != nil {
		return "", err
	}
	if st != iwfapi.WorkflowStatusCompleted {
		return "", fmt.Errorf("%s ended %s", id, st)
	}
	resp, err := t.api.GetWorkflowWithResponse(ctx, iwfapi.WorkflowGetRequest{WorkflowId: id})
	if err != nil {
		return "", err
	}
	if resp.JSON200 == nil {
		return "", fmt.Errorf("get %s: %s %s", id, resp.Status(), resp.Body)
	}
	return resp.JSON200.WorkflowRunId, nil
}

// measureReads measures the selective search and the console's pages.
func (l *largeResult) measureReads(ctx context.Context, t *target) error {
	customers := max(1, l.n/w5PerCustomer)
	var lat []time.Duration
	for i := range largeSearches {
		c := rand.IntN(customers)
		q := fmt.Sprintf("CustomerId = '%s'", w5Customer(c*w5PerCustomer))
		began := time.Now()
		resp, err := t.api.SearchWorkflowsWithResponse(ctx, iwfapi.WorkflowSearchRequest{Query: q})
		lat = append(lat, time.Since(began))
		if err != nil {
			return fmt.Errorf("search %q: %w", q, err)
		}
		if resp.JSON200 == nil {
			return fmt.Errorf("search %q: %s %s", q, resp.Status(), truncate(string(resp.Body), 300))
		}
		hits := 0
		if resp.JSON200.WorkflowExecutions != nil {
			hits = len(*resp.JSON200.WorkflowExecutions)
		}
		if i == 0 {
			l.searchHits = hits
		}
		if hits == 0 {
			l.searchBad++
		}
	}
	l.search = summarize(lat)
	var err error
	if l.list, l.listBytes, err = timeGets(ctx, t.srv.url+"/ui/"); err != nil {
		return err
	}
	l.runPage, l.runBytes, err = timeGets(ctx, t.srv.url+"/ui/workflows/"+url.PathEscape(w5ID(l.n/2)))
	return err
}

// timeGets GETs a page largePageGets times, one at a time, and returns the
// response times (request sent -> body read, over loopback) and the body's
// size.
func timeGets(ctx context.Context, u string) (dist, int, error) {
	c := &http.Client{Timeout: time.Minute}
	var lat []time.Duration
	size := 0
	for range largePageGets {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return dist{}, 0, err
		}
		began := time.Now()
		resp, err := c.Do(req)
		if err != nil {
			return dist{}, 0, err
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		lat = append(lat, time.Since(began))
		if err != nil {
			return dist{}, 0, err
		}
		if resp.StatusCode != http.StatusOK {
			return dist{}, 0, fmt.Errorf("GET %s: %s %s", u, resp.Status, truncate(string(b), 300))
		}
		size = len(b)
	}
	return summarize(lat), size, nil
}

// measureSweep waits for the sweep to start, runs W1 @inflight during it,
// then waits until every preloaded run is deleted. The figures come from
// the server's metrics: iwf_retention_runs_deleted_total and
// iwf_retention_backlog_runs.
func (l *largeResult) measureSweep(ctx context.Context, o *options, t *target, progress func(string, ...any)) error {
	want := int64(l.n) + 1 // the clones and the template
	deadline := time.Now().Add(largeSweepLimit)
	poll := func(until func(deleted float64) bool) (float64, time.Time, error) {
		for {
			m := t.srv.metrics()
			d := m["iwf_retention_runs_deleted_total"]
			if until(d) {
				return d, time.Now(), nil
			}
			if !t.srv.alive() {
				return 0, time.Time{}, fmt.Errorf("the server exited: %s", t.srv.logTail())
			}
			if time.Now().After(deadline) {
				return 0, time.Time{}, fmt.Errorf("after %s only %.0f of %d runs deleted", largeSweepLimit, d, want)
			}
			select {
			case <-ctx.Done():
				return 0, time.Time{}, ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	d0, t0, err := poll(func(d float64) bool { return d > 0 })
	if err != nil {
		return err
	}
	r, err := t.runW1(ctx, o, o.inFlight, false)
	if err != nil {
		return err
	}
	l.sweepAt64 = r
	l.sweptInWindow = int64(r.cpu.metrics["iwf_retention_runs_deleted_total"])
	m := t.srv.metrics()
	l.sweepEndedInWindow = int64(m["iwf_retention_runs_deleted_total"]) >= want
	last := time.Now()
	d1, t1, err := poll(func(d float64) bool {
		if time.Since(last) >= 30*time.Second {
			last = time.Now()
			progress("  %s of %s deleted", fmtInt(int64(d)), fmtInt(want))
		}
		return int64(d) >= want
	})
	if err != nil {
		return err
	}
	// The first poll saw the first batch done: the rate counts from there.
	l.swept, l.sweepTime = int64(d1-d0), t1.Sub(t0)
	return nil
}

// printLarge writes W5's section of a store's report.
func printLarge(out io.Writer, l *largeResult, o *options) {
	fmt.Fprintf(out, "W5: a large store, %s preloaded closed BenchW5 runs (W1's two states, 4 search attributes: CustomerId, Region, Amount, Tags),\n", fmtInt(int64(l.n)))
	fmt.Fprintf(out, "    cloned in the database from a template run the server ran; every phase on a fresh server process (--retention 0);\n")
	fmt.Fprintf(out, "    W1 @1 and W1 @%d in %d round(s) on both stores (the empty one first in odd rounds), the ratios of the rounds' medians;\n", o.inFlight, max(len(l.emptyAt64), len(l.largeAt64)))
	fmt.Fprintf(out, "    the sweep: restart with --retention-for %s=1ms --retention-interval 1s, W1 @%d once the first batch is deleted\n", typeW5, o.inFlight)
	for _, e := range l.errs {
		fmt.Fprintf(out, "W5 FAILED: %s\n", e)
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "run\tworkflows\twf/s\tstates/s\tp50\tp99\tp50 getWithWait\tsrv CPU s/1k wf (+db)\tCPU busy: srv+gen+db+other\t")
	row := func(name string, r *result) {
		if r == nil {
			return
		}
		wait := "-"
		if r.latWait != nil {
			wait = fmtDur(r.latWait.p50)
		}
		cpu := fmt.Sprintf("%.2f", r.cpuPer1k())
		if r.cpu.hasDB && r.completed > 0 {
			cpu += fmt.Sprintf(" (+%.2f)", r.cpu.db.Seconds()/float64(r.completed)*1000)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", name, fmtInt(r.completed), fmtRate(r.throughput()),
			fmtRate(r.throughput()*float64(r.statesPerWorkflow)), fmtDur(r.lat.p50), fmtDur(r.lat.p99), wait, cpu, fmtBusy(r.cpu))
	}
	for i := range max(len(l.emptyAt1), len(l.largeAt1)) {
		at := func(rs []*result) *result {
			if i < len(rs) {
				return rs[i]
			}
			return nil
		}
		row(fmt.Sprintf("%d: empty W1 @1", i+1), at(l.emptyAt1))
		row(fmt.Sprintf("%d: empty W1 @%d", i+1, o.inFlight), at(l.emptyAt64))
		row(fmt.Sprintf("%d: large W1 @1", i+1), at(l.largeAt1))
		row(fmt.Sprintf("%d: large W1 @%d", i+1, o.inFlight), at(l.largeAt64))
	}
	row(fmt.Sprintf("sweep W1 @%d", o.inFlight), l.sweepAt64)
	_ = tw.Flush()
	if l.preload > 0 {
		fmt.Fprintf(out, "  preload: %s runs in %.0f s (%s/s)\n", fmtInt(int64(l.n)), l.preload.Seconds(), fmtRate(float64(l.n)/l.preload.Seconds()))
	}
	if l.largeSize.total > 0 {
		fmt.Fprintf(out, "  size: empty store after W1 %s; after the preload %s = %s bytes per preloaded workflow", fmtSize(l.emptySize.total),
			fmtSize(l.largeSize.total), fmtInt(l.largeSize.total/int64(max(1, l.n))))
		if len(l.largeSize.tables) > 0 {
			var ts []string
			for _, t := range l.largeSize.tables {
				ts = append(ts, fmt.Sprintf("%s %s", t.name, fmtSize(t.bytes)))
			}
			fmt.Fprintf(out, " (biggest tables, indexes included: %s)", strings.Join(ts, ", "))
		}
		fmt.Fprintln(out)
	}
	if l.search.n > 0 {
		fmt.Fprintf(out, "  selective search (CustomerId = '<one of %s>', REST workflow/search, %d one at a time): p50 %s p95 %s p99 %s max %s; the first found %d runs, %d found none\n",
			fmtInt(int64(max(1, l.n/w5PerCustomer))), l.search.n, fmtDur(l.search.p50), fmtDur(l.search.p95), fmtDur(l.search.p99), fmtDur(l.search.max), l.searchHits, l.searchBad)
		fmt.Fprintf(out, "  console list page GET /ui/ (%d, request -> body read over loopback): p50 %s p99 %s, %s bytes\n", l.list.n, fmtDur(l.list.p50), fmtDur(l.list.p99), fmtInt(int64(l.listBytes)))
		fmt.Fprintf(out, "  console run page of %s (%d): p50 %s p99 %s, %s bytes\n", w5ID(l.n/2), l.runPage.n, fmtDur(l.runPage.p50), fmtDur(l.runPage.p99), fmtInt(int64(l.runBytes)))
	}
	if l.sweepTime > 0 {
		note := ""
		if l.sweepEndedInWindow {
			note = " (the sweep ended inside W1's window: the window's figures cover only part of it)"
		}
		fmt.Fprintf(out, "  sweep (iwf_retention_runs_deleted_total): %s runs in %.1f s after its first batch, %s runs/s; %s runs/s while W1 @%d ran%s\n",
			fmtInt(l.swept), l.sweepTime.Seconds(), fmtRate(l.overallRate()), fmtRate(l.sweepRate()), o.inFlight, note)
	}
	fmt.Fprintln(out, "W5 targets:")
	for _, g := range l.goals() {
		v := g.verdict
		if o.quick && (v == "PASS" || v == "MISS") {
			v += " (quick run: not meaningful)"
		}
		fmt.Fprintf(out, "  %-62s %10s  %s\n", g.what, g.shown, v)
	}
}
