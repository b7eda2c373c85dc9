package sqlite

import (
	"context"
	"strings"
	"testing"
)

// TestStateStatsPlans: the reads of live state executions take the open
// runs from a search-order index in start order (no temporary b-tree:
// nothing sorted) and each run's executions by the primary key, never
// scanning runs or executions whole.
func TestStateStatsPlans(t *testing.T) {
	ctx := context.Background()
	s := openMigrated(t, true)
	for _, c := range []struct {
		name, sql string
		args      []any
		index     string
	}{
		{"one type", statsSQL.OfType, []any{"T", 101}, "runs_search_type_order"},
		{"every type", statsSQL.All, []any{101}, "runs_search_order"},
		{"waiting of one type", statsSQL.WaitingOfType, []any{"T", 100, 1001}, "runs_search_type_order"},
	} {
		rows, err := s.r.QueryContext(ctx, "EXPLAIN QUERY PLAN "+c.sql, c.args...)
		if err != nil {
			t.Fatal(err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		p := strings.Join(plan, "; ")
		if !strings.Contains(p, c.index) || strings.Contains(p, "TEMP B-TREE") {
			t.Errorf("%s: plan %q, want %s without a temporary b-tree", c.name, p, c.index)
		}
		for _, table := range []string{"runs", "executions", "tasks"} {
			if strings.Contains(p, "SCAN "+table) && !strings.Contains(p, "SCAN "+table+" USING") {
				t.Errorf("%s: plan %q scans %s whole", c.name, p, table)
			}
		}
	}
}
