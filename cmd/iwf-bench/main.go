// Command iwf-bench is the load generator of iwf-server (`make bench`).
//
// It builds cmd/iwf-server from this checkout, starts it as a child process
// (a fresh process and a fresh database for every run: first SQLite in a
// temporary directory, then PostgreSQL in a throw-away database), serves
// the iWF worker API itself from an in-process net/http server, drives the
// workloads through the server's REST API and prints, per store and run,
// throughput, latency percentiles, server CPU per 1,000 workflows and peak
// RSS, with the targets and PASS/MISS next to them.
//
// The workloads:
//
//	W1  S1 -> S2 -> graceful completion, both states skip waitUntil;
//	    once with 1 workflow in flight (latency), once with -inflight (throughput).
//	W1x W1 @-inflight with external storage on (a file:// store, the default
//	    threshold: W1's payloads stay inline); against W1 @-inflight.
//	W1b W1's workflows in another shape: -n W1b=N workflows (default 4,000)
//	    after a warm-up of 200, 50 in flight, each started with /start and
//	    awaited with /getWithWait before the next starts.
//	W2  S1 waits (waitUntil) for a signal the generator sends right after
//	    the start, then completes; -inflight in flight.
//	W3  -n W3=N workflows (default 10,000) all sleep on a durable timer of
//	    -timer (5 s) at once; timer lateness and server peak RSS.
//	W4  -n W4=N workflows (default 100,000) sleep on a timer of -timer-w4
//	    (60 s); server peak RSS and timer lateness.
//	W6  S1 -> S2 -> graceful completion, each state's execute upserting a
//	    1 MiB data attribute, 16 in flight: with external storage off (W6)
//	    and on (W6x); states/s, latency and database bytes per workflow.
//	X   PostgreSQL only: two server processes on one database; a W2
//	    workflow started on node A is signalled through node B; signal ->
//	    completion seen by getWithWait on node A (-n X=N samples, default 200).
//	R   not in the default list: space after retention. Three cycles on one
//	    database of: fill with -n R=N W1 workflows (default 200,000), restart
//	    with a retention of 1 ms for W1's type, wait until every run is
//	    deleted (and, on PostgreSQL, up to -vacuum-wait for autovacuum);
//	    the store's size after each fill and expiry, and size after cycle 3
//	    / after cycle 1 against <= 1.1.
//	W5  not in the default list: a large store. W1 @1 and W1 @64 on an
//	    empty database; then -n W5=N (default 1,000,000) closed two-state
//	    workflows with search attributes preloaded (cloned in the database
//	    from a run the server made), and on that store W1 @1, W1 @64, a
//	    selective search, the console's list and run pages, and a
//	    retention sweep of the N runs while W1 @64 runs.
//
// With W1, unless -breakdown=false, W1 @1 is also cut into the legs of its
// critical path (start -> commit -> worker call -> answer -> commit ... ->
// getWithWait returned) on a traced server of its own (breakdown.go).
//
// How each figure is measured is printed with the results and described in
// docs/benchmarks.md. The tool reads /proc and so runs on Linux only.
//
// This package owns the benchmark and nothing else; it talks to the server
// only over HTTP (api/iwfapi) and to PostgreSQL only to create and drop its
// databases.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The store names used in flags and reports.
const (
	storeSQLite   = "SQLite"
	storePostgres = "PostgreSQL"
)

// options are the command-line settings.
type options struct {
	stores     []string        // storeSQLite, storePostgres, in this order
	workloads  map[string]bool // W1, W2, W3
	duration   time.Duration   // measured window of a closed-loop run
	warmup     time.Duration   // before the window
	counts     map[string]int  // W1, W2: measured workflows instead of a window; W3: sleepers
	inFlight   int             // concurrency of the throughput runs
	timer      time.Duration   // W3's timer
	timerW4    time.Duration   // W4's timer
	quick      bool
	pprofDir   string
	serverArgs []string
	pgURL      string
	keep       bool
	serverBin  string        // prebuilt server binary instead of building one
	vacuumWait time.Duration // R on PostgreSQL: how long to wait for autovacuum
	breakdown  bool          // with W1: the breakdown of W1 @1 on a traced server
	// peer, when set, runs the comparison with an embedded library
	// instead (peer.go): rounds rounds, peerbench from peerBin or built.
	peer    string
	peerBin string
	rounds  int
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "iwf-bench:", err)
		os.Exit(1)
	}
}

// parseOptions reads the flags.
func parseOptions(args []string, stderr io.Writer) (*options, error) {
	fs := flag.NewFlagSet("iwf-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	store := fs.String("store", "both", "store to measure: sqlite, postgres or both")
	workloads := fs.String("workloads", "W1,W1x,W1b,W2,W3,W4,W6,X", "comma-separated workloads to run (W1x: W1 with external storage on; W6: 1 MiB data attributes with external storage off and on, W6x: on only; X: cross-node signal, PostgreSQL only; R: space after retention, and W5: a large store, are not in the default list)")
	duration := fs.Duration("duration", 10*time.Second, "measured window of each closed-loop run (after a warm-up of a fifth of it, at most 2s)")
	counts := fs.String("n", "", "counts: W3=N / W4=N sleeping workflows (default 10000 / 100000); X=N cross-node samples (default 200); R=N workflows per fill (default 200000); W1b=N measured W1b workflows (default 4000); W5=N preloaded runs (default 1000000); W1=N (also W1x), W2=N or W6=N (also W6x) measure N workflows per run instead of -duration; a bare N sets them all")
	vacuumWait := fs.Duration("vacuum-wait", 2*time.Minute, "R on PostgreSQL: how long each expiry waits for autovacuum to clear the dead rows before the size is taken")
	inFlight := fs.Int("inflight", 64, "workflows in flight in the throughput runs (W1, W2), and concurrent start calls in W3")
	timer := fs.Duration("timer", 5*time.Second, "W3's durable timer (whole seconds)")
	timerW4 := fs.Duration("timer-w4", 60*time.Second, "W4's durable timer (whole seconds)")
	quick := fs.Bool("quick", false, "smoke run to check the tool: 1s windows, 200 W3 and 300 W4 sleepers on 1s and 2s timers, 20 cross-node samples, 300 R workflows per fill, 2000 W5 runs")
	pprofDir := fs.String("pprof", "", "build the server with net/http/pprof (via go build -overlay, sources untouched) and save a CPU profile and a goroutine dump of every closed-loop run's window into this `dir`")
	var serverArgs multiFlag
	fs.Var(&serverArgs, "server-arg", "extra `flag` for iwf-server, e.g. -server-arg=--log-level=warn (repeatable)")
	serverBin := fs.String("server-bin", "", "use this prebuilt iwf-server `binary` instead of building cmd/iwf-server (not with -pprof)")
	breakdown := fs.Bool("breakdown", true, "with W1: after the store's runs, break W1 @1 down into the legs of its critical path (200 workflows one at a time on a server of their own with tracing on); -breakdown=false skips it")
	peer := fs.String("peer", "", "compare with an embedded library instead: \"dbos\" runs W1 @1 and W1b on this server and the same shape on DBOS Transact (../shared/peerbench), interleaved per store, -rounds times, and prints the ratios against the targets")
	peerBin := fs.String("peer-bin", "", "with -peer: a built peerbench `binary` (default: build ../shared/peerbench)")
	rounds := fs.Int("rounds", 3, "with -peer: rounds of the comparison")
	keep := fs.Bool("keep", false, "keep the temporary directory (server logs, SQLite files) and the PostgreSQL databases (iwf_bench_*)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: go run ./cmd/iwf-bench [flags]   (or: make bench)\n\n"+
			"Builds and starts cmd/iwf-server, drives workloads W1-W3 against it on SQLite and PostgreSQL\n"+
			"(IWF_TEST_POSTGRES_URL, default %s) and prints the figures.\n\nFlags:\n", defaultPostgresURL)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	o := &options{
		duration: *duration, inFlight: *inFlight, timer: *timer, timerW4: *timerW4, quick: *quick,
		pprofDir: *pprofDir, serverArgs: serverArgs, keep: *keep, serverBin: *serverBin, vacuumWait: *vacuumWait, breakdown: *breakdown,
		peer: strings.ToLower(*peer), peerBin: *peerBin, rounds: *rounds,
		workloads: map[string]bool{}, counts: map[string]int{"W1b": w1bCount, "W3": 10_000, "W4": 100_000, "X": 200, "R": defaultSpaceN, "W5": defaultLargeN},
	}
	switch strings.ToLower(*store) {
	case "sqlite":
		o.stores = []string{storeSQLite}
	case "postgres", "postgresql", "pg":
		o.stores = []string{storePostgres}
	case "both":
		o.stores = []string{storeSQLite, storePostgres}
	default:
		return nil, fmt.Errorf("-store %q: want sqlite, postgres or both", *store)
	}
	for _, w := range strings.Split(*workloads, ",") {
		w = canonicalWorkload(w)
		switch w {
		case "W1", "W1x", "W1b", "W2", "W3", "W4", "W6x", "X", "R", "W5":
			o.workloads[w] = true
		case "W6":
			o.workloads["W6"], o.workloads["W6x"] = true, true
		case "":
		default:
			return nil, fmt.Errorf("-workloads: unknown workload %q (want W1, W1x, W1b, W2, W3, W4, W6, W6x, X, R, W5)", w)
		}
	}
	if o.peer != "" {
		if o.peer != peerDBOS {
			return nil, fmt.Errorf("-peer %q: want %s (the comparison's targets are DBOS Transact's)", *peer, peerDBOS)
		}
		if set["workloads"] || set["inflight"] || set["breakdown"] || set["pprof"] {
			return nil, errPeerFlags
		}
		if o.rounds < 1 {
			return nil, errors.New("-rounds must be at least 1")
		}
		o.workloads = map[string]bool{"W1": true, "W1b": true}
		o.inFlight, o.breakdown = 1, false
		o.counts["W1"] = peerLatN // -n, read below, may set another count
	} else if set["peer-bin"] || set["rounds"] {
		return nil, errors.New("-peer-bin and -rounds go with -peer")
	}
	if o.serverBin != "" && o.pprofDir != "" {
		return nil, errors.New("-pprof builds its own server binary; it cannot be combined with -server-bin")
	}
	if len(o.workloads) == 0 {
		return nil, errors.New("-workloads: nothing to run")
	}
	if o.quick {
		o.duration = time.Second
		o.timer = time.Second
		o.timerW4 = 2 * time.Second
		o.counts["W3"] = 200
		o.counts["W4"] = 300
		o.counts["X"] = 20
		o.counts["R"] = 300
		o.counts["W5"] = 2000
		o.counts["W1b"] = 300
		o.vacuumWait = 5 * time.Second
	}
	if err := parseCounts(*counts, o.counts); err != nil {
		return nil, err
	}
	if o.duration <= 0 || o.inFlight <= 0 || o.vacuumWait < 0 {
		return nil, errors.New("-duration and -inflight must be positive, -vacuum-wait not negative")
	}
	o.timer = o.timer.Round(time.Second)
	o.timerW4 = o.timerW4.Round(time.Second)
	if o.timer < time.Second || o.timerW4 < time.Second {
		return nil, errors.New("-timer and -timer-w4 must be at least 1s")
	}
	o.warmup = min(o.duration/5, 2*time.Second)
	if o.quick {
		o.warmup = 200 * time.Millisecond
	}
	o.pgURL = os.Getenv("IWF_TEST_POSTGRES_URL")
	if o.pgURL == "" {
		o.pgURL = defaultPostgresURL
	}
	return o, nil
}

// parseCounts reads -n: "W3=20000,W1=5000" or a bare number for all.
func parseCounts(s string, into map[string]int) error {
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		k, v, ok := strings.Cut(part, "=")
		if !ok {
			k, v = "", part
		}
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n <= 0 {
			return fmt.Errorf("-n %q: want a positive count", part)
		}
		switch k = canonicalWorkload(k); k {
		case "":
			into["W1"], into["W1b"], into["W2"], into["W3"], into["W4"], into["X"], into["R"], into["W5"], into["W6"] = n, n, n, n, n, n, n, n, n
		case "W1", "W1b", "W2", "W3", "W4", "X", "R", "W5", "W6":
			into[k] = n
		default:
			return fmt.Errorf("-n %q: unknown workload %q", part, k)
		}
	}
	return nil
}

// canonicalWorkload spells a workload name as the tool does: upper case,
// but W1b, W1x and W6x with a small letter.
func canonicalWorkload(w string) string {
	w = strings.ToUpper(strings.TrimSpace(w))
	switch w {
	case "W1B", "W1X", "W6X":
		return w[:2] + strings.ToLower(w[2:])
	}
	return w
}

// W1b's shape: measured workflows, warm-up workflows, workflows in flight.
const (
	w1bCount    = 4000
	w1bWarmup   = 200
	w1bInFlight = 50
)

// multiFlag is a repeatable string flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, " ") }
func (m *multiFlag) Set(s string) error { *m = append(*m, s); return nil }

// run is the whole benchmark; stdout receives the report, stderr progress.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseOptions(args, stderr)
	if err != nil {
		return err
	}
	if runtime.GOOS != "linux" {
		return errors.New("iwf-bench reads /proc and runs on Linux only")
	}
	progress := func(format string, a ...any) { fmt.Fprintf(stderr, "iwf-bench: "+format+"\n", a...) }

	root, err := moduleRoot(ctx)
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "iwf-bench-")
	if err != nil {
		return err
	}
	if o.keep {
		progress("keeping %s", tmp)
	} else {
		defer os.RemoveAll(tmp)
	}
	if o.pprofDir != "" {
		if err := os.MkdirAll(o.pprofDir, 0o755); err != nil {
			return err
		}
	}
	began := time.Now()
	bin := o.serverBin
	if bin == "" {
		progress("building cmd/iwf-server ...")
		if bin, err = buildServer(ctx, root, tmp, o.pprofDir != ""); err != nil {
			return err
		}
		progress("built in %.1fs", time.Since(began).Seconds())
	}

	w, err := startWorker(o.timer, o.timerW4)
	if err != nil {
		return err
	}
	defer w.close()

	printHeader(stdout, o)
	if o.peer != "" {
		if err := runPeer(ctx, o, root, tmp, bin, w, stdout, progress); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "\ntotal time %.0f s\n", time.Since(began).Seconds())
		return nil
	}
	var reports []*storeReport
	for _, store := range o.stores {
		sr := runStore(ctx, o, store, bin, tmp, w, progress)
		if err := ctx.Err(); err != nil {
			return err
		}
		printReport(stdout, sr, o)
		reports = append(reports, sr)
	}
	printTargets(stdout, reports, o)
	fmt.Fprintf(stdout, "\ntotal time %.0f s\n", time.Since(began).Seconds())
	return nil
}

// printHeader describes the machine and the method.
func printHeader(out io.Writer, o *options) {
	cpuinfo, _ := os.ReadFile("/proc/cpuinfo")
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	fmt.Fprintf(out, "iwf-bench %s\n", time.Now().UTC().Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(out, "machine:  %d CPUs (nproc), %s, Linux %s, %s; generator, worker, server and database share it, loopback only\n",
		runtime.NumCPU(), parseCPUModel(cpuinfo), strings.TrimSpace(string(kernel)), runtime.Version())
	extra := ""
	if len(o.serverArgs) > 0 {
		extra = " " + strings.Join(o.serverArgs, " ")
	}
	built := "cmd/iwf-server built from this checkout (CGO_ENABLED=0)"
	if o.serverBin != "" {
		built = o.serverBin
	}
	fmt.Fprintf(out, "server:   %s, default settings + --addr 127.0.0.1:0 --db <fresh> --log-format json (log to a file)%s\n", built, extra)
	if len(o.workloads) == 1 && o.workloads["R"] {
		// R describes its method with its figures.
		if o.quick {
			fmt.Fprintf(out, "QUICK RUN: small counts, to check that the tool works; the figures are not meaningful.\n")
		}
		return
	}
	fmt.Fprintf(out, "method:   fresh server process and fresh database per run. Closed loop: each of the in-flight generator goroutines starts\n")
	fmt.Fprintf(out, "          a workflow, waits for it to complete, starts the next. Window %s after a %s warm-up; wf/s counts workflows\n", o.duration, o.warmup)
	fmt.Fprintf(out, "          completed in the window; latency covers workflows started in it: start call issued -> the worker receives the\n")
	fmt.Fprintf(out, "          final execute call (worker timestamp, no polling; excludes the commit of that last answer). The @1 run also waits\n")
	fmt.Fprintf(out, "          with getWithWait before the next start and reports that latency too (it gates the @1 target).\n")
	if o.breakdown && o.workloads["W1"] {
		fmt.Fprintf(out, "          breakdown of W1 @1 (after the store's runs, on a server of its own with tracing on, so a little slower): each workflow's\n")
		fmt.Fprintf(out, "          start -> getWithWait returned cut into contiguous legs at the client's and worker's timestamps and at the commits\n")
		fmt.Fprintf(out, "          (the ends of the server's store.update spans); parts split a leg at the server's request, phase and worker-call spans.\n")
	}
	if o.workloads["W1b"] {
		fmt.Fprintf(out, "          W1b: W1's workflows, %d in flight, each awaited with getWithWait before the next starts; the window opens after\n", w1bInFlight)
		fmt.Fprintf(out, "          %d completed warm-up workflows and closes when %s measured ones completed.\n", w1bWarmup, fmtInt(int64(o.counts["W1b"])))
	}
	if o.workloads["W1x"] || o.workloads["W6"] || o.workloads["W6x"] {
		fmt.Fprintf(out, "          W1x, W6x: the server runs with --external-storage-url %s=file://<run's directory> at the default threshold (64 KiB);\n", extStoreID)
		fmt.Fprintf(out, "          W1x is W1 @%d (its payloads stay under the threshold), against W1 @%d. W6: S1 -> S2 -> completion, each state's\n", o.inFlight, o.inFlight)
		fmt.Fprintf(out, "          execute answer upserts a 1 MiB data attribute (random characters, a JSON string), %d in flight; W6 with external\n", w6InFlight)
		fmt.Fprintf(out, "          storage off, W6x on. db/wf = the database's growth from after a first batch of workflows (one per slot in flight)\n")
		fmt.Fprintf(out, "          to the run's end (SQLite page_count x page_size; PostgreSQL pg_total_relation_size summed over its tables) /\n")
		fmt.Fprintf(out, "          the workflows completed in between, warm-up included.\n")
	}
	fmt.Fprintf(out, "          srv CPU = utime+stime of the server from /proc/<pid>/stat over the window; peak RSS = VmHWM of the server.\n")
	fmt.Fprintf(out, "          CPU busy = share of all %d cores (/proc/stat): server + generator/worker (this process) + db (the PostgreSQL backends\n", runtime.NumCPU())
	fmt.Fprintf(out, "          of the run's database, /proc/<pid>/stat) + other (other processes, kernel). srv (+db) CPU is per 1,000 completed workflows.\n")
	if o.pprofDir != "" {
		fmt.Fprintf(out, "          PROFILING ON: the server serves net/http/pprof and is profiled during each window (slightly slower).\n")
	}
	if o.quick {
		fmt.Fprintf(out, "QUICK RUN: small counts and short windows, to check that the tool works; the figures are not meaningful.\n")
	}
}

// runStore runs the selected workloads on one store.
func runStore(ctx context.Context, o *options, store, bin, tmp string, w *worker, progress func(string, ...any)) *storeReport {
	sr := &storeReport{store: store}
	var pg *pgAdmin
	if store == storeSQLite {
		sr.where = "a WAL file in " + tmp
	} else {
		var err error
		pg, err = connectPostgres(ctx, o.pgURL)
		if err != nil {
			sr.where = redactURL(o.pgURL)
			sr.skipped = fmt.Sprintf("PostgreSQL at %s is unreachable (%v); set IWF_TEST_POSTGRES_URL to measure it", redactURL(o.pgURL), err)
			progress("%s", sr.skipped)
			return sr
		}
		defer pg.close(context.Background())
		sr.where = fmt.Sprintf("PostgreSQL %s at %s, a fresh database per run", pg.version, pg.host())
	}

	type runDef struct {
		workload string
		inFlight int
		withWait bool
	}
	var runs []runDef
	if o.workloads["W1"] {
		runs = append(runs, runDef{"W1", 1, true})
	}
	if (o.workloads["W1"] || o.workloads["W1x"]) && o.inFlight > 1 {
		// W1x's reference, W1 @-inflight, runs with W1x even when W1 is
		// not named, right before it.
		runs = append(runs, runDef{"W1", o.inFlight, false})
	}
	if o.workloads["W1x"] && o.inFlight > 1 {
		runs = append(runs, runDef{"W1x", o.inFlight, false})
	}
	if o.workloads["W1b"] {
		runs = append(runs, runDef{"W1b", w1bInFlight, true})
	}
	if o.workloads["W2"] {
		runs = append(runs, runDef{"W2", o.inFlight, false})
	}
	if o.workloads["W3"] {
		runs = append(runs, runDef{"W3", o.counts["W3"], false})
	}
	if o.workloads["W4"] {
		runs = append(runs, runDef{"W4", o.counts["W4"], false})
	}
	if o.workloads["W6"] {
		runs = append(runs, runDef{"W6", w6InFlight, false})
	}
	if o.workloads["W6x"] {
		runs = append(runs, runDef{"W6x", w6InFlight, false})
	}
	if o.workloads["X"] && pg != nil {
		runs = append(runs, runDef{"X", o.counts["X"], false})
	}
	tag := strconv.FormatInt(time.Now().UnixNano()%1e10, 36)
	for i, rd := range runs {
		if ctx.Err() != nil {
			break
		}
		label := fmt.Sprintf("%s %s @%d", store, rd.workload, rd.inFlight)
		switch rd.workload {
		case "W3", "W4":
			label = fmt.Sprintf("%s %s (%s sleepers)", store, rd.workload, fmtInt(int64(rd.inFlight)))
		case "X":
			label = fmt.Sprintf("%s cross-node signal (%s samples)", store, fmtInt(int64(rd.inFlight)))
		}
		progress("running %s ...", label)
		name := fmt.Sprintf("iwf_bench_%s_%d_%s", tag, i+1, strings.ToLower(rd.workload))
		var db string
		if pg == nil {
			db = "sqlite://" + filepath.Join(tmp, name+".db")
		} else {
			var err error
			if db, err = pg.createDatabase(ctx, name); err != nil {
				sr.failed = append(sr.failed, label+": "+err.Error())
				continue
			}
			if err := pg.checkpoint(ctx); err != nil {
				progress("CHECKPOINT before %s failed (%v): the run may pay for the previous one's writes", label, err)
			}
		}
		var dbPIDs func() []int
		if pg != nil {
			dbPIDs = func() []int { return pg.backendPIDs(ctx, name) }
		}
		r, err := runOne(ctx, o, bin, db, filepath.Join(tmp, name+".log"), w, rd.workload, rd.inFlight, rd.withWait, store, name, dbPIDs)
		if pg != nil {
			// The counters are optional: a failed read leaves them unknown.
			if r != nil {
				if c, rb, cerr := pg.commits(ctx, name); cerr == nil {
					r.pgCommits, r.pgRollbacks = c, rb
				}
			}
			if !o.keep {
				if derr := pg.dropDatabase(context.Background(), name); derr != nil {
					progress("dropping database %s: %v", name, derr)
				}
			}
		}
		if err != nil {
			sr.failed = append(sr.failed, label+": "+err.Error())
			progress("%s FAILED: %v", label, err)
			continue
		}
		progress("  %s: %s workflows, %s wf/s, p50 %s", label, fmtInt(r.completed), fmtRate(r.throughput()), fmtDur(r.lat.p50))
		sr.results = append(sr.results, r)
	}
	if o.breakdown && o.workloads["W1"] && ctx.Err() == nil {
		progress("running %s W1 @1 breakdown (server traced) ...", store)
		sr.breakdown = runBreakdown(ctx, o, store, bin, tmp, w, pg, tag)
		if sr.breakdown.err != "" {
			progress("%s W1 @1 breakdown FAILED: %s", store, sr.breakdown.err)
		}
	}
	if o.workloads["R"] && ctx.Err() == nil {
		progress("running %s R (space after retention, %s workflows per fill) ...", store, fmtInt(int64(o.counts["R"])))
		sr.space = runSpace(ctx, o, store, bin, tmp, w, pg, tag, progress)
	}
	if o.workloads["W5"] && ctx.Err() == nil {
		progress("running %s W5 (a large store, %s preloaded runs) ...", store, fmtInt(int64(o.counts["W5"])))
		sr.large = runLarge(ctx, o, store, bin, tmp, w, pg, tag, progress)
	}
	return sr
}

// runOne starts a server on db, runs one workload on it and stops it.
func runOne(ctx context.Context, o *options, bin, db, logPath string, w *worker, workload string, inFlight int, withWait bool, store, name string, dbPIDs func() []int) (*result, error) {
	background := -1.0
	if !o.quick {
		background = backgroundLoad(ctx)
	}
	serverArgs := o.serverArgs
	extDir := ""
	if offloaded(workload) {
		extDir = strings.TrimSuffix(logPath, ".log") + "-external"
		if err := os.MkdirAll(extDir, 0o755); err != nil {
			return nil, err
		}
		serverArgs = append(offloadArgs(extDir), serverArgs...)
	}
	srv, err := startServer(ctx, bin, db, logPath, serverArgs, o.pprofDir != "")
	if err != nil {
		return nil, err
	}
	defer srv.stop()
	api, tr, err := newAPIClient(srv.url)
	if err != nil {
		return nil, err
	}
	defer tr.CloseIdleConnections()
	t := &target{srv: srv, api: api, worker: w, prefix: name, dbPIDs: dbPIDs}
	retries0, unknown0 := w.retries.Load(), w.unknown.Load()

	// The closed-loop runs' database bytes per workflow: the database's
	// size is taken after a first batch of workflows, one per slot in
	// flight, has given each table and index its first pages (on
	// PostgreSQL hundreds of KiB, which a short run would share out over
	// too few workflows), and again at the end of the run.
	dbBefore, extBefore, extObjectsBefore := int64(-1), int64(0), int64(0)
	var sizeErr error
	closedLoopRun := workload != "W3" && workload != "W4" && workload != "X"
	if closedLoopRun {
		t.prefix = name + "-first"
		first, err := t.closedLoop(ctx, loopSpec{workload: workload, inFlight: inFlight, count: inFlight})
		t.prefix = name
		switch {
		case err != nil:
			return nil, fmt.Errorf("first batch: %w", err)
		case first.errors > 0:
			return nil, fmt.Errorf("first batch: %d errors, first: %s", first.errors, first.firstError)
		}
		if dbBefore, sizeErr = settledDatabaseBytes(ctx, db); sizeErr != nil {
			dbBefore = -1
		}
		if extDir != "" {
			extBefore, extObjectsBefore, _ = dirBytes(extDir)
		}
	}

	var r *result
	switch workload {
	case "W3":
		r, err = t.sleepers(ctx, "W3", inFlight, o.inFlight, o.timer)
	case "W4":
		r, err = t.sleepers(ctx, "W4", inFlight, o.inFlight, o.timerW4)
	case "X":
		// The second node, on the same database.
		var nodeB *serverProc
		nodeB, err = startServer(ctx, bin, db, strings.TrimSuffix(logPath, ".log")+"-b.log", o.serverArgs, false)
		if err != nil {
			return nil, err
		}
		defer nodeB.stop()
		apiB, trB, berr := newAPIClient(nodeB.url)
		if berr != nil {
			return nil, berr
		}
		defer trB.CloseIdleConnections()
		r, err = t.crossNode(ctx, apiB, inFlight)
		if err == nil && !nodeB.alive() {
			err = fmt.Errorf("node B exited during the run: %s", nodeB.logTail())
		}
		trB.CloseIdleConnections()
		nodeB.stop()
	default:
		spec := loopSpec{workload: workload, inFlight: inFlight, warmup: o.warmup, duration: o.duration, count: o.counts[baseWorkload(workload)], withWait: withWait}
		if workload == "W1b" {
			spec.warmupCount = w1bWarmup
			if o.quick {
				spec.warmupCount = 20
			}
		}
		if o.pprofDir != "" {
			spec.profile = filepath.Join(o.pprofDir, fmt.Sprintf("%s-%s-%d.pprof", strings.ToLower(store), strings.ToLower(workload), inFlight))
		}
		r, err = t.closedLoop(ctx, spec)
	}
	if err == nil && !srv.alive() {
		err = fmt.Errorf("the server exited during the run: %s", srv.logTail())
	}
	if err != nil {
		return nil, err
	}
	r.dbBefore, r.dbAfter, r.offload = dbBefore, -1, extDir != ""
	if closedLoopRun && dbBefore >= 0 {
		if r.dbAfter, sizeErr = settledDatabaseBytes(ctx, db); sizeErr != nil {
			r.dbAfter = -1
		}
	}
	if sizeErr != nil {
		r.note = strings.TrimPrefix(r.note+"; database size not measured: "+sizeErr.Error(), "; ")
	}
	if extDir != "" {
		if r.extBytes, r.extObjects, err = dirBytes(extDir); err != nil {
			r.note = strings.TrimPrefix(r.note+"; external store not measured: "+err.Error(), "; ")
		}
		r.extBytes -= extBefore
		r.extObjects -= extObjectsBefore
	}
	r.background = background
	r.peakRSS, _ = peakRSS(srv.pid)
	r.retries = w.retries.Load() - retries0
	if n := w.unknown.Load() - unknown0; n > 0 {
		r.errors += n
		if r.firstError == "" {
			r.firstError = fmt.Sprintf("the worker refused %d calls: calls it does not serve, or W6 S2 calls without S1's attribute", n)
		}
	}
	r.pgCommits, r.pgRollbacks = -1, -1
	// Connections the client dialled but never used would hold up the
	// server's graceful shutdown for 5 s (net/http treats them as new).
	tr.CloseIdleConnections()
	srv.stop()
	r.logErrors, r.firstLogError = srv.logErrors()
	return r, nil
}

// backgroundLoad returns the share of the machine's CPU that was busy
// during half a second before a run, when none of the benchmark's processes
// works: other processes on a shared machine skew the figures.
func backgroundLoad(ctx context.Context) float64 {
	a, err := readMachineCPU()
	if err != nil {
		return -1
	}
	select {
	case <-time.After(500 * time.Millisecond):
	case <-ctx.Done():
		return -1
	}
	b, err := readMachineCPU()
	if err != nil || b.total <= a.total {
		return -1
	}
	return float64(b.busy-a.busy) / float64(b.total-a.total)
}

// redactURL hides a password in a URL.
func redactURL(s string) string {
	if u, err := url.Parse(s); err == nil {
		return u.Redacted()
	}
	return "(unparsable URL)"
}
