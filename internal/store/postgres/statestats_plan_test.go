package postgres_test

import (
	"context"
	"strings"
	"testing"

	"github.com/iwf-server/iwf-server/internal/store/postgres/pgtest"
	"github.com/iwf-server/iwf-server/internal/store/storesql"
)

// TestStateStatsPlans: the reads of live state executions (workflow/stats
// and iwf_state_executions) take the open runs from a search-order index
// in start order and stop at their limit, and reach each run's executions
// and tasks by their index on run_id: no table is scanned whole and the
// runs are not sorted. On a store of many closed runs, a read that scanned
// runs or executions would cost the whole store for every request (and
// every scrape).
func TestStateStatsPlans(t *testing.T) {
	ctx := context.Background()
	_, schema := pgtest.NewStoreWith(t)
	conn := pgtest.Conn(t, schema)
	for _, q := range []string{
		// 40,000 runs of 10 types, one in 20 open; each with three
		// executions, one live for the open runs, and a call's task.
		`INSERT INTO runs (run_id, workflow_id, workflow_type, status, started_at, closed_at)
			SELECT 'r' || i, 'w' || i, 'T' || (i % 10), CASE WHEN i % 20 = 0 THEN 'RUNNING' ELSE 'COMPLETED' END, i,
				CASE WHEN i % 20 = 0 THEN 0 ELSE i + 1 END
			FROM generate_series(1, 40000) i`,
		`INSERT INTO executions (run_id, execution_id, state_id, status, created_at)
			SELECT 'r' || i, 'S' || j || '-1', 'S' || j, CASE WHEN i % 20 = 0 AND j = 3 THEN 'WAITING' ELSE 'COMPLETED' END, i
			FROM generate_series(1, 40000) i, generate_series(1, 3) j`,
		`INSERT INTO tasks (run_id, workflow_id, execution_id, kind, due_at, attempt)
			SELECT 'r' || i, 'w' || i, 'S3-1', 'EXECUTE', i, 1 FROM generate_series(1, 40000, 20) i`,
		`ANALYZE runs, executions, tasks`,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%.60s: %v", q, err)
		}
	}
	st := storesql.StateStatsStatements(storesql.PostgreSQL)
	for _, c := range []struct {
		name, sql string
		args      []any
		index     string
	}{
		{"one type", st.OfType, []any{"T3", 101}, "runs_search_type_order"},
		{"every type", st.All, []any{101}, "runs_search_order"},
		{"waiting of one type", st.WaitingOfType, []any{"T3", 100, 1001}, "runs_search_type_order"},
	} {
		rows, err := conn.Query(ctx, `EXPLAIN `+c.sql, c.args...)
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
		if !strings.Contains(p, c.index) {
			t.Errorf("%s: the open runs are not read from %s:\n%s", c.name, c.index, p)
		}
		for _, table := range []string{"runs", "executions", "tasks"} {
			if strings.Contains(p, "Seq Scan on "+table+" ") || strings.HasSuffix(p, "Seq Scan on "+table) {
				t.Errorf("%s: scans %s whole:\n%s", c.name, table, p)
			}
		}
		if strings.Contains(p, "Sort") {
			t.Errorf("%s: sorts:\n%s", c.name, p)
		}
	}
}
