package main

// External storage (--external-storage-url) in the benchmark.
//
//	W1x  W1 @-inflight on a server with external storage on, at the default
//	     threshold (64 KiB): W1's payloads are all below it, so nothing goes
//	     out. Its state executions/s are checked against W1 @-inflight's of
//	     the same invocation (at least 0.95 of them).
//	W6   S1 -> S2 -> graceful completion, both states skip waitUntil and
//	     each execute answer upserts a data attribute of 1 MiB (random
//	     characters of a base64 alphabet, a JSON string), w6InFlight in
//	     flight; the server keeps both attributes in its database.
//	W6x  W6 with external storage on (default threshold): the database
//	     keeps references, the file:// store the attributes. Target: at
//	     most 10 KiB of database per workflow.
//
// External storage is a local directory of the run (file://), so the runs
// measure what the server does to offload, not a network.
//
// Every closed-loop run also measures how much its database grew per
// workflow: from after a first batch of workflows, one per slot in flight
// (so that each table's and index's first pages are not shared out over
// the run's workflows), to the end of the run, over the workflows
// completed in between: SQLite page_count × page_size (the file as a
// checkpoint leaves it, read through a query-only connection while the
// server runs), PostgreSQL pg_total_relation_size (tables with their
// indexes and TOAST) summed over the database's tables.

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/jackc/pgx/v5"
)

const (
	// w6InFlight is W6's and W6x's number of workflows in flight.
	w6InFlight = 16
	// w6AttrBytes is the length of the data of each W6 attribute.
	w6AttrBytes = 1 << 20
	// offloadW1Share is the least share of W1's state executions/s that
	// W1x (external storage on, nothing over the threshold) keeps.
	offloadW1Share = 0.95
	// offloadDBKiB bounds W6x's database bytes per workflow, in KiB.
	offloadDBKiB = 10
	// extStoreID is the external store's id in the runs' references.
	extStoreID = "local"
)

// offloaded reports whether a workload runs with external storage on.
func offloaded(workload string) bool { return workload == "W1x" || workload == "W6x" }

// baseWorkload is the workload whose workflows (and -n count) an
// external-storage workload runs.
func baseWorkload(workload string) string {
	switch workload {
	case "W1x":
		return "W1"
	case "W6x":
		return "W6"
	}
	return workload
}

// offloadArgs are the server flags that turn external storage on, into
// dir (created here).
func offloadArgs(dir string) []string {
	return []string{"--external-storage-url", extStoreID + "=file://" + dir}
}

// w6Answers returns the worker's execute answers of W6's two states: S1
// upserts attribute blob1 and moves to S2, S2 upserts blob2 and completes
// the workflow. Each attribute's data is a JSON string of w6AttrBytes
// bytes, quotes included, of random characters: neither SQLite nor
// PostgreSQL (pglz) can compress it much.
func w6Answers() (s1, s2 []byte) {
	rng := rand.New(rand.NewPCG(6, 6))
	value := func() *iwfapi.EncodedObject {
		const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
		b := make([]byte, w6AttrBytes)
		b[0], b[len(b)-1] = '"', '"'
		for i := 1; i < len(b)-1; i++ {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		return &iwfapi.EncodedObject{Encoding: ptr("json"), Data: ptr(string(b))}
	}
	skip := &iwfapi.WorkflowStateOptions{SkipWaitUntil: ptr(true)}
	s1 = mustJSON(iwfapi.WorkflowStateDecideResponse{
		UpsertDataObjects: &[]iwfapi.KeyValue{{Key: ptr("blob1"), Value: value()}},
		StateDecision: &iwfapi.StateDecision{
			NextStates: &[]iwfapi.StateMovement{{StateId: stateS2, StateOptions: skip}},
		},
	})
	s2 = mustJSON(iwfapi.WorkflowStateDecideResponse{
		UpsertDataObjects: &[]iwfapi.KeyValue{{Key: ptr("blob2"), Value: value()}},
		StateDecision:     &iwfapi.StateDecision{NextStates: &[]iwfapi.StateMovement{{StateId: gracefulComplete}}},
	})
	return s1, s2
}

// databaseBytes returns the size of the store db (a --db URL) as the
// server leaves it: SQLite's page_count × page_size, PostgreSQL's
// pg_total_relation_size summed over the database's own tables.
func databaseBytes(ctx context.Context, db string) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if path, ok := strings.CutPrefix(db, "sqlite://"); ok {
		// query_only: this connection never writes, so it never
		// checkpoints either; it reads the WAL the server writes.
		conn, err := sql.Open("sqlite", path+"?_pragma=query_only(1)&_pragma=busy_timeout(10000)")
		if err != nil {
			return 0, err
		}
		defer conn.Close()
		var n int64
		if err := conn.QueryRowContext(ctx, "SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()").Scan(&n); err != nil {
			return 0, fmt.Errorf("sqlite page_count: %w", err)
		}
		return n, nil
	}
	conn, err := pgx.Connect(ctx, withoutPoolParams(db))
	if err != nil {
		return 0, err
	}
	defer conn.Close(context.Background())
	var n int64
	err = conn.QueryRow(ctx, `SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint
		FROM pg_class c JOIN pg_namespace s ON s.oid = c.relnamespace
		WHERE c.relkind IN ('r', 'm') AND s.nspname NOT IN ('pg_catalog', 'information_schema')
		AND s.nspname NOT LIKE 'pg_toast%'`).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("pg_total_relation_size: %w", err)
	}
	return n, nil
}

// settledDatabaseBytes waits until the store's size stops changing (the
// last answers of a run commit a moment after the worker saw them), at
// most 5 s, and returns it.
func settledDatabaseBytes(ctx context.Context, db string) (int64, error) {
	last, err := databaseBytes(ctx, db)
	if err != nil {
		return 0, err
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(300 * time.Millisecond):
		}
		n, err := databaseBytes(ctx, db)
		if err != nil {
			return 0, err
		}
		if n == last {
			break
		}
		last = n
	}
	return last, nil
}

// dirBytes returns the bytes and the number of the objects a file:// store
// holds under dir (its .attrs files, the driver's metadata, left out).
func dirBytes(dir string) (bytes int64, files int64, err error) {
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(path, ".attrs") {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		bytes += info.Size()
		files++
		return nil
	})
	return bytes, files, err
}

// dbPerWorkflow returns the database's growth per workflow the run
// completed, in bytes; NaN when it was not measured.
func (r *result) dbPerWorkflow() float64 {
	if r.dbBefore < 0 || r.dbAfter < 0 || r.ran <= 0 {
		return math.NaN()
	}
	return float64(r.dbAfter-r.dbBefore) / float64(r.ran)
}

// fmtBytes prints a byte count: "812 B", "5.3 KiB", "2.07 MiB".
func fmtBytes(b float64) string {
	switch a := math.Abs(b); {
	case math.IsNaN(b):
		return "-"
	case a < 1024:
		return fmt.Sprintf("%.0f B", b)
	case a < 1<<20:
		return fmt.Sprintf("%.1f KiB", b/1024)
	default:
		return fmt.Sprintf("%.2f MiB", b/(1<<20))
	}
}

// offloadSummary compares a store's runs with external storage on with the
// same workload's runs with it off: W1x with W1 at the same in-flight count,
// W6x with W6. It returns "" when no such pair ran.
func offloadSummary(sr *storeReport) string {
	find := func(workload string, inFlight int) *result {
		for _, r := range sr.results {
			if r.workload == workload && r.inFlight == inFlight {
				return r
			}
		}
		return nil
	}
	var parts []string
	for _, on := range sr.results {
		if !offloaded(on.workload) {
			continue
		}
		off := find(baseWorkload(on.workload), on.inFlight)
		if off == nil || off.throughput() == 0 || off.lat.p50 == 0 {
			continue
		}
		p := fmt.Sprintf("%s / %s: states/s %.2f, p50 %.2f", on.name(), off.name(),
			on.throughput()/off.throughput(), float64(on.lat.p50)/float64(off.lat.p50))
		if a, b := on.dbPerWorkflow(), off.dbPerWorkflow(); !math.IsNaN(a) && !math.IsNaN(b) && b > 0 {
			p += fmt.Sprintf(", database bytes per workflow %s / %s = %.3f", fmtBytes(a), fmtBytes(b), a/b)
		}
		parts = append(parts, p)
	}
	if len(parts) == 0 {
		return ""
	}
	return "external storage on / off: " + strings.Join(parts, "; ")
}
