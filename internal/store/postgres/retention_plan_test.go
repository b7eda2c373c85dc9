package postgres_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/store/postgres"
	"github.com/iwf-server/iwf-server/internal/store/postgres/pgtest"
	"github.com/iwf-server/iwf-server/internal/store/storesql"
)

// TestRunsDeletePlan: the deletion of a batch of expired runs reaches every
// table through its index on run_id (or workflow_id), never by a sequential
// scan: with IN (SELECT ... FROM doomed) the planner, unable to size the
// CTE, hashed it and scanned every table whole for every batch, so that a
// sweep cost the square of the store's size.
func TestRunsDeletePlan(t *testing.T) {
	ctx := context.Background()
	_, schema := pgtest.NewStoreWith(t)
	conn := pgtest.Conn(t, schema)
	// 20,000 closed runs, 2,000 of them with rows in every table the
	// deletion reads: a batch of 200 is a small part of each table, as in
	// a store that needs a sweep.
	tables := []string{"runs", "workflows", "executions", "history", "messages", "data_attributes",
		"search_attributes", "search_attribute_strings", "search_attribute_words", "tasks"}
	for _, q := range []string{
		// A run row holds its state (data), some 600 bytes in W5.
		`INSERT INTO runs (run_id, workflow_id, workflow_type, status, started_at, closed_at, data)
			SELECT 'r' || i, 'w' || i, 'T', 'COMPLETED', i, i + 1, convert_to(repeat(md5(i::text), 20), 'UTF8')
			FROM generate_series(1, 20000) i`,
		`INSERT INTO workflows (workflow_id, current_run_id) SELECT 'w' || i, 'r' || i FROM generate_series(1, 20000) i`,
		`INSERT INTO executions (run_id, execution_id, state_id, status, created_at)
			SELECT 'r' || i, 'S1-' || j, 'S1', 'COMPLETED', i FROM generate_series(1, 2000) i, generate_series(1, 2) j`,
		`INSERT INTO history (run_id, at, type) SELECT 'r' || i, i, 'x' FROM generate_series(1, 2000) i, generate_series(1, 3) j`,
		`INSERT INTO messages (run_id, kind, channel, created_at) SELECT 'r' || i, 1, 'c', i FROM generate_series(1, 2000) i`,
		`INSERT INTO data_attributes (run_id, key) SELECT 'r' || i, 'k' FROM generate_series(1, 2000) i`,
		`INSERT INTO search_attributes (run_id, key, value_type, int_value) SELECT 'r' || i, 'k', 'INT', i FROM generate_series(1, 2000) i`,
		`INSERT INTO search_attribute_strings (run_id, key, pos, value) SELECT 'r' || i, 'a', 0, 'v' FROM generate_series(1, 2000) i`,
		`INSERT INTO search_attribute_words (run_id, key, word) SELECT 'r' || i, 't', 'w' FROM generate_series(1, 2000) i`,
		`INSERT INTO tasks (run_id, workflow_id, kind, due_at, attempt) SELECT 'r' || i, 'w' || i, 'TIMER', i, 0 FROM generate_series(1, 2000) i`,
		`ANALYZE ` + strings.Join(tables, ", "),
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%.60s: %v", q, err)
		}
	}
	// A batch of the engine's size (engine.DefaultSweepBatch).
	var batch []string
	for i := range 200 {
		batch = append(batch, fmt.Sprintf("r%d", 1000+i))
	}
	rows, err := conn.Query(ctx, `EXPLAIN `+postgres.SQLRunsDelete, batch)
	if err != nil {
		t.Fatal(err)
	}
	var plan []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, line)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	p := strings.Join(plan, "\n")
	for _, table := range tables {
		if strings.Contains(p, "Seq Scan on "+table+" ") || strings.HasSuffix(p, "Seq Scan on "+table) {
			t.Errorf("the deletion scans %s whole:\n%s", table, p)
		}
	}
}

// TestRunsExpiredPlan: the reads of expired runs stop at their limit on an
// index in close order: the runs of one type on runs_search_type_order, the
// runs of every type but some on runs_closed_at, whose partial predicate
// (closed_at <> 0) the statement's closed_at > 0 implies. Without that the
// read sorts every closed run for every batch.
func TestRunsExpiredPlan(t *testing.T) {
	ctx := context.Background()
	_, schema := pgtest.NewStoreWith(t)
	conn := pgtest.Conn(t, schema)
	for _, q := range []string{
		`INSERT INTO runs (run_id, workflow_id, workflow_type, status, started_at, closed_at)
			SELECT 'r' || i, 'w' || i, 'T' || (i % 10), CASE WHEN i % 4 = 0 THEN 'RUNNING' ELSE 'COMPLETED' END, i,
				CASE WHEN i % 4 = 0 THEN 0 ELSE i + 1 END
			FROM generate_series(1, 20000) i`,
		`ANALYZE runs`,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%.60s: %v", q, err)
		}
	}
	for _, c := range []struct {
		name  string
		e     engine.RunExpiry
		index string
	}{
		{"one type", engine.RunExpiry{ClosedBefore: 15000, Types: []string{"T1"}, Limit: 200}, "runs_search_type_order"},
		{"every type but some", engine.RunExpiry{ClosedBefore: 15000, ExceptTypes: []string{"T1"}, Limit: 200}, "runs_closed_at"},
		{"every type", engine.RunExpiry{ClosedBefore: 15000, ExceptTypes: []string{}, Limit: 200}, "runs_closed_at"},
	} {
		q, args := storesql.Expired(storesql.PostgreSQL, "run_id", c.e)
		rows, err := conn.Query(ctx, `EXPLAIN `+q, args...)
		if err != nil {
			t.Fatal(err)
		}
		var plan []string
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, line)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		p := strings.Join(plan, "\n")
		if !strings.Contains(p, c.index) || strings.Contains(p, "Sort") {
			t.Errorf("%s: plan\n%s\nwant %s without a sort", c.name, p, c.index)
		}
	}
}
