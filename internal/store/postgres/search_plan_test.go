package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/store/postgres/pgtest"
	"github.com/iwf-server/iwf-server/internal/store/searchsql"
	"github.com/iwf-server/iwf-server/internal/store/storetest"
	"github.com/iwf-server/iwf-server/search"
)

// explained is what EXPLAIN (ANALYZE, SUMMARY, FORMAT JSON) says of one
// statement.
type explained struct {
	Plan      planNode `json:"Plan"`
	Planning  float64  `json:"Planning Time"`  // ms
	Execution float64  `json:"Execution Time"` // ms
}

type planNode struct {
	NodeType string     `json:"Node Type"`
	Parent   string     `json:"Parent Relationship"`
	Relation string     `json:"Relation Name"`
	Plans    []planNode `json:"Plans"`
}

// joins counts the join nodes of the statement's own plan tree: the
// joins the planner had to order. SubPlans and InitPlans are planned on
// their own and are not counted (nor their joins).
func (n planNode) joins() int {
	c := 0
	switch n.NodeType {
	case "Nested Loop", "Hash Join", "Merge Join":
		c = 1
	}
	for _, p := range n.Plans {
		if p.Parent == "SubPlan" || p.Parent == "InitPlan" {
			continue
		}
		c += p.joins()
	}
	return c
}

// subPlans counts the SubPlans of the plan (at any depth).
func (n planNode) subPlans() int {
	c := 0
	for _, p := range n.Plans {
		if p.Parent == "SubPlan" {
			c++
		}
		c += p.subPlans()
	}
	return c
}

// explainStatement runs EXPLAIN (ANALYZE, SUMMARY, FORMAT JSON) of a
// compiled search.
func explainStatement(ctx context.Context, conn *pgx.Conn, st *searchsql.Statement) (explained, error) {
	var raw []byte
	if err := conn.QueryRow(ctx, "EXPLAIN (ANALYZE, SUMMARY, FORMAT JSON) "+st.SQL, st.Args...).Scan(&raw); err != nil {
		return explained{}, err
	}
	var out []explained
	if err := json.Unmarshal(raw, &out); err != nil || len(out) != 1 {
		return explained{}, fmt.Errorf("EXPLAIN output %.200s: %v", raw, err)
	}
	return out[0], nil
}

// TestSearchPlanningBounded checks that the number of joins PostgreSQL
// orders for a search does not grow with its number of conditions: a
// search of 10 conditions, of 50, of search.MaxPredicates and the worst
// the limits allow (storetest.WorstSearchText, with the TEXT words) all
// plan at most searchsql.PostgreSQLJoinable joins (one per joinable
// subquery) over the runs, the other conditions being per-run probes
// (SubPlans) that are planned one by one, applied to the sorted runs
// under the LIMIT (so that a page of matching runs stops the search).
// Join order search is what made planning grow steeply (exponentially up
// to the collapse limits, then with every further join); SubPlans add a
// constant each. The assertion is on the plan's shape, not on time, so
// that it holds on a loaded machine; the times are logged (go test -v)
// and recorded in docs/search.md.
//
// With IWF_SEARCH_PLAN_COMPARE=1 it also logs the times of the earlier
// shape (every subquery joinable), which takes seconds to plan.
func TestSearchPlanningBounded(t *testing.T) {
	s, schema := pgtest.NewStoreWith(t)
	conn := pgtest.Conn(t, schema)
	ctx := context.Background()
	runs := 3000
	storetest.FillSearchLimitRuns(t, s, runs)
	if _, err := conn.Exec(ctx, "ANALYZE"); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		text string
		want int // runs matched, all of them on one page
	}{
		{"10 conditions", storetest.NotEqualSearchText(10), runs},
		{"50 conditions", storetest.NotEqualSearchText(50), runs},
		{fmt.Sprintf("%d conditions", search.MaxPredicates), storetest.NotEqualSearchText(search.MaxPredicates), runs},
		{"worst allowed", storetest.WorstSearchText(), runs / 10},
		{"none matches", storetest.NotEqualSearchText(search.MaxPredicates-1) + " AND CustomStringField = 'nope'", 0},
		{"ORs", storetest.OrSearchText(search.MaxPredicates), runs / 10},
	}
	compare := os.Getenv("IWF_SEARCH_PLAN_COMPARE") == "1"
	for _, c := range cases {
		q := storetest.CompileSearchText(t, c.text, runs)
		for _, page := range []int{10, runs} {
			q.Limit = page
			st, err := searchsql.Compile(q, searchsql.PostgreSQL, nil)
			if err != nil {
				t.Fatal(err)
			}
			ex, err := explainStatement(ctx, conn, st)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			t.Logf("%s (%d bytes), page of %d: planning %.1f ms, execution %.1f ms, %d joins, %d SubPlans",
				c.name, len(c.text), page, ex.Planning, ex.Execution, ex.Plan.joins(), ex.Plan.subPlans())
			if j := ex.Plan.joins(); j > searchsql.PostgreSQLJoinable {
				t.Errorf("%s: the plan has %d joins, want at most %d", c.name, j, searchsql.PostgreSQLJoinable)
			}
			// The probes run on the sorted runs, and stop at the page's
			// end: no sort above them. (Searches without a top-level AND
			// of subqueries have one level.)
			split := strings.Contains(st.SQL, "OFFSET 0) r")
			if top := ex.Plan; split && (top.NodeType != "Limit" || len(top.Plans) != 1 || top.Plans[0].NodeType != "Subquery Scan") {
				t.Errorf("%s: the plan is %s over %v, want a Limit over the Subquery Scan", c.name, top.NodeType, top.Plans)
			}
			if compare {
				old := searchsql.PostgreSQL
				old.Joinable = 0
				st, err := searchsql.Compile(q, old, nil)
				if err != nil {
					t.Fatal(err)
				}
				start := time.Now()
				ex, err := explainStatement(ctx, conn, st)
				if err != nil {
					t.Fatalf("%s, earlier shape: %v", c.name, err)
				}
				t.Logf("  earlier shape: planning %.1f ms, execution %.1f ms, %d joins (%v in all)",
					ex.Planning, ex.Execution, ex.Plan.joins(), time.Since(start).Round(time.Millisecond))
			}
		}
		// The results are right: every matching run, in one page.
		q.Limit = runs + 1
		var page *search.Page
		err := s.View(ctx, func(ctx context.Context, tx engine.ReadTx) error {
			var err error
			page, err = tx.RunSearch(ctx, q)
			return err
		})
		if err != nil || len(page.Runs) != c.want || page.Cursor != "" {
			t.Fatalf("%s: %d runs, cursor %q, %v; want %d runs", c.name, len(page.Runs), page.Cursor, err, c.want)
		}
	}
}
