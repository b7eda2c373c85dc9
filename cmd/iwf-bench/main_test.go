package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"strings"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	var hundred []time.Duration
	for i := 100; i >= 1; i-- { // unsorted on purpose: summarize sorts
		hundred = append(hundred, ms(i))
	}
	d := summarize(hundred)
	if d.n != 100 || d.p50 != ms(50) || d.p95 != ms(95) || d.p99 != ms(99) || d.min != ms(1) || d.max != ms(100) {
		t.Errorf("1..100 ms: %+v", d)
	}
	for _, c := range []struct {
		vals []time.Duration
		p    float64
		want time.Duration
	}{
		{nil, 50, 0},
		{[]time.Duration{ms(7)}, 1, ms(7)},
		{[]time.Duration{ms(7)}, 100, ms(7)},
		{[]time.Duration{ms(1), ms(2)}, 50, ms(1)},   // nearest rank: ceil(0.5*2) = 1
		{[]time.Duration{ms(1), ms(2)}, 50.1, ms(2)}, // ceil(1.002) = 2
		{[]time.Duration{ms(1), ms(2), ms(3)}, 99, ms(3)},
		{[]time.Duration{-ms(3), ms(2)}, 50, -ms(3)}, // early timers are negative lateness
	} {
		if got := percentile(c.vals, c.p); got != c.want {
			t.Errorf("percentile(%v, %v) = %v, want %v", c.vals, c.p, got, c.want)
		}
	}
}

func TestParseProcStat(t *testing.T) {
	// A command name with spaces and parentheses; utime 1234, stime 56 ticks.
	line := "4242 (iwf (server) x) S 1 4242 4242 0 -1 4194560 1000 0 0 0 1234 56 0 0 20 0 12 0 100 2000000 5000 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n"
	u, s, err := parseProcStat([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	if u != 12340*time.Millisecond || s != 560*time.Millisecond {
		t.Errorf("user %v system %v, want 12.34s 0.56s", u, s)
	}
	if _, _, err := parseProcStat([]byte("4242 (short) S 1 2")); err == nil {
		t.Error("a truncated line parsed")
	}
	// This process's own file parses.
	if _, err := processCPU(0); err != nil {
		t.Errorf("processCPU(self): %v", err)
	}
}

func TestParseStatusKB(t *testing.T) {
	status := "Name:\tiwf-server\nVmPeak:\t 1900000 kB\nVmHWM:\t   45678 kB\nVmRSS:\t   40000 kB\n"
	n, err := parseStatusKB([]byte(status), "VmHWM")
	if err != nil || n != 45678*1024 {
		t.Errorf("VmHWM = %d, %v", n, err)
	}
	if _, err := parseStatusKB([]byte(status), "VmSwap"); err == nil {
		t.Error("a missing key parsed")
	}
	if n, err := peakRSS(os.Getpid()); err != nil || n <= 0 {
		t.Errorf("peakRSS(self) = %d, %v", n, err)
	}
}

func TestParseMachineCPU(t *testing.T) {
	stat := "cpu  100 5 50 800 20 3 2 10 7 0\ncpu0 50 2 25 400 10 1 1 5 3 0\n"
	m, err := parseMachineCPU([]byte(stat))
	if err != nil {
		t.Fatal(err)
	}
	// total = 100+5+50+800+20+3+2+10 = 990 ticks; busy = total - idle - iowait = 170.
	if m.total != 9900*time.Millisecond || m.busy != 1700*time.Millisecond {
		t.Errorf("got %+v", m)
	}
	if _, err := parseMachineCPU([]byte("intr 1 2 3\n")); err == nil {
		t.Error("a file without the cpu line parsed")
	}
}

func TestParseCPUModel(t *testing.T) {
	info := "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13\nprocessor\t: 1\nmodel name\t: AMD EPYC 7B13\n"
	if got := parseCPUModel([]byte(info)); got != "AMD EPYC 7B13" {
		t.Errorf("got %q", got)
	}
	if got := parseCPUModel(nil); got != "unknown" {
		t.Errorf("empty: got %q", got)
	}
}

func TestParseMetrics(t *testing.T) {
	text := `# HELP iwf_store_update_seconds Latency of store write transactions.
# TYPE iwf_store_update_seconds histogram
iwf_store_update_seconds_bucket{le="0.001"} 3
iwf_store_update_seconds_bucket{le="+Inf"} 10
iwf_store_update_seconds_sum 0.25
iwf_store_update_seconds_count 10
iwf_worker_call_seconds_count{api="waitUntil"} 4
iwf_worker_call_seconds_count{api="execute"} 6
iwf_tasks_in_memory 7
`
	m := parseMetrics([]byte(text))
	want := map[string]float64{
		"iwf_store_update_seconds_sum": 0.25, "iwf_store_update_seconds_count": 10,
		"iwf_worker_call_seconds_count": 10, "iwf_tasks_in_memory": 7,
	}
	if len(m) != len(want) {
		t.Errorf("got %v, want %v", m, want)
	}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("%s = %v, want %v", k, m[k], v)
		}
	}
}

func TestParseOptions(t *testing.T) {
	o, err := parseOptions([]string{"-store", "sqlite", "-workloads", "w1,W3", "-n", "W3=123,W1=50"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(o.stores) != 1 || o.stores[0] != storeSQLite || !o.workloads["W1"] || o.workloads["W2"] || !o.workloads["W3"] {
		t.Errorf("stores %v workloads %v", o.stores, o.workloads)
	}
	if o.counts["W3"] != 123 || o.counts["W1"] != 50 || o.counts["W2"] != 0 {
		t.Errorf("counts %v", o.counts)
	}
	if o.warmup != 2*time.Second || o.timer != 5*time.Second {
		t.Errorf("warmup %v timer %v", o.warmup, o.timer)
	}
	if o.counts["W4"] != 100_000 || o.counts["X"] != 200 || o.timerW4 != time.Minute {
		t.Errorf("W4/X defaults: counts %v timer %v", o.counts, o.timerW4)
	}
	o, err = parseOptions([]string{"-workloads", "W4,x", "-n", "W4=500,X=7", "-timer-w4", "3s"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !o.workloads["W4"] || !o.workloads["X"] || o.workloads["W1"] || o.counts["W4"] != 500 || o.counts["X"] != 7 || o.timerW4 != 3*time.Second {
		t.Errorf("workloads %v counts %v timer %v", o.workloads, o.counts, o.timerW4)
	}
	// W1b is spelled in any case, is in the default list and has its own count.
	o, err = parseOptions([]string{"-workloads", "w1B", "-n", "w1b=900"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !o.workloads["W1b"] || len(o.workloads) != 1 || o.counts["W1b"] != 900 {
		t.Errorf("W1b: workloads %v counts %v", o.workloads, o.counts)
	}
	if o, err = parseOptions(nil, io.Discard); err != nil || !o.workloads["W1b"] || o.counts["W1b"] != w1bCount {
		t.Errorf("defaults: %v; workloads %v counts %v", err, o.workloads, o.counts)
	}
	// R is not in the default list; its count and the autovacuum wait.
	if o, err = parseOptions(nil, io.Discard); err != nil || o.workloads["R"] || o.counts["R"] != 200_000 || o.vacuumWait != 2*time.Minute {
		t.Errorf("defaults: %v, workloads %v, R=%d, vacuum wait %v", err, o.workloads, o.counts["R"], o.vacuumWait)
	}
	o, err = parseOptions([]string{"-workloads", "r", "-n", "R=5000", "-vacuum-wait", "30s"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !o.workloads["R"] || len(o.workloads) != 1 || o.counts["R"] != 5000 || o.vacuumWait != 30*time.Second {
		t.Errorf("R: workloads %v counts %v vacuum wait %v", o.workloads, o.counts, o.vacuumWait)
	}
	// W5 is not in the default list either; its count.
	if o, err = parseOptions(nil, io.Discard); err != nil || o.workloads["W5"] || o.counts["W5"] != 1_000_000 {
		t.Errorf("defaults: %v, workloads %v, W5=%d", err, o.workloads, o.counts["W5"])
	}
	if o, err = parseOptions([]string{"-workloads", "w5", "-n", "W5=1234"}, io.Discard); err != nil || !o.workloads["W5"] || len(o.workloads) != 1 || o.counts["W5"] != 1234 {
		t.Errorf("W5: %v, workloads %v, W5=%d", err, o.workloads, o.counts["W5"])
	}
	if o, err = parseOptions([]string{"-quick", "-workloads", "W5"}, io.Discard); err != nil || o.counts["W5"] != 2000 {
		t.Errorf("-quick W5: %v, W5=%d", err, o.counts["W5"])
	}
	// W1x and W6 are in the default list; W6 runs W6x too, W6x alone
	// only itself; W1=N and W6=N count for W1x and W6x.
	if o, err = parseOptions(nil, io.Discard); err != nil || !o.workloads["W1x"] || !o.workloads["W6"] || !o.workloads["W6x"] {
		t.Errorf("defaults: %v, workloads %v", err, o.workloads)
	}
	if o, err = parseOptions([]string{"-workloads", "w1X,w6x", "-n", "W6=40"}, io.Discard); err != nil ||
		!o.workloads["W1x"] || !o.workloads["W6x"] || o.workloads["W6"] || o.workloads["W1"] || o.counts["W6"] != 40 {
		t.Errorf("W1x,W6x: %v, workloads %v counts %v", err, o.workloads, o.counts)
	}
	// The breakdown of W1 @1 runs unless turned off.
	if o, err = parseOptions(nil, io.Discard); err != nil || !o.breakdown {
		t.Errorf("defaults: %v, breakdown %v", err, o.breakdown)
	}
	if o, err = parseOptions([]string{"-breakdown=false"}, io.Discard); err != nil || o.breakdown {
		t.Errorf("-breakdown=false: %v, breakdown %v", err, o.breakdown)
	}
	if baseWorkload("W6x") != "W6" || baseWorkload("W1x") != "W1" || baseWorkload("W2") != "W2" {
		t.Error("baseWorkload")
	}
	for _, bad := range [][]string{{"-store", "mysql"}, {"-workloads", "W9"}, {"-n", "W3=0"}, {"-n", "Y=3"}, {"-timer", "300ms"}, {"-timer-w4", "0s"}, {"-n", "R=-1"}, {"-vacuum-wait", "-1s"}} {
		if _, err := parseOptions(bad, io.Discard); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
}

func TestSpaceRatio(t *testing.T) {
	cycle := func(fill, expired int64) spaceCycle {
		return spaceCycle{afterFill: storeSize{total: fill}, afterX: storeSize{total: expired}}
	}
	s := &spaceResult{cycles: []spaceCycle{cycle(100, 90), cycle(105, 95)}}
	if f, x := s.ratio(); f != 0 || x != 0 || s.peakRatio() != 0 || s.verdict() != "not measured" {
		t.Errorf("two cycles: %v %v %s", f, x, s.verdict())
	}
	s.cycles = append(s.cycles, cycle(110, 99))
	if f, x := s.ratio(); f != 1.1 || x != 1.1 || s.peakRatio() != 1.1 || s.verdict() != "PASS" {
		t.Errorf("1.1 / 1.1: %v %v %v %s", f, x, s.peakRatio(), s.verdict())
	}
	// PostgreSQL's vacuum gave more back after the first expiry than after
	// the third: the expiry ratio grows, the space each cycle needed does not.
	s.cycles = []spaceCycle{cycle(200, 90), cycle(205, 140), cycle(210, 140)}
	if _, x := s.ratio(); x <= spaceTarget || s.peakRatio() != 1.05 || s.verdict() != "PASS" {
		t.Errorf("expiry ratio %v, peak ratio %v %s, want PASS on 1.05", x, s.peakRatio(), s.verdict())
	}
	s.cycles[2] = cycle(230, 100) // the third fill took more
	if s.verdict() != "MISS" {
		t.Errorf("peak ratio %v %s, want MISS", s.peakRatio(), s.verdict())
	}
	s.cycles[2] = cycle(200, 240) // a WAL that grew after the fill counts too
	if s.peakRatio() != 1.2 || s.verdict() != "MISS" {
		t.Errorf("peak ratio %v %s, want MISS on 1.2", s.peakRatio(), s.verdict())
	}
}

func TestFormat(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -2500: "-2,500"} {
		if got := fmtInt(n); got != want {
			t.Errorf("fmtInt(%d) = %q, want %q", n, got, want)
		}
	}
	for d, want := range map[time.Duration]string{840 * time.Microsecond: "0.84 ms", 12345 * time.Microsecond: "12.3 ms", 1204 * time.Millisecond: "1204 ms"} {
		if got := fmtDur(d); got != want {
			t.Errorf("fmtDur(%v) = %q, want %q", d, got, want)
		}
	}
}

// TestQuickSQLite runs `iwf-bench -quick -store sqlite` end to end: it
// builds and starts the real server, runs all workloads and checks that the
// report has every run and no errors.
func TestQuickSQLite(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server (about 15 s)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute) // a failure deadline: builds and runs are slow on a loaded machine
	defer cancel()
	var out, progress bytes.Buffer
	if err := run(ctx, []string{"-quick", "-store", "sqlite"}, &out, &progress); err != nil {
		t.Fatalf("run: %v\n%s\n%s", err, progress.String(), out.String())
	}
	report := out.String()
	t.Log("\n" + report)
	for _, want := range []string{"== SQLite", "W1 @1", "W1 @64", "W1x @64", "W1b @50", "W2 @64", "W3 timers", "W4 timers", "W6 @16", "W6x @16",
		"targets:", "== targets ==", "W4 p99 timer lateness", "breakdown of W1 @1 on SQLite: ", "close commit -> getWithWait returned", "W1x @64 (external storage on) state executions/s / W1 @64's",
		"W6x @16 (external storage on) database bytes per workflow", "external storage on / off: W1x @64 / W1 @64"} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	for _, bad := range []string{"FAILED", "ERRORS", "NOT COMPLETED", "NOT RUN"} {
		if strings.Contains(report, bad) {
			t.Errorf("report contains %q", bad)
		}
	}
	if got := strings.Count(report, "verified COMPLETED"); got != 9 {
		t.Errorf("%d runs verified their workflows, want 9", got)
	}
	// W6 keeps its attributes in the database, W6x in the file:// store.
	if !strings.Contains(report, "external storage on (local=file://<dir>): ") || strings.Contains(report, "database size not measured") {
		t.Error("report lacks the external store's figures or the database's size")
	}
}

// TestQuickPostgresCrossNode runs the two-node workload X with -quick on
// PostgreSQL when IWF_TEST_POSTGRES_URL names one: two real servers on one
// database, a signal through the second, completion seen on the first.
func TestQuickPostgresCrossNode(t *testing.T) {
	if testing.Short() || os.Getenv("IWF_TEST_POSTGRES_URL") == "" {
		t.Skip("needs IWF_TEST_POSTGRES_URL; builds and runs two servers")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var out, progress bytes.Buffer
	if err := run(ctx, []string{"-quick", "-store", "postgres", "-workloads", "X"}, &out, &progress); err != nil {
		t.Fatalf("run: %v\n%s\n%s", err, progress.String(), out.String())
	}
	report := out.String()
	t.Log("\n" + report)
	for _, want := range []string{"== PostgreSQL", "X cross-node", "cross-node p50 signal on node B", "verified COMPLETED"} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	for _, bad := range []string{"FAILED", "ERRORS", "NOT COMPLETED", "SKIPPED"} {
		if strings.Contains(report, bad) {
			t.Errorf("report contains %q", bad)
		}
	}
}

// TestQuickSpaceSQLite runs workload R with -quick on SQLite: three cycles
// of a fill, a restart with a retention of 1 ms and the sweeps deleting
// every run, with the sizes reported (a quick run's ratio means nothing:
// the WAL outweighs 300 workflows).
func TestQuickSpaceSQLite(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var out, progress bytes.Buffer
	if err := run(ctx, []string{"-quick", "-store", "sqlite", "-workloads", "R"}, &out, &progress); err != nil {
		t.Fatalf("run: %v\n%s\n%s", err, progress.String(), out.String())
	}
	report := out.String()
	t.Log("\n" + report)
	if got := strings.Count(progress.String(), " deleted in "); got != spaceCycles {
		t.Errorf("%d cycles expired every run, want %d:\n%s", got, spaceCycles, progress.String())
	}
	for _, want := range []string{"R: space after retention", "size after cycle 3 / after cycle 1", "R size of cycle 3 / cycle 1"} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if strings.Contains(report, "FAILED") {
		t.Error("report contains FAILED")
	}
}

// TestWorstWindow checks that the window of due times with the highest p99
// lateness is found, and which timers count in it.
func TestWorstWindow(t *testing.T) {
	origin := epoch.Add(time.Hour)
	var fl []*flight
	var late []time.Duration
	add := func(dueAfter, lateness time.Duration) {
		f := newFlight()
		f.setDue(origin.Add(dueAfter))
		fl = append(fl, f)
		late = append(late, lateness)
	}
	for i := 0; i < 10; i++ {
		add(time.Duration(i)*time.Second, 5*time.Millisecond) // window 0
		add(15*time.Second, 40*time.Millisecond)              // window 1
		add(25*time.Second, 2*time.Second)                    // window 2: the stall
		add(35*time.Second, 10*time.Millisecond)              // window 3
	}
	fl = append(fl, newFlight()) // no due time recorded: not counted
	late = append(late, time.Hour)
	w := worstWindow(fl, late, origin, 10*time.Second)
	if w.from != 20*time.Second || w.to != 30*time.Second || w.d.n != 10 || w.d.p99 != 2*time.Second {
		t.Fatalf("worst window = +%s..+%s, %d timers, p99 %s; want +20s..+30s, 10 timers, p99 2s", w.from, w.to, w.d.n, w.d.p99)
	}
}

// TestShareBudget checks the arithmetic that explains PostgreSQL's share
// of SQLite's rate, with the figures of a measured W1 @64 pair.
func TestShareBudget(t *testing.T) {
	s := func(ms int) time.Duration { return time.Duration(ms) * time.Millisecond }
	lite := &result{completed: 17170, cpu: cpuUse{wall: s(10000), machineTotal: s(20000), machineBusy: s(16400),
		server: s(12200), bench: s(4100)}}
	pg := &result{completed: 9200, cpu: cpuUse{wall: s(10000), machineTotal: s(20000), machineBusy: s(18600),
		server: s(6440), bench: s(2200), db: s(8370), hasDB: true}}
	// 0.8 × 1,717 wf/s at 93 % of 2 cores: 1.354 ms a workflow, less
	// server 0.700, generator 0.239 and other 0.173: 0.242 ms, 0.27 of 0.91.
	want := "SQLite 0.96 ms, PostgreSQL 2.02 ms (server 0.70, backends 0.91, load generator and worker 0.24, other 0.17); " +
		"0.80 of SQLite's rate at 93% busy: 1.35 ms, 0.24 ms for the backends (0.27 of this run's)"
	if got := shareBudget(lite, pg, 0.8); got != want {
		t.Errorf("shareBudget:\n got %s\nwant %s", got, want)
	}
	// At the same rate as SQLite the rest alone costs more than the budget.
	if got := shareBudget(lite, pg, 1.6); !strings.HasSuffix(got, "nothing left for the backends") {
		t.Errorf("shareBudget at 1.6: %s", got)
	}
	pg.cpu.hasDB = false
	if got := shareBudget(lite, pg, 0.8); got != "" {
		t.Errorf("shareBudget without the backends' CPU = %q, want \"\"", got)
	}
}
