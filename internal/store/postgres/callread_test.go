package postgres_test

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/iwf-server/iwf-server/internal/store/postgres"
	"github.com/iwf-server/iwf-server/internal/store/postgres/pgtest"
)

// TestCallReadPlan: the generic plan of the call read, the one a prepared
// statement settles on, is one Append of the five tables' scans, without a
// subquery scan over a branch (which a column type differing from the
// compound's would put there, to project each row again).
func TestCallReadPlan(t *testing.T) {
	ctx := context.Background()
	_, schema := pgtest.NewStoreWith(t)
	conn := pgtest.Conn(t, schema)
	for _, q := range []string{
		`SET plan_cache_mode = force_generic_plan`,
		`PREPARE call_read(text, text) AS ` + postgres.CallReadSQL,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	rows, err := conn.Query(ctx, `EXPLAIN (COSTS OFF) EXECUTE call_read('run', 'execution')`)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	plan := strings.Join(lines, "\n")
	if !strings.HasPrefix(lines[0], "Append") || strings.Contains(plan, "Subquery Scan") {
		t.Fatalf("want one Append of scans, without a subquery scan; the plan:\n%s", plan)
	}
	scanned := map[string]bool{}
	for _, l := range lines {
		if m := scanOn.FindStringSubmatch(l); m != nil {
			scanned[m[1]] = true
		}
	}
	for _, table := range []string{"runs", "executions", "data_attributes", "search_attributes", "search_attribute_strings"} {
		if !scanned[table] {
			t.Errorf("the plan scans no %s:\n%s", table, plan)
		}
	}
}

// scanOn finds the table of a scan node in a line of EXPLAIN's text.
var scanOn = regexp.MustCompile(`Scan(?: using \w+)? on (\w+)`)
