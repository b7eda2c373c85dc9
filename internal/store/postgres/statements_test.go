package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/server"
	"github.com/iwf-server/iwf-server/internal/store/postgres"
	"github.com/iwf-server/iwf-server/internal/store/postgres/pgtest"
)

// The workflow shapes of TestStatementCounts, the same as cmd/iwf-bench's
// W1, W2 and W3.
const (
	shapeW1 = "W1" // S1 -> S2 -> graceful completion, both skipWaitUntil
	shapeW2 = "W2" // S1's waitUntil waits for signal "go"; execute completes
	shapeW3 = "W3" // S1's waitUntil asks for a 1 s durable timer; execute completes

	// stmtDB is the database the store under measurement uses.
	stmtDB = "iwf"
)

// maxStatementsPerWorkflow bounds the top-level statements per workflow of
// each shape (BEGIN, COMMIT and ROLLBACK not counted): the measured value
// plus less than one statement, so that a change that adds a statement to
// a workflow's path fails the test. Measured with PostgreSQL 15 on the
// store of this commit (see docs/architecture.md, "Statements per workflow
// (PostgreSQL)"): W1 18.0 to 18.2, W2 37.0 to 37.2, W3 21.6 to 23.05
// statements per workflow (the checks of an execute answer folded into its
// run and execution updates, the task's delete into the run's check or
// update, and a close's delete of the run's tasks with it; a start hands
// its first call the rows it wrote instead of reading them, package born;
// a timer that fires alone takes its task as the call's read showed it,
// as an execute answer does; a start's transaction goes to the combiner,
// without a statement_timeout of its own).
var maxStatementsPerWorkflow = map[string]float64{
	shapeW1: 19,
	shapeW2: 38,
	shapeW3: 24,
}

// maxRoundTripsPerWorkflow bounds the round trips per workflow of each
// shape likewise: measured W1 7.0 to 7.2, W2 14.0 to 14.2, plus less than
// one; W3 6.85 to 8.1, as its commits combine or not, plus less than one.
var maxRoundTripsPerWorkflow = map[string]float64{
	shapeW1: 8,
	shapeW2: 15,
	shapeW3: 9,
}

// maxIndexEntriesPerWorkflow bounds the index entries written per
// workflow of each shape (tableWrites.indexEntries: inserted rows and
// updates that are not HOT, times the indexes of their table) likewise.
// Whether an update is HOT depends on the free space left in its page;
// with the fillfactor of runs and executions (migration 0011) their
// updates measured HOT almost always, but those of search_attributes
// (six indexes) still vary: measured W1 33.0, W2 43.05, W3 41.45 to 46.75.
// Each missed HOT update of search_attributes adds 0.3 entries per
// workflow of the 20, so W3's bound leaves room for five more misses than
// the most seen: a bound at the edge of that noise would fail CI at random.
var maxIndexEntriesPerWorkflow = map[string]float64{
	shapeW1: 35,
	shapeW2: 46,
	shapeW3: 52,
}

// TestStatementCounts counts, with pg_stat_statements, the SQL statements
// and transactions the server runs per workflow for three workflow shapes,
// through the real server (REST API, engine, HTTP worker client) on a
// PostgreSQL store and a real HTTP worker. It logs a table per shape and
// fails when a shape needs more statements than maxStatementsPerWorkflow
// or more round trips than maxRoundTripsPerWorkflow.
//
// Each measurement is one server lifetime on the store's own database:
// open the store, start the engine, run the workflows, stop the engine and
// close the store, then wait until the database has no backend left, so
// that every backend has flushed its transaction counters to
// pg_stat_database. An idle lifetime (no workflow) is measured the same way
// and subtracted: what is left is per workflow. The engine's poller runs
// once per lifetime (its poll interval and lease duration are an hour) and
// the test checks that it did: polls and lease renewals are work per unit
// of time, not per workflow.
//
// Per workflow the counts include the client's calls: the start, W2's
// signal (sent once the waitUntil answer has committed, so that it meets a
// waiting execution) and one getWithWait, sent once the workflow has
// closed, so that it reads once and returns.
func TestStatementCounts(t *testing.T) {
	pg := pgtest.StartOwnWith(t, pgtest.OwnOptions{Settings: map[string]string{
		"shared_preload_libraries":         "pg_stat_statements",
		"pg_stat_statements.track":         "all",
		"pg_stat_statements.track_utility": "on",
		// No autovacuum transactions in the measured database.
		"autovacuum": "off",
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// All of the test's own queries go to the "postgres" database; the
	// measurement reads only the statements of stmtDB.
	admin, err := pgx.Connect(ctx, pg.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	for _, q := range []string{
		`CREATE EXTENSION pg_stat_statements`,
		`CREATE DATABASE ` + stmtDB,
	} {
		if _, err := admin.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	u, err := url.Parse(pg.URL)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + stmtDB
	m := &stmtMeter{t: t, admin: admin, storeURL: u.String(), worker: newShapeWorker(t)}
	if err := admin.QueryRow(ctx, `SELECT oid FROM pg_database WHERE datname = $1`, stmtDB).Scan(&m.dbid); err != nil {
		t.Fatal(err)
	}

	st, err := postgres.Open(ctx, m.storeURL)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	const n = 20
	idle := m.measure(ctx, "idle", 0)
	noLimitStatements(t, "idle", idle)
	for _, shape := range []string{shapeW1, shapeW2, shapeW3} {
		raw := m.measure(ctx, shape, n)
		noLimitStatements(t, shape, raw)
		got := raw.minus(idle)
		got.log(t, shape, n)
		total := float64(got.statements()) / n
		if total < 1 {
			t.Errorf("%s: %.2f statements per workflow: the measurement saw no work", shape, total)
		}
		if xacts := got.commits + got.rollbacks; xacts < int64(n) {
			t.Errorf("%s: pg_stat_database counted %d transactions for %d workflows: counters not flushed", shape, xacts, n)
		}
		if limit := maxStatementsPerWorkflow[shape]; total > limit {
			t.Errorf("%s: %.2f statements per workflow, more than the bound %.0f (see maxStatementsPerWorkflow)", shape, total, limit)
		}
		if trips, limit := float64(got.roundTrips)/n, maxRoundTripsPerWorkflow[shape]; trips > limit {
			t.Errorf("%s: %.2f round trips per workflow, more than the bound %.0f (see maxRoundTripsPerWorkflow)", shape, trips, limit)
		}
		all, _ := got.indexEntries()
		if all < n {
			t.Errorf("%s: %d index entries written for %d workflows: pg_stat_user_tables saw no writes", shape, all, n)
		}
		if entries, limit := float64(all)/n, maxIndexEntriesPerWorkflow[shape]; entries > limit {
			t.Errorf("%s: %.2f index entries written per workflow, more than the bound %.0f (see maxIndexEntriesPerWorkflow)", shape, entries, limit)
		}
	}
}

// noLimitStatements fails when a lifetime without limits configured ran a
// statement of the concurrency and rate limits (engine/permits.go): their
// tables and function must not be touched at all.
func noLimitStatements(t *testing.T, what string, c stmtCounts) {
	t.Helper()
	for k, text := range c.text {
		if c.calls[k] > 0 && (strings.Contains(text, "limit_permits") || strings.Contains(text, "limit_buckets") || strings.Contains(text, "iwf_permit_")) {
			t.Errorf("%s: a statement of the limits ran without a limit configured: %s", what, text)
		}
	}
}

// stmtMeter runs the server lifetimes of TestStatementCounts.
type stmtMeter struct {
	t        *testing.T
	admin    *pgx.Conn // to the "postgres" database
	storeURL string    // to stmtDB
	dbid     uint32
	worker   *shapeWorker
	seq      int
}

// stmtCounts is what one server lifetime ran on stmtDB.
type stmtCounts struct {
	calls              map[stmtKey]int64
	text               map[stmtKey]string
	commits, rollbacks int64
	// roundTrips counts the statements sent alone and the pipelines
	// (batches) the store sent, as its pgx tracer saw them.
	roundTrips int64
	// walRecords and walBytes sum the WAL the statements wrote: a measure
	// of the rows and index entries written that does not depend on the
	// machine's speed.
	walRecords, walBytes int64
	// tables are the row writes per table (pg_stat_user_tables), from
	// which the index entries written follow.
	tables map[string]tableWrites
}

// tableWrites are one table's row writes in a lifetime and its indexes.
type tableWrites struct {
	inserts, updates, hotUpdates, deletes int64
	// indexes is the number of indexes of the table, partial of them
	// partial indexes (an entry only for rows matching their predicate).
	indexes, partial int64
}

// indexEntries is the number of index entries the table's writes added:
// each inserted row and each update that is not HOT adds one entry to
// every index. Into partial indexes only rows that match the predicate go;
// they are counted as if every row did, so the figure is an upper bound
// by at most partialEntries.
func (w tableWrites) indexEntries() int64 { return (w.inserts + w.updates - w.hotUpdates) * w.indexes }

// partialEntries is the share of indexEntries that went to partial
// indexes, at most.
func (w tableWrites) partialEntries() int64 {
	return (w.inserts + w.updates - w.hotUpdates) * w.partial
}

// indexEntries sums tableWrites.indexEntries and partialEntries over the
// tables.
func (c stmtCounts) indexEntries() (all, partial int64) {
	for _, w := range c.tables {
		all += w.indexEntries()
		partial += w.partialEntries()
	}
	return all, partial
}

// stmtKey identifies a normalized statement; nested ones (run by a
// function or trigger) are counted apart from those the server sent.
type stmtKey struct {
	queryID  int64
	toplevel bool
}

// measure runs one server lifetime with n workflows of shape (none for
// "idle") and returns what it ran on stmtDB.
func (m *stmtMeter) measure(ctx context.Context, shape string, n int) stmtCounts {
	t := m.t
	t.Helper()
	m.waitNoBackends(ctx)
	tables0 := m.tableWrites(ctx)
	m.waitNoBackends(ctx)
	var c0 stmtCounts
	if err := m.admin.QueryRow(ctx, `SELECT xact_commit, xact_rollback FROM pg_stat_database WHERE datid = $1`, m.dbid).
		Scan(&c0.commits, &c0.rollbacks); err != nil {
		t.Fatal(err)
	}
	if _, err := m.admin.Exec(ctx, `SELECT pg_stat_statements_reset()`); err != nil {
		t.Fatal(err)
	}

	var roundTrips atomic.Int64
	st, err := postgres.Open(ctx, m.storeURL, postgres.WithRoundTripCounter(&roundTrips))
	if err != nil {
		t.Fatal(err)
	}
	obs := &claimObserver{Store: st, claimed: make(chan struct{})}
	ev := newRunEvents()
	srv, err := server.New(obs, server.Options{
		NoUI: true,
		Engine: engine.Config{
			PollInterval:  time.Hour,
			LeaseDuration: time.Hour,
			OnCommit:      ev.record,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	// The poller's first claim runs at start: wait for it, so that it is
	// in every lifetime, idle or not.
	select {
	case <-obs.claimed:
	case <-ctx.Done():
		t.Fatal("the engine's poller did not claim at start")
	}
	api := httptest.NewServer(srv.Handler)
	tr := &http.Transport{}
	client, err := iwfapi.NewClientWithResponses(api.URL, iwfapi.WithHTTPClient(&http.Client{Transport: tr}))
	if err != nil {
		t.Fatal(err)
	}

	m.seq++
	ids := make([]string, n)
	runs := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-%d-%d", shape, m.seq, i)
	}
	switch shape {
	case shapeW1, shapeW2:
		// One after another.
		for i, id := range ids {
			runs[i] = m.start(ctx, client, shape, id)
			if shape == shapeW2 {
				ev.wait(ctx, t, runs[i], "WaitUntilCompleted")
				m.signal(ctx, client, id)
			}
			ev.wait(ctx, t, runs[i], "WorkflowClosed")
			m.awaitCompleted(ctx, client, id)
		}
	case shapeW3:
		// Started one after another, each once its timer is set; the
		// timers then run out together, so the shape takes one timer.
		for i, id := range ids {
			runs[i] = m.start(ctx, client, shape, id)
			ev.wait(ctx, t, runs[i], "WaitUntilCompleted")
		}
		for i, id := range ids {
			ev.wait(ctx, t, runs[i], "WorkflowClosed")
			m.awaitCompleted(ctx, client, id)
		}
	}

	tr.CloseIdleConnections()
	api.CloseClientConnections()
	api.Close()
	closeCtx, cancelClose := context.WithTimeout(ctx, 30*time.Second)
	defer cancelClose()
	if err := srv.Close(closeCtx); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if got := obs.claims.Load(); got != 1 {
		t.Fatalf("%s: the poller claimed %d times in the lifetime, want once: its statements would be counted as the workflows'", shape, got)
	}

	// Every backend of the lifetime flushes its counters when it exits.
	m.waitNoBackends(ctx)
	c := stmtCounts{calls: map[stmtKey]int64{}, text: map[stmtKey]string{}}
	if err := m.admin.QueryRow(ctx, `SELECT xact_commit, xact_rollback FROM pg_stat_database WHERE datid = $1`, m.dbid).
		Scan(&c.commits, &c.rollbacks); err != nil {
		t.Fatal(err)
	}
	c.commits -= c0.commits
	c.rollbacks -= c0.rollbacks
	c.roundTrips = roundTrips.Load()
	rows, err := m.admin.Query(ctx, `SELECT queryid, toplevel, calls, wal_records, wal_bytes, query FROM pg_stat_statements WHERE dbid = $1`, m.dbid)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var k stmtKey
		var calls, walRecords, walBytes int64
		var q string
		if err := rows.Scan(&k.queryID, &k.toplevel, &calls, &walRecords, &walBytes, &q); err != nil {
			t.Fatal(err)
		}
		c.calls[k] += calls
		if k.toplevel {
			c.walRecords += walRecords
			c.walBytes += walBytes
		}
		c.text[k] = q
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	c.tables = m.tableWrites(ctx)
	for name, w := range c.tables {
		b := tables0[name]
		w.inserts, w.updates, w.hotUpdates, w.deletes = w.inserts-b.inserts, w.updates-b.updates, w.hotUpdates-b.hotUpdates, w.deletes-b.deletes
		c.tables[name] = w
	}
	return c
}

// tableWrites reads the row write counters of stmtDB's tables and counts
// their indexes. It connects to stmtDB (the statistics views show only the
// database a session is in) and leaves before returning; the caller waits
// for its backend to go before counting the lifetime's transactions.
func (m *stmtMeter) tableWrites(ctx context.Context) map[string]tableWrites {
	t := m.t
	t.Helper()
	conn, err := pgx.Connect(ctx, m.storeURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, `SELECT s.relname, s.n_tup_ins, s.n_tup_upd, s.n_tup_hot_upd, s.n_tup_del,
			count(i.indexrelid), count(i.indexrelid) FILTER (WHERE i.indpred IS NOT NULL)
		FROM pg_stat_user_tables s LEFT JOIN pg_index i ON i.indrelid = s.relid
		WHERE s.schemaname = 'public' GROUP BY 1, 2, 3, 4, 5`)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]tableWrites{}
	for rows.Next() {
		var name string
		var w tableWrites
		if err := rows.Scan(&name, &w.inserts, &w.updates, &w.hotUpdates, &w.deletes, &w.indexes, &w.partial); err != nil {
			t.Fatal(err)
		}
		out[name] = w
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// start starts one workflow of shape and returns its run id.
func (m *stmtMeter) start(ctx context.Context, client *iwfapi.ClientWithResponses, shape, id string) string {
	t := m.t
	t.Helper()
	req := iwfapi.WorkflowStartRequest{
		WorkflowId:      id,
		IwfWorkflowType: shape,
		IwfWorkerUrl:    m.worker.url,
		StartStateId:    ptrTo("S1"),
	}
	if shape == shapeW1 {
		req.StateOptions = &iwfapi.WorkflowStateOptions{SkipWaitUntil: ptrTo(true)}
	}
	resp, err := client.StartWorkflowWithResponse(ctx, req)
	if err != nil {
		t.Fatalf("start %s: %v", id, err)
	}
	if resp.JSON200 == nil || resp.JSON200.WorkflowRunId == nil {
		t.Fatalf("start %s: %s %s", id, resp.Status(), resp.Body)
	}
	return *resp.JSON200.WorkflowRunId
}

// signal sends W2's signal.
func (m *stmtMeter) signal(ctx context.Context, client *iwfapi.ClientWithResponses, id string) {
	t := m.t
	t.Helper()
	resp, err := client.SignalWorkflowWithResponse(ctx, iwfapi.WorkflowSignalRequest{
		WorkflowId: id, SignalChannelName: "go",
		SignalValue: &iwfapi.EncodedObject{Encoding: ptrTo("json"), Data: ptrTo(`"go"`)},
	})
	if err != nil {
		t.Fatalf("signal %s: %v", id, err)
	}
	if resp.StatusCode() != http.StatusOK {
		t.Fatalf("signal %s: %s %s", id, resp.Status(), resp.Body)
	}
}

// awaitCompleted asks getWithWait for a closed workflow and checks that it
// completed.
func (m *stmtMeter) awaitCompleted(ctx context.Context, client *iwfapi.ClientWithResponses, id string) {
	t := m.t
	t.Helper()
	resp, err := client.GetWorkflowWithWaitWithResponse(ctx, iwfapi.WorkflowGetRequest{WorkflowId: id, WaitTimeSeconds: ptrTo(int32(30))})
	if err != nil {
		t.Fatalf("getWithWait %s: %v", id, err)
	}
	if resp.JSON200 == nil {
		t.Fatalf("getWithWait %s: %s %s", id, resp.Status(), resp.Body)
	}
	if st := resp.JSON200.WorkflowStatus; st != iwfapi.WorkflowStatusCompleted {
		t.Fatalf("workflow %s ended %s, want COMPLETED", id, st)
	}
}

// waitNoBackends waits until no backend is connected to stmtDB. A backend
// flushes its statistics before it leaves pg_stat_activity; there is no
// event to wait on, so this polls.
func (m *stmtMeter) waitNoBackends(ctx context.Context) {
	t := m.t
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var n int
		if err := m.admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datid = $1`, m.dbid).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d backends still connected to %s after 30s", n, stmtDB)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// minus returns c without what base ran.
func (c stmtCounts) minus(base stmtCounts) stmtCounts {
	out := stmtCounts{calls: map[stmtKey]int64{}, text: c.text, commits: c.commits - base.commits, rollbacks: c.rollbacks - base.rollbacks,
		roundTrips: c.roundTrips - base.roundTrips, walRecords: c.walRecords - base.walRecords, walBytes: c.walBytes - base.walBytes,
		tables: map[string]tableWrites{}}
	for name, w := range c.tables {
		b := base.tables[name]
		w.inserts, w.updates, w.hotUpdates, w.deletes = w.inserts-b.inserts, w.updates-b.updates, w.hotUpdates-b.hotUpdates, w.deletes-b.deletes
		out.tables[name] = w
	}
	for k, v := range c.calls {
		if v -= base.calls[k]; v != 0 {
			out.calls[k] = v
		}
	}
	for k, v := range base.calls {
		if _, ok := c.calls[k]; !ok {
			out.calls[k] = -v
			out.text[k] = base.text[k]
		}
	}
	return out
}

// statements is the number of top-level statements other than transaction
// control. BEGIN, COMMIT and ROLLBACK are left out: the store sends them in
// pipelines, where pg_stat_statements does not see every one of them;
// pg_stat_database counts the transactions instead.
func (c stmtCounts) statements() int64 {
	var n int64
	for k, v := range c.calls {
		if k.toplevel && !transactionControl(c.text[k]) {
			n += v
		}
	}
	return n
}

// transactionControl reports whether a statement is BEGIN, COMMIT,
// ROLLBACK or a synonym.
func transactionControl(q string) bool {
	switch strings.ToLower(strings.Fields(q + " x")[0]) {
	case "begin", "start", "commit", "rollback", "end", "abort":
		return true
	}
	return false
}

// log writes the table of a shape: statements per workflow by query.
func (c stmtCounts) log(t *testing.T, shape string, n int) {
	t.Helper()
	keys := make([]stmtKey, 0, len(c.calls))
	for k := range c.calls {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.toplevel != b.toplevel {
			return a.toplevel
		}
		if c.calls[a] != c.calls[b] {
			return c.calls[a] > c.calls[b]
		}
		return c.text[a] < c.text[b]
	})
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d workflows; per workflow:\n", shape, n)
	fmt.Fprintf(&b, "  %7s  %s\n", "calls", "statement")
	for _, k := range keys {
		if k.toplevel && transactionControl(c.text[k]) {
			continue
		}
		nested := ""
		if !k.toplevel {
			nested = "(nested) "
		}
		fmt.Fprintf(&b, "  %7.2f  %s%s\n", float64(c.calls[k])/float64(n), nested, shorten(c.text[k], 110))
	}
	fmt.Fprintf(&b, "  %7.2f  total top-level statements (BEGIN, COMMIT and ROLLBACK not counted)\n", float64(c.statements())/float64(n))
	fmt.Fprintf(&b, "  %7.2f  round trips (a statement sent alone, or a pipeline of them)\n", float64(c.roundTrips)/float64(n))
	fmt.Fprintf(&b, "  %7.1f  WAL records written by the statements (%.0f bytes)\n", float64(c.walRecords)/float64(n), float64(c.walBytes)/float64(n))
	names := make([]string, 0, len(c.tables))
	for name, w := range c.tables {
		if w.inserts != 0 || w.updates != 0 || w.deletes != 0 {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	per := func(v int64) float64 { return float64(v) / float64(n) }
	fmt.Fprintf(&b, "  rows written per workflow, by table (HOT: updates that added no index entry):\n")
	fmt.Fprintf(&b, "  %-24s %7s %7s %7s %7s %8s %14s\n", "table", "insert", "update", "HOT", "delete", "indexes", "index entries")
	for _, name := range names {
		w := c.tables[name]
		fmt.Fprintf(&b, "  %-24s %7.2f %7.2f %7.2f %7.2f %5d/%-2d %14.2f\n", name, per(w.inserts), per(w.updates), per(w.hotUpdates), per(w.deletes),
			w.indexes, w.partial, per(w.indexEntries()))
	}
	all, partial := c.indexEntries()
	fmt.Fprintf(&b, "  %7.2f  index entries written (indexes/partial: a partial index counted as if every row matched; at most %.2f of them partial)\n", per(all), per(partial))
	fmt.Fprintf(&b, "  %7.2f  pg_stat_database.xact_commit (a pool ping after a connection idled 1 s counts here too)\n", float64(c.commits)/float64(n))
	fmt.Fprintf(&b, "  %7.2f  pg_stat_database.xact_rollback (read-only transactions end with ROLLBACK)\n", float64(c.rollbacks)/float64(n))
	t.Log(b.String())
}

// shorten puts a statement on one line of at most max characters.
func shorten(q string, max int) string {
	q = strings.Join(strings.Fields(q), " ")
	if len(q) > max {
		q = q[:max-3] + "..."
	}
	return q
}

// claimObserver is the store with its poller claims counted.
type claimObserver struct {
	*postgres.Store // embedded as itself, so that its change feed is the server's too
	claims          atomic.Int64
	once            sync.Once
	claimed         chan struct{} // closed when the first claim returned
}

// TaskClaim claims through the store and records the call.
func (o *claimObserver) TaskClaim(ctx context.Context, p engine.TaskClaimParams) ([]*engine.Task, error) {
	tasks, err := o.Store.TaskClaim(ctx, p)
	o.claims.Add(1)
	o.once.Do(func() { close(o.claimed) })
	return tasks, err
}

// runEvents records the history events the engine commits, by run.
type runEvents struct {
	mu   sync.Mutex
	seen map[string]chan struct{} // run id + "/" + event type -> closed once seen
}

func newRunEvents() *runEvents { return &runEvents{seen: map[string]chan struct{}{}} }

func (r *runEvents) ch(key string) chan struct{} {
	c, ok := r.seen[key]
	if !ok {
		c = make(chan struct{})
		r.seen[key] = c
	}
	return c
}

// record is the engine's OnCommit hook.
func (r *runEvents) record(events []*engine.HistoryEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range events {
		c := r.ch(e.RunID + "/" + e.Type)
		select {
		case <-c:
		default:
			close(c)
		}
	}
}

// wait waits until run has committed an event of type typ.
func (r *runEvents) wait(ctx context.Context, t *testing.T, run, typ string) {
	t.Helper()
	r.mu.Lock()
	c := r.ch(run + "/" + typ)
	r.mu.Unlock()
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	select {
	case <-c:
	case <-wctx.Done():
		t.Fatalf("run %s: no %s event within 30s", run, typ)
	}
}

// shapeWorker is the HTTP worker of the three shapes, answering as
// cmd/iwf-bench's worker does.
type shapeWorker struct {
	url string
}

func newShapeWorker(t *testing.T) *shapeWorker {
	all := iwfapi.CommandWaitingTypeAllCompleted
	waitSignal := iwfapi.WorkflowStateStartResponse{CommandRequest: &iwfapi.CommandRequest{
		CommandWaitingType: &all,
		SignalCommands:     &[]iwfapi.SignalCommand{{CommandId: ptrTo("go"), SignalChannelName: "go"}},
	}}
	waitTimer := iwfapi.WorkflowStateStartResponse{CommandRequest: &iwfapi.CommandRequest{
		CommandWaitingType: &all,
		TimerCommands:      &[]iwfapi.TimerCommand{{CommandId: ptrTo("t"), DurationSeconds: ptrTo(int64(1))}},
	}}
	toS2 := iwfapi.WorkflowStateDecideResponse{StateDecision: &iwfapi.StateDecision{
		NextStates: &[]iwfapi.StateMovement{{StateId: "S2", StateOptions: &iwfapi.WorkflowStateOptions{SkipWaitUntil: ptrTo(true)}}},
	}}
	complete := iwfapi.WorkflowStateDecideResponse{StateDecision: &iwfapi.StateDecision{
		NextStates: &[]iwfapi.StateMovement{{StateId: engine.GracefulCompletingState}},
	}}
	reply := func(w http.ResponseWriter, v any) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/workflowState/start", func(w http.ResponseWriter, r *http.Request) {
		var req iwfapi.WorkflowStateStartRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		switch {
		case req.WorkflowType == shapeW2 && req.WorkflowStateId == "S1":
			reply(w, waitSignal)
		case req.WorkflowType == shapeW3 && req.WorkflowStateId == "S1":
			reply(w, waitTimer)
		default:
			http.Error(w, "unexpected waitUntil", http.StatusBadRequest)
		}
	})
	mux.HandleFunc("POST /api/v1/workflowState/decide", func(w http.ResponseWriter, r *http.Request) {
		var req iwfapi.WorkflowStateDecideRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		switch {
		case req.WorkflowType == shapeW1 && req.WorkflowStateId == "S1":
			reply(w, toS2)
		case req.WorkflowType == shapeW1 && req.WorkflowStateId == "S2",
			req.WorkflowType == shapeW2 && req.WorkflowStateId == "S1",
			req.WorkflowType == shapeW3 && req.WorkflowStateId == "S1":
			reply(w, complete)
		default:
			http.Error(w, "unexpected execute", http.StatusBadRequest)
		}
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &shapeWorker{url: srv.URL}
}

func ptrTo[T any](v T) *T { return &v }
