package main

// Workload R: space after retention. On one store, three times: fill it
// with N closed W1 workflows (retention off), restart the server with a
// retention of 1 ms for the W1 type, wait until the sweeps have deleted
// every run, and measure the store's size after the fill and after the
// expiry. The store must reuse the space it freed: the size after cycle 3
// is at most spaceTarget times the size after cycle 1. The tool never
// vacuums: what it measures is what the running system does by itself.

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
)

const (
	// spaceCycles is the number of fill-and-expire cycles of workload R.
	spaceCycles = 3
	// spaceTarget bounds size after the last cycle / size after the first.
	spaceTarget = 1.1
	// defaultSpaceN is R's default number of workflows per fill.
	defaultSpaceN = 200_000
)

// spaceTables are the PostgreSQL tables whose dead rows the expiry phase
// waits for autovacuum to clear.
var spaceTables = []string{"runs", "executions", "history", "messages", "tasks",
	"search_attributes", "search_attribute_strings", "search_attribute_words", "data_attributes", "workflows"}

// storeSize is the size of a store at one moment.
type storeSize struct {
	total int64 // SQLite: database file + -wal; PostgreSQL: pg_database_size
	wal   int64 // SQLite only
	// tables are PostgreSQL's biggest tables, pg_total_relation_size.
	tables []tableSize
}

// tableSize is one table's size, indexes and TOAST included.
type tableSize struct {
	name  string
	bytes int64
}

// spaceCycle is one fill-and-expire cycle.
type spaceCycle struct {
	filled, expired   int64 // workflows completed by the fill, runs deleted by the sweeps
	fillTime, sweep   time.Duration
	afterFill, afterX storeSize
	// vacuum describes, on PostgreSQL, what autovacuum did after the
	// deletes and how long the tool waited for it.
	vacuum string
}

// spaceResult is what workload R measured on one store.
type spaceResult struct {
	n      int
	cycles []spaceCycle
	err    string
}

// ratio returns size after the last cycle / size after the first, after
// the fills and after the expiries; 0 when the cycles did not all run.
func (s *spaceResult) ratio() (fill, expired float64) {
	if len(s.cycles) < spaceCycles || s.cycles[0].afterFill.total == 0 || s.cycles[0].afterX.total == 0 {
		return 0, 0
	}
	last := s.cycles[len(s.cycles)-1]
	return float64(last.afterFill.total) / float64(s.cycles[0].afterFill.total),
		float64(last.afterX.total) / float64(s.cycles[0].afterX.total)
}

// peak returns the most space a cycle held: its size after the fill, or
// after the expiry when that is larger (a WAL that grew meanwhile).
func (c *spaceCycle) peak() int64 { return max(c.afterFill.total, c.afterX.total) }

// peakRatio is the target's figure: the most space the last cycle held /
// the most the first held; 0 when the cycles did not all run. A store
// that reuses what it freed needs no more space for the third fill than
// for the first. The size after an expiry alone is no measure of reuse:
// PostgreSQL's vacuum gives back to the file system the empty pages at a
// table's end, and how many are at the end differs from cycle to cycle.
func (s *spaceResult) peakRatio() float64 {
	if len(s.cycles) < spaceCycles || s.cycles[0].peak() == 0 {
		return 0
	}
	return float64(s.cycles[len(s.cycles)-1].peak()) / float64(s.cycles[0].peak())
}

// verdict is PASS when the peak ratio is within spaceTarget.
func (s *spaceResult) verdict() string {
	switch r := s.peakRatio(); {
	case r == 0:
		return "not measured"
	case r <= spaceTarget:
		return "PASS"
	}
	return "MISS"
}

// runSpace runs workload R on one store: one database, spaceCycles cycles.
func runSpace(ctx context.Context, o *options, store, bin, tmp string, w *worker, pg *pgAdmin, tag string, progress func(string, ...any)) *spaceResult {
	res := &spaceResult{n: o.counts["R"]}
	name := fmt.Sprintf("iwf_bench_%s_r", tag)
	var db string
	var size func(context.Context) (storeSize, error)
	var vacuumWait func(context.Context) string
	if pg == nil {
		path := filepath.Join(tmp, name+".db")
		db = "sqlite://" + path
		size = func(context.Context) (storeSize, error) { return sqliteSize(path) }
	} else {
		var err error
		if db, err = pg.createDatabase(ctx, name); err != nil {
			res.err = err.Error()
			return res
		}
		if !o.keep {
			defer func() {
				if derr := pg.dropDatabase(context.Background(), name); derr != nil {
					progress("dropping database %s: %v", name, derr)
				}
			}()
		}
		conn, err := pgx.Connect(ctx, withoutPoolParams(db))
		if err != nil {
			res.err = err.Error()
			return res
		}
		defer conn.Close(context.Background())
		size = func(ctx context.Context) (storeSize, error) { return postgresSize(ctx, conn) }
		vacuumWait = func(ctx context.Context) string { return awaitAutovacuum(ctx, conn, o.vacuumWait, progress) }
	}
	for c := 1; c <= spaceCycles && ctx.Err() == nil; c++ {
		cy, err := spaceOneCycle(ctx, o, bin, db, tmp, name, c, w, size, vacuumWait, progress)
		if err != nil {
			res.err = fmt.Sprintf("cycle %d: %v", c, err)
			progress("%s R %s", store, res.err)
			return res
		}
		progress("  %s R cycle %d: %s filled in %.0f s -> %s; %s deleted in %.0f s -> %s%s", store, c,
			fmtInt(cy.filled), cy.fillTime.Seconds(), fmtSize(cy.afterFill.total),
			fmtInt(cy.expired), cy.sweep.Seconds(), fmtSize(cy.afterX.total), cy.vacuumNote())
		res.cycles = append(res.cycles, *cy)
	}
	return res
}

// vacuumNote is the cycle's autovacuum remark for the progress line.
func (c *spaceCycle) vacuumNote() string {
	if c.vacuum == "" {
		return ""
	}
	return "; " + c.vacuum
}

// spaceOneCycle fills the store and lets retention empty it again.
func spaceOneCycle(ctx context.Context, o *options, bin, db, tmp, name string, c int, w *worker,
	size func(context.Context) (storeSize, error), vacuumWait func(context.Context) string, progress func(string, ...any)) (*spaceCycle, error) {
	cy := &spaceCycle{}
	logBase := filepath.Join(tmp, fmt.Sprintf("%s-%d", name, c))
	args := append(append([]string{}, o.serverArgs...), "--retention", "0")
	progress("R cycle %d: filling %s workflows ...", c, fmtInt(int64(o.counts["R"])))
	began := time.Now()
	r, err := spacePhase(ctx, bin, db, logBase+"-fill.log", args, w, func(t *target) (*result, error) {
		t.prefix = fmt.Sprintf("%s-c%d", name, c)
		return t.closedLoop(ctx, loopSpec{workload: "W1", inFlight: o.inFlight, count: o.counts["R"]})
	}, func(t *target) error {
		var err error
		cy.afterFill, err = size(ctx)
		return err
	})
	if err != nil {
		return nil, err
	}
	if r.errors > 0 {
		return nil, fmt.Errorf("fill: %d errors, first: %s", r.errors, r.firstError)
	}
	cy.filled, cy.fillTime = r.started, time.Since(began)

	progress("R cycle %d: expiring them ...", c)
	args = append(append([]string{}, o.serverArgs...), "--retention", "0",
		"--retention-for", typeW1+"=1ms", "--retention-interval", "1s")
	began = time.Now()
	_, err = spacePhase(ctx, bin, db, logBase+"-expire.log", args, w, func(t *target) (*result, error) {
		deadline := time.Now().Add(max(10*time.Minute, time.Duration(cy.filled)*5*time.Millisecond))
		for {
			m := t.srv.metrics()
			cy.expired = int64(m["iwf_retention_runs_deleted_total"])
			if cy.expired >= cy.filled && m["iwf_retention_backlog_runs"] == 0 {
				cy.sweep = time.Since(began)
				return nil, nil
			}
			if !t.srv.alive() {
				return nil, fmt.Errorf("the server exited: %s", t.srv.logTail())
			}
			if time.Now().After(deadline) {
				return nil, fmt.Errorf("after %.0f s only %d of %d runs deleted (backlog %.0f)", time.Since(began).Seconds(), cy.expired, cy.filled, m["iwf_retention_backlog_runs"])
			}
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(time.Second):
			}
		}
	}, func(t *target) error {
		if vacuumWait != nil {
			cy.vacuum = vacuumWait(ctx)
		}
		var err error
		cy.afterX, err = size(ctx)
		return err
	})
	if err != nil {
		return nil, err
	}
	return cy, nil
}

// spacePhase starts a server with args on db, runs do, measures with
// measure while the server still runs, and stops it.
func spacePhase(ctx context.Context, bin, db, logPath string, args []string, w *worker,
	do func(*target) (*result, error), measure func(*target) error) (*result, error) {
	srv, err := startServer(ctx, bin, db, logPath, args, false)
	if err != nil {
		return nil, err
	}
	defer srv.stop()
	api, tr, err := newAPIClient(srv.url)
	if err != nil {
		return nil, err
	}
	defer tr.CloseIdleConnections()
	t := &target{srv: srv, api: api, worker: w, prefix: "r"}
	r, err := do(t)
	if err != nil {
		return nil, err
	}
	if err := measure(t); err != nil {
		return nil, err
	}
	tr.CloseIdleConnections()
	srv.stop()
	if n, first := srv.logErrors(); n > 0 {
		return nil, fmt.Errorf("the server logged %d errors, first: %s", n, truncate(first, 300))
	}
	return r, nil
}

// sqliteSize returns the size of a SQLite database: the file and its WAL.
func sqliteSize(path string) (storeSize, error) {
	var s storeSize
	st, err := os.Stat(path)
	if err != nil {
		return s, err
	}
	s.total = st.Size()
	if st, err := os.Stat(path + "-wal"); err == nil {
		s.wal = st.Size()
		s.total += s.wal
	}
	return s, nil
}

// postgresSize returns pg_database_size of the connection's database and
// the sizes of its five biggest tables.
func postgresSize(ctx context.Context, conn *pgx.Conn) (storeSize, error) {
	var s storeSize
	if err := conn.QueryRow(ctx, "SELECT pg_database_size(current_database())").Scan(&s.total); err != nil {
		return s, err
	}
	rows, err := conn.Query(ctx, `SELECT relname::text, pg_total_relation_size(relid) FROM pg_stat_user_tables
		ORDER BY 2 DESC LIMIT 5`)
	if err != nil {
		return s, err
	}
	for rows.Next() {
		var t tableSize
		if err := rows.Scan(&t.name, &t.bytes); err != nil {
			return s, err
		}
		s.tables = append(s.tables, t)
	}
	return s, rows.Err()
}

// awaitAutovacuum waits, at most wait, until autovacuum has cleared the
// dead rows the deletes left in the engine's tables (fewer than a tenth of
// them left), and describes what it saw. It never vacuums itself.
func awaitAutovacuum(ctx context.Context, conn *pgx.Conn, wait time.Duration, progress func(string, ...any)) string {
	type stat struct {
		dead, vacuums int64
	}
	read := func() (map[string]stat, error) {
		if _, err := conn.Exec(ctx, "SELECT pg_stat_clear_snapshot()"); err != nil {
			return nil, err
		}
		rows, err := conn.Query(ctx, `SELECT relname::text, n_dead_tup, autovacuum_count FROM pg_stat_user_tables WHERE relname = ANY($1)`, spaceTables)
		if err != nil {
			return nil, err
		}
		out := map[string]stat{}
		for rows.Next() {
			var n string
			var s stat
			if err := rows.Scan(&n, &s.dead, &s.vacuums); err != nil {
				return nil, err
			}
			out[n] = s
		}
		return out, rows.Err()
	}
	began := time.Now()
	first, err := read()
	if err != nil {
		return "pg_stat_user_tables: " + err.Error()
	}
	var dead0 int64
	for _, s := range first {
		dead0 += s.dead
	}
	progress("  waiting up to %s for autovacuum (%s dead rows) ...", wait, fmtInt(dead0))
	for {
		cur, err := read()
		if err != nil {
			return "pg_stat_user_tables: " + err.Error()
		}
		var dead int64
		var vacuumed []string
		for n, s := range cur {
			dead += s.dead
			if s.vacuums > first[n].vacuums {
				vacuumed = append(vacuumed, n)
			}
		}
		sort.Strings(vacuumed)
		// The server's backends report their deletes up to a few
		// seconds late: the peak is the figure to clear.
		dead0 = max(dead0, dead)
		done := dead*10 < dead0 || dead0 == 0
		if done || time.Since(began) >= wait || ctx.Err() != nil {
			verdict := "cleared"
			if !done {
				verdict = "NOT cleared"
			}
			return fmt.Sprintf("autovacuum: dead rows %s -> %s in %.0f s (%s; vacuumed: %s)",
				fmtInt(dead0), fmtInt(dead), time.Since(began).Seconds(), verdict, strings.Join(vacuumed, ","))
		}
		select {
		case <-ctx.Done():
		case <-time.After(2 * time.Second):
		}
	}
}

// fmtSize formats a byte count in MB with one decimal.
func fmtSize(b int64) string { return fmt.Sprintf("%.1f MB", float64(b)/(1<<20)) }

// printSpace writes workload R's table.
func printSpace(out io.Writer, s *spaceResult, o *options) {
	fmt.Fprintf(out, "R: space after retention, %d fill-and-expire cycles of %s W1 workflows on one database (fill with --retention 0;\n", spaceCycles, fmtInt(int64(s.n)))
	fmt.Fprintf(out, "   expire with --retention-for %s=1ms --retention-interval 1s until every run is deleted; sizes taken with the server running;\n", typeW1)
	fmt.Fprintf(out, "   SQLite: database file + WAL; PostgreSQL: pg_database_size, after waiting up to %s for autovacuum; no manual VACUUM)\n", o.vacuumWait)
	if s.err != "" {
		fmt.Fprintf(out, "R FAILED: %s\n", s.err)
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "cycle\tfilled\tfill s\tsize after fill\t(WAL)\tdeleted\tsweep s\tsize after expiry\t(WAL)\t")
	for i, c := range s.cycles {
		fmt.Fprintf(tw, "%d\t%s\t%.0f\t%s\t%s\t%s\t%.0f\t%s\t%s\t\n", i+1, fmtInt(c.filled), c.fillTime.Seconds(), fmtSize(c.afterFill.total), fmtSize(c.afterFill.wal),
			fmtInt(c.expired), c.sweep.Seconds(), fmtSize(c.afterX.total), fmtSize(c.afterX.wal))
	}
	_ = tw.Flush()
	for i, c := range s.cycles {
		var parts []string
		if c.vacuum != "" {
			parts = append(parts, c.vacuum)
		}
		if len(c.afterFill.tables) > 0 {
			var ts []string
			for _, t := range c.afterFill.tables {
				ts = append(ts, fmt.Sprintf("%s %s", t.name, fmtSize(t.bytes)))
			}
			parts = append(parts, "biggest tables after fill: "+strings.Join(ts, ", "))
		}
		if len(parts) > 0 {
			fmt.Fprintf(out, "  cycle %d: %s\n", i+1, strings.Join(parts, "; "))
		}
	}
	f, x := s.ratio()
	if f > 0 {
		fmt.Fprintf(out, "  size after cycle %d / after cycle 1: %.2f after the fills, %.2f after the expiries; the most space cycle %d held / cycle 1: %.2f (target <= %.1f): %s\n",
			spaceCycles, f, x, spaceCycles, s.peakRatio(), spaceTarget, s.verdict())
	}
}
