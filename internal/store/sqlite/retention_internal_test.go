package sqlite

import (
	"context"
	"strings"
	"testing"

	"github.com/iwf-server/iwf-server/engine"
)

// TestExpiredPlans: the retention of one workflow type reads the oldest
// runs of that type from an index in close order and stops at the limit;
// it must not read every run of the type and sort them (a temporary
// b-tree), which made a sweep of N runs of one type cost N squared.
func TestExpiredPlans(t *testing.T) {
	ctx := context.Background()
	s := openMigrated(t, true)
	for _, c := range []struct {
		name  string
		e     engine.RunExpiry
		index string
	}{
		{"one type", engine.RunExpiry{ClosedBefore: 1000, Types: []string{"T"}, Limit: 200}, "runs_search_type_order"},
		{"every type but some", engine.RunExpiry{ClosedBefore: 1000, ExceptTypes: []string{"T"}, Limit: 200}, "runs_closed_at"},
	} {
		q, args, err := expiredQuery("run_id", c.e)
		if err != nil {
			t.Fatal(err)
		}
		rows, err := s.r.QueryContext(ctx, "EXPLAIN QUERY PLAN "+q, args...)
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
	}
}
