package main

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"
)

// result is what one run measured.
type result struct {
	workload          string
	inFlight          int // W3: the number of sleeping workflows
	statesPerWorkflow int

	// started counts every workflow the run started (warm-up included);
	// completed counts the workflows that completed inside the window.
	started, completed int64
	// lat is start -> final execute arrival at the worker (W3: lateness).
	lat dist
	// latWait is start -> getWithWait returned COMPLETED (withWait runs).
	latWait *dist
	// latExec is, for X, signal sent -> the final execute call arrived
	// (lat is signal sent -> getWithWait on the other node returned).
	latExec *dist
	// W3 only.
	lateness dist
	// latenessCalm covers the timers due after the last start returned.
	latenessCalm dist
	// worst is the 10 s window of due times with the latest timers.
	worst     lateWindow
	maxAsleep int
	early     int
	// backlogWaitUntil and backlogOverdue count, when the last start
	// returned, the workflows still waiting for their waitUntil call and
	// those whose timer was due but whose execute call had not arrived.
	backlogWaitUntil, backlogOverdue int
	startRate                        float64
	startSpan                        time.Duration

	cpu     cpuUse
	peakRSS int64
	// background is the machine's busy share just before the run (-1:
	// unknown).
	background float64

	errors                 int64
	firstError             string
	verified, verifyFailed int
	verifyError            string
	retries                int64 // worker calls with attempt > 1
	logErrors              int
	firstLogError          string
	pgCommits, pgRollbacks int64 // whole server lifetime, -1 when unknown

	// ran counts the workflows that completed over the whole run (warm-up
	// included); dbBefore and dbAfter are the database's size before the
	// run (after a first batch of workflows) and at its end (-1: not
	// measured).
	ran               int64
	dbBefore, dbAfter int64
	// offload: the server ran with external storage on; extBytes and
	// extObjects are what its file:// store held at the end of the run.
	offload              bool
	extBytes, extObjects int64

	profile, note string
}

// throughput returns completed workflows per second of the window.
func (r *result) throughput() float64 {
	if r.cpu.wall <= 0 {
		return 0
	}
	return float64(r.completed) / r.cpu.wall.Seconds()
}

// cpuPer1k returns server CPU seconds per 1,000 completed workflows.
func (r *result) cpuPer1k() float64 {
	if r.completed == 0 {
		return 0
	}
	return r.cpu.server.Seconds() / float64(r.completed) * 1000
}

// name is the run's label in the tables.
func (r *result) name() string {
	switch {
	case r.workload == "W3" || r.workload == "W4":
		return r.workload + " timers"
	case r.workload == "X":
		return "X cross-node"
	case r.inFlight == 1:
		return r.workload + " @1"
	default:
		return fmt.Sprintf("%s @%d", r.workload, r.inFlight)
	}
}

// pgShareTarget is the share of SQLite's W1 and W1b throughput at which
// the budget lines say what PostgreSQL's backends could spend. It was a
// target; where the server and the database share two cores it cannot be
// reached, and PostgreSQL is now measured against DBOS Transact
// (../shared/peerbench) instead: the ratio is printed for information.
const pgShareTarget = 0.8

// goal is a target from the brief, checked against one figure of a run.
type goal struct {
	workload string
	latency  bool // the @1 run rather than the throughput run
	what     string
	limit    float64
	atMost   bool // the figure must be <= limit (else >=)
	unit     string
	measure  func(r *result) (float64, string) // value and its label
	// base, when set, makes the figure a ratio: measure of the run over
	// measure of this workload's run (W1: the run at -inflight).
	base string
}

// goals returns the targets of a store, in the order of the target table.
func goals(store string) []goal {
	p50, tput := 3.0, 2000.0
	if store == storePostgres {
		p50, tput = 6, 1500
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	rss := func(r *result) (float64, string) {
		v := float64(r.peakRSS) / (1 << 20)
		return v, fmtMB(r.peakRSS)
	}
	states := func(r *result) (float64, string) {
		v := r.throughput() * float64(r.statesPerWorkflow)
		return v, fmtRate(v) + "/s"
	}
	g := []goal{
		{workload: "W1", what: "state executions/s", limit: tput, unit: "/s", measure: states},
		{workload: "W1b", what: "state executions/s", limit: tput, unit: "/s", measure: states},
		{workload: "W1", latency: true, what: "p50 start->completion observed with getWithWait", limit: p50, atMost: true, unit: "ms",
			measure: func(r *result) (float64, string) {
				if r.latWait == nil {
					return ms(r.lat.p50), fmtDur(r.lat.p50)
				}
				return ms(r.latWait.p50), fmtDur(r.latWait.p50)
			}},
		{workload: "W1x", base: "W1", what: "state executions/s / W1's", limit: offloadW1Share, measure: states},
		{workload: "W3", what: "p99 timer lateness", limit: 250, atMost: true, unit: "ms",
			measure: func(r *result) (float64, string) { return ms(r.lateness.p99), fmtDur(r.lateness.p99) }},
		{workload: "W3", what: "server peak RSS", limit: 250, atMost: true, unit: "MB", measure: rss},
		{workload: "W4", what: "server peak RSS", limit: 250, atMost: true, unit: "MB", measure: rss},
		{workload: "W4", what: "p99 timer lateness", limit: 1000, atMost: true, unit: "ms",
			measure: func(r *result) (float64, string) { return ms(r.lateness.p99), fmtDur(r.lateness.p99) }},
		{workload: "W6x", what: "database bytes per workflow", limit: offloadDBKiB, atMost: true, unit: "KiB",
			measure: func(r *result) (float64, string) {
				v := r.dbPerWorkflow()
				if math.IsNaN(v) {
					return math.Inf(1), "not measured"
				}
				return v / 1024, fmtBytes(v)
			}},
	}
	if store == storePostgres {
		g = append(g, goal{workload: "X", what: "p50 signal on node B -> completion seen on node A", limit: 20, atMost: true, unit: "ms",
			measure: func(r *result) (float64, string) { return ms(r.lat.p50), fmtDur(r.lat.p50) }})
	}
	return g
}

// storeReport is the runs of one store.
type storeReport struct {
	store   string // storeSQLite or storePostgres
	where   string
	skipped string // why the store was not measured
	results []*result
	failed  []string     // runs that failed, with the reason
	space   *spaceResult // workload R, nil when not run
	large   *largeResult // workload W5, nil when not run
	// breakdown is W1 @1's breakdown (-breakdown), nil when not run.
	breakdown *breakdownResult
}

// printReport writes one store's table, notes and target checks.
func printReport(out io.Writer, sr *storeReport, o *options) {
	fmt.Fprintf(out, "\n== %s: %s ==\n", sr.store, sr.where)
	if sr.skipped != "" {
		fmt.Fprintf(out, "SKIPPED: %s\n", sr.skipped)
		return
	}
	if sr.large != nil {
		defer printLarge(out, sr.large, o)
	}
	if sr.space != nil {
		defer printSpace(out, sr.space, o)
	}
	if (sr.space != nil || sr.large != nil) && len(sr.results) == 0 && len(sr.failed) == 0 {
		return // only R and W5 were run
	}
	var table strings.Builder
	tw := tabwriter.NewWriter(&table, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\t\t\t\t\t\t\tCPU s/1k wf\t\t\t\t\t")
	fmt.Fprintln(tw, "run\tworkflows\twf/s\tstates/s\tp50\tp95\tp99\tsrv (+db)\tsrv peak RSS\tCPU busy: srv+gen+db+other\tPG tx/wf: commit+rb\tdb/wf\t")
	for _, r := range sr.results {
		wfs, sps := fmtRate(r.throughput()), fmtRate(r.throughput()*float64(r.statesPerWorkflow))
		if r.workload == "W3" || r.workload == "W4" || r.workload == "X" {
			wfs, sps = "-", "-"
		}
		commits := "-"
		if r.pgCommits >= 0 && r.started > 0 {
			commits = fmt.Sprintf("%.1f+%.1f", float64(r.pgCommits)/float64(r.started), float64(r.pgRollbacks)/float64(r.started))
		}
		cpu := fmt.Sprintf("%.2f", r.cpuPer1k())
		if r.cpu.hasDB && r.completed > 0 {
			cpu += fmt.Sprintf(" (+%.2f)", r.cpu.db.Seconds()/float64(r.completed)*1000)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n",
			r.name(), fmtInt(r.completed), wfs, sps,
			fmtDur(r.lat.p50), fmtDur(r.lat.p95), fmtDur(r.lat.p99),
			cpu, fmtMB(r.peakRSS), fmtBusy(r.cpu), commits, fmtBytes(r.dbPerWorkflow()))
	}
	_ = tw.Flush()
	fmt.Fprint(out, withBreakdown(table.String(), sr))
	for _, f := range sr.failed {
		fmt.Fprintf(out, "FAILED: %s\n", f)
	}

	fmt.Fprintln(out, "notes:")
	for _, r := range sr.results {
		var parts []string
		switch {
		case r.workload == "X":
			parts = append(parts, fmt.Sprintf("two server processes on one database; p50/p95/p99 are signal sent to node B -> getWithWait on node A returned COMPLETED (the workflow was started on node A, its waitUntil answered and committed there); signal sent -> the worker received the final execute call: p50 %s p95 %s p99 %s; %s samples, one at a time, in %.1f s",
				fmtDur(r.latExec.p50), fmtDur(r.latExec.p95), fmtDur(r.latExec.p99), fmtInt(r.completed), r.startSpan.Seconds()))
		case r.workload == "W3" || r.workload == "W4":
			timer := o.timer
			if r.workload == "W4" {
				timer = o.timerW4
			}
			parts = append(parts, fmt.Sprintf("p50/p95/p99 are timer lateness (execute arrival - (waitUntil answer + %s)), max %s, min %s, %d fired early; %s workflows started in %.1f s (%s/s)",
				timer, fmtDur(r.lateness.max), fmtDur(r.lateness.min), r.early, fmtInt(r.started), r.startSpan.Seconds(), fmtRate(r.startRate)))
			parts = append(parts, fmt.Sprintf("at most %s asleep at once", fmtInt(int64(r.maxAsleep))))
			parts = append(parts, fmt.Sprintf("when the last start returned, %s still awaited their waitUntil call and %s timers were due but not yet executed",
				fmtInt(int64(r.backlogWaitUntil)), fmtInt(int64(r.backlogOverdue))))
			if r.latenessCalm.n > 0 {
				parts = append(parts, fmt.Sprintf("the %s timers due after the last start: lateness p50 %s p99 %s", fmtInt(int64(r.latenessCalm.n)), fmtDur(r.latenessCalm.p50), fmtDur(r.latenessCalm.p99)))
			}
			if r.worst.d.n > 0 {
				parts = append(parts, fmt.Sprintf("the latest 10 s of due times were +%.0fs..+%.0fs after the first start: %s timers, lateness p50 %s p99 %s",
					r.worst.from.Seconds(), r.worst.to.Seconds(), fmtInt(int64(r.worst.d.n)), fmtDur(r.worst.d.p50), fmtDur(r.worst.d.p99)))
			}
			parts = append(parts, fmt.Sprintf("CPU over %.1f s from the first start to the last timer", r.cpu.wall.Seconds()))
		default:
			parts = append(parts, fmt.Sprintf("window %.1f s, %s workflows started in all", r.cpu.wall.Seconds(), fmtInt(r.started)))
			if r.latWait != nil {
				parts = append(parts, fmt.Sprintf("start->completion seen by getWithWait: p50 %s p95 %s p99 %s", fmtDur(r.latWait.p50), fmtDur(r.latWait.p95), fmtDur(r.latWait.p99)))
			}
			if v := r.dbPerWorkflow(); !math.IsNaN(v) {
				parts = append(parts, fmt.Sprintf("database %s -> %s over %s workflows completed: %s per workflow",
					fmtBytes(float64(r.dbBefore)), fmtBytes(float64(r.dbAfter)), fmtInt(r.ran), fmtBytes(v)))
			}
			if r.offload {
				s := fmt.Sprintf("external storage on (%s=file://<dir>)", extStoreID)
				if r.ran > 0 {
					s += fmt.Sprintf(": %s objects, %s, %s per workflow", fmtInt(r.extObjects), fmtBytes(float64(r.extBytes)), fmtBytes(float64(r.extBytes)/float64(r.ran)))
				}
				parts = append(parts, s)
			}
		}
		switch {
		case r.background >= 0.15:
			parts = append(parts, fmt.Sprintf("WARNING: the machine was already %.0f%% busy before the run (other processes)", 100*r.background))
		case r.background >= 0:
			parts = append(parts, fmt.Sprintf("machine %.0f%% busy before the run", 100*r.background))
		}
		if s := serverMetrics(r); s != "" {
			parts = append(parts, s)
		}
		if r.errors > 0 {
			parts = append(parts, fmt.Sprintf("%d ERRORS, first: %s", r.errors, r.firstError))
		}
		if r.verified > 0 {
			if r.verifyFailed > 0 {
				parts = append(parts, fmt.Sprintf("verify: %d of %d sampled workflows NOT COMPLETED (%s)", r.verifyFailed, r.verified, r.verifyError))
			} else {
				parts = append(parts, fmt.Sprintf("%d sampled workflows verified COMPLETED", r.verified))
			}
		}
		if r.retries > 0 {
			parts = append(parts, fmt.Sprintf("%d worker calls were retries", r.retries))
		}
		if r.logErrors > 0 {
			parts = append(parts, fmt.Sprintf("server logged %d errors, first: %s", r.logErrors, truncate(r.firstLogError, 300)))
		}
		if r.pgCommits >= 0 {
			parts = append(parts, fmt.Sprintf("PG: %s commits, %s rollbacks (read-only transactions end in rollback) over the server's life, per started workflow in the table", fmtInt(r.pgCommits), fmtInt(r.pgRollbacks)))
		}
		if r.profile != "" {
			parts = append(parts, "cpu profile "+r.profile)
		}
		if r.note != "" {
			parts = append(parts, r.note)
		}
		fmt.Fprintf(out, "  %-10s %s\n", r.name()+":", strings.Join(parts, "; "))
	}
	if s := offloadSummary(sr); s != "" {
		fmt.Fprintf(out, "  %s\n", s)
	}

	worst := 0.0
	for _, r := range sr.results {
		if u := r.cpu; u.machineTotal > 0 {
			other := max(0, u.machineBusy-u.server-u.bench-u.db)
			worst = max(worst, float64(other)/float64(u.machineTotal))
		}
	}
	if worst >= 0.2 {
		fmt.Fprintf(out, "  WARNING: other processes took up to %.0f%% of the machine's CPU during these runs (column \"other\"): throughput and\n"+
			"  latency are lower than on an idle machine; CPU per 1,000 workflows is the figure least affected.\n", 100*worst)
	}
	fmt.Fprintln(out, "targets:")
	for _, g := range goals(sr.store) {
		op := ">="
		if g.atMost {
			op = "<="
		}
		label := g.workload
		switch g.workload {
		case "W1b":
			label = fmt.Sprintf("W1b @%d", w1bInFlight)
		case "W1":
			label = "W1 @1"
			if !g.latency {
				label = fmt.Sprintf("W1 @%d", o.inFlight)
			}
		case "W1x":
			label = fmt.Sprintf("W1x @%d", o.inFlight)
		case "W6x":
			label = fmt.Sprintf("W6x @%d", w6InFlight)
		}
		want := strings.TrimSpace(fmt.Sprintf("%s %s %s %s", g.what, op, fmtLimit(g.limit), g.unit))
		v, shown, ok, hadErrors := sr.figure(g)
		if !ok {
			fmt.Fprintf(out, "  %-8s %-60s %12s  %s\n", label, want, "-", "NOT RUN")
			continue
		}
		verdict := "PASS"
		if (g.atMost && v > g.limit) || (!g.atMost && v < g.limit) {
			verdict = "MISS"
		}
		if hadErrors {
			verdict += " (run had errors)"
		}
		if o.quick {
			verdict += " (quick run: not meaningful)"
		}
		fmt.Fprintf(out, "  %-8s %-60s %12s  %s\n", label, want, shown, verdict)
	}
}

// figure returns a goal's figure on this store: the measure of its run, or
// for a goal with a base, that measure over the base run's. ok is false
// when a run is missing; hadErrors when a run counted errors.
func (sr *storeReport) figure(g goal) (v float64, shown string, ok, hadErrors bool) {
	r := sr.find(g)
	if r == nil {
		return 0, "", false, false
	}
	v, shown = g.measure(r)
	hadErrors = r.errors > 0 || r.verifyFailed > 0
	if g.base == "" {
		return v, shown, true, hadErrors
	}
	b := sr.find(goal{workload: g.base})
	if b == nil {
		return 0, "", false, false
	}
	vb, _ := g.measure(b)
	if vb <= 0 {
		return 0, "", false, false
	}
	return v / vb, fmt.Sprintf("%.2f", v/vb), true, hadErrors || b.errors > 0 || b.verifyFailed > 0
}

// fmtLimit prints a target's limit: a whole number with separators, or a
// share with two decimals.
func fmtLimit(l float64) string {
	if l == math.Trunc(l) {
		return fmtInt(int64(l))
	}
	return fmt.Sprintf("%.2f", l)
}

// find returns the run a goal is checked against.
func (sr *storeReport) find(g goal) *result {
	for _, r := range sr.results {
		if r.workload != g.workload {
			continue
		}
		if g.workload == "W1" && (r.inFlight == 1) != g.latency {
			continue
		}
		return r
	}
	return nil
}

// serverMetrics summarises the server's own metrics over the window: store
// write transactions per workflow and their mean latency (queueing for the
// writer included), worker calls and their mean latency, and the server's
// view of timer lateness.
func serverMetrics(r *result) string {
	m := r.cpu.metrics
	if m == nil || r.completed == 0 {
		return ""
	}
	mean := func(name string) string {
		n := m[name+"_count"]
		if n <= 0 {
			return "-"
		}
		return fmtDur(time.Duration(m[name+"_sum"] / n * float64(time.Second)))
	}
	per := func(name string) float64 { return m[name] / float64(r.completed) }
	s := fmt.Sprintf("server metrics: %.1f store writes/wf (mean %s), %.1f worker calls/wf (mean %s)",
		per("iwf_store_update_seconds_count"), mean("iwf_store_update_seconds"),
		per("iwf_worker_call_seconds_count"), mean("iwf_worker_call_seconds"))
	if m["iwf_timer_lateness_seconds_count"] > 0 {
		s += fmt.Sprintf(", timers fired late by %s on average (server clock)", mean("iwf_timer_lateness_seconds"))
	}
	return s
}

// fmtBusy prints the machine's CPU use over a window as a share of all its
// cores: total, then server + generator/worker + PostgreSQL backends (when
// measured) + everything else (other processes, the kernel's softirqs).
func fmtBusy(u cpuUse) string {
	if u.machineTotal <= 0 {
		return "-"
	}
	pct := func(d time.Duration) float64 { return 100 * float64(d) / float64(u.machineTotal) }
	other := max(0, u.machineBusy-u.server-u.bench-u.db)
	if !u.hasDB {
		return fmt.Sprintf("%.0f%%: %.0f+%.0f+-+%.0f", pct(u.machineBusy), pct(u.server), pct(u.bench), pct(other))
	}
	return fmt.Sprintf("%.0f%%: %.0f+%.0f+%.0f+%.0f", pct(u.machineBusy), pct(u.server), pct(u.bench), pct(u.db), pct(other))
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// printTargets prints the target table: one row per target, one column per
// store, each cell the measured figure and PASS or MISS.
func printTargets(out io.Writer, reports []*storeReport, o *options) {
	type row struct {
		label string
		cells map[string]string
	}
	var rows []*row
	find := func(label string) *row {
		for _, r := range rows {
			if r.label == label {
				return r
			}
		}
		r := &row{label: label, cells: map[string]string{}}
		rows = append(rows, r)
		return r
	}
	// The rows in a fixed order, whatever the stores measured.
	for _, g := range goals(storePostgres) {
		if o.workloads[g.workload] {
			find(goalLabel(g, o))
		}
	}
	for _, sr := range reports {
		for _, g := range goals(sr.store) {
			if !o.workloads[g.workload] {
				continue
			}
			op := ">="
			if g.atMost {
				op = "<="
			}
			cell := ""
			v, shown, ok, hadErrors := sr.figure(g)
			switch {
			case sr.skipped != "":
				cell = "skipped"
			case !ok:
				cell = "not run"
			default:
				verdict := "PASS"
				if (g.atMost && v > g.limit) || (!g.atMost && v < g.limit) {
					verdict = "MISS"
				}
				if hadErrors {
					verdict += "(errors)"
				}
				cell = fmt.Sprintf("%s %s (%s %s)", shown, verdict, op, fmtLimit(g.limit))
				if g.unit == "KiB" {
					cell = fmt.Sprintf("%s %s (%s %s KiB)", shown, verdict, op, fmtLimit(g.limit))
				}
			}
			find(goalLabel(g, o)).cells[sr.store] = cell
		}
	}
	// PostgreSQL's throughput as a share of SQLite's, in the same run of
	// the tool, for both shapes of W1, and what that share leaves the
	// database backends (budgets, printed under the table).
	var (
		lite, pg *storeReport
		budgets  []string
	)
	for _, sr := range reports {
		switch sr.store {
		case storeSQLite:
			lite = sr
		case storePostgres:
			pg = sr
		}
	}
	for _, g := range goals(storePostgres) {
		if g.latency || (g.workload != "W1" && g.workload != "W1b") || !o.workloads[g.workload] || lite == nil || pg == nil {
			continue
		}
		a, b := lite.find(g), pg.find(g)
		if a == nil || b == nil {
			continue
		}
		va, _ := g.measure(a)
		vb, _ := g.measure(b)
		if va <= 0 {
			continue
		}
		run := strings.TrimSuffix(goalLabel(g, o), " state executions/s")
		find(run + " PostgreSQL / SQLite state executions/s").cells[storePostgres] = fmt.Sprintf("%.2f (no target: PostgreSQL is held to DBOS Transact's rate, docs/benchmarks.md)", vb/va)
		if line := shareBudget(a, b, pgShareTarget); line != "" {
			budgets = append(budgets, run+": "+line)
		}
	}
	for _, sr := range reports {
		if sr.space == nil {
			continue
		}
		cell := sr.space.verdict()
		if r := sr.space.peakRatio(); r > 0 {
			cell = fmt.Sprintf("%.2f %s (<= %.1f)", r, cell, spaceTarget)
		}
		find(fmt.Sprintf("R size of cycle %d / cycle 1 (most space held)", spaceCycles)).cells[sr.store] = cell
	}
	for _, sr := range reports {
		if sr.large == nil {
			continue
		}
		for _, g := range sr.large.goals() {
			find(g.what).cells[sr.store] = g.shown + " " + g.verdict
		}
	}
	fmt.Fprintln(out, "\n== targets ==")
	if o.quick {
		fmt.Fprintln(out, "QUICK RUN: the figures are not meaningful")
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "target")
	for _, sr := range reports {
		fmt.Fprint(tw, "\t"+sr.store)
	}
	fmt.Fprintln(tw, "\t")
	for _, r := range rows {
		fmt.Fprint(tw, r.label)
		for _, sr := range reports {
			c := r.cells[sr.store]
			if c == "" {
				c = "-"
			}
			fmt.Fprint(tw, "\t"+c)
		}
		fmt.Fprintln(tw, "\t")
	}
	_ = tw.Flush()
	if len(budgets) > 0 {
		fmt.Fprintln(out, "machine CPU per workflow, and what PostgreSQL's backends may spend at the target share:")
		for _, b := range budgets {
			fmt.Fprintln(out, "  "+b)
		}
	}
}

// shareBudget explains a PostgreSQL / SQLite share from the machine's
// CPU: what a workflow cost the whole machine on each store (the server,
// the load generator with its worker, PostgreSQL's backends, everything
// else), and, were PostgreSQL to serve the given share of SQLite's
// workflows per second with the machine as busy as in its run, the
// machine CPU per workflow it could spend and what of it would be left
// for the backends once the rest is paid as measured. On a machine that
// the load generator, the server and the database share, the share is
// bound by that budget, not by any one statement. It returns "" when either run
// lacks the CPU figures.
func shareBudget(lite, pg *result, share float64) string {
	lu, pu := lite.cpu, pg.cpu
	if lite.completed <= 0 || pg.completed <= 0 || lu.machineTotal <= 0 || pu.machineTotal <= 0 || !pu.hasDB ||
		lu.wall <= 0 || pu.wall <= 0 {
		return ""
	}
	per := func(d time.Duration, n int64) float64 { return d.Seconds() * 1000 / float64(n) } // ms per workflow
	other := max(0, pu.machineBusy-pu.server-pu.bench-pu.db)
	busy := pu.machineBusy.Seconds() / pu.machineTotal.Seconds()
	cores := pu.machineTotal.Seconds() / pu.wall.Seconds()
	rate := share * float64(lite.completed) / lu.wall.Seconds()
	budget := busy * cores / rate * 1000
	db := per(pu.db, pg.completed)
	left := budget - per(pu.server, pg.completed) - per(pu.bench, pg.completed) - per(other, pg.completed)
	line := fmt.Sprintf("SQLite %.2f ms, PostgreSQL %.2f ms (server %.2f, backends %.2f, load generator and worker %.2f, other %.2f); ",
		per(lu.machineBusy, lite.completed), per(pu.machineBusy, pg.completed), per(pu.server, pg.completed), db,
		per(pu.bench, pg.completed), per(other, pg.completed))
	line += fmt.Sprintf("%.2f of SQLite's rate at %.0f%% busy: %.2f ms, ", share, 100*busy, budget)
	if left <= 0 {
		return line + "nothing left for the backends"
	}
	return line + fmt.Sprintf("%.2f ms for the backends (%.2f of this run's)", left, left/db)
}

// goalLabel names a target's row.
func goalLabel(g goal, o *options) string {
	switch {
	case g.workload == "W1" && g.latency:
		return "W1 @1 " + g.what
	case g.workload == "W1":
		return fmt.Sprintf("W1 @%d %s", o.inFlight, g.what)
	case g.workload == "W1b":
		return fmt.Sprintf("W1b @%d %s", w1bInFlight, g.what)
	case g.workload == "W1x":
		return fmt.Sprintf("W1x @%d (external storage on) state executions/s / W1 @%d's", o.inFlight, o.inFlight)
	case g.workload == "W6x":
		return fmt.Sprintf("W6x @%d (external storage on) %s", w6InFlight, g.what)
	case g.workload == "X":
		return "cross-node " + g.what
	}
	return g.workload + " " + g.what
}
