package storetest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/store/searchsql"
	"github.com/iwf-server/iwf-server/search"
)

// The attributes of the limit queries: saKeyword, saInt and this TEXT key.
const saLimitText = "CustomStringField"

// limitTypes resolves the attribute names of the limit queries.
type limitTypes struct{}

func (limitTypes) Resolve(_ context.Context, name string) (search.Field, error) {
	switch name {
	case saKeyword:
		return field(name, search.Keyword), nil
	case saInt:
		return field(name, search.Int), nil
	case saLimitText:
		return field(name, search.Text), nil
	}
	return search.Field{}, search.ErrUnknownAttribute
}

// CompileSearchText parses and compiles a query over the attributes of
// FillSearchLimitRuns (CustomKeywordField KEYWORD, CustomIntField INT,
// CustomStringField TEXT), with a page of limit runs.
func CompileSearchText(t testing.TB, text string, limit int) *search.Query {
	t.Helper()
	pq, err := search.Parse(text)
	if err != nil {
		t.Fatalf("parse %.80q…: %v", text, err)
	}
	q, err := search.Compile(context.Background(), pq, limitTypes{}, base)
	if err != nil {
		t.Fatalf("compile %.80q…: %v", text, err)
	}
	q.Limit = limit
	return q
}

// NotEqualSearchText is a query of n predicates, every one in the
// top-level AND, that every run of FillSearchLimitRuns passes:
// CustomKeywordField != 'absent-i' and CustomIntField != -i by turns.
// Each compiles to subqueries (two for the KEYWORD one), the shape whose
// planning grew steeply with n on PostgreSQL.
func NotEqualSearchText(n int) string {
	parts := make([]string, n)
	for i := range parts {
		if i%2 == 0 {
			parts[i] = fmt.Sprintf("%s != 'absent-%d'", saKeyword, i)
		} else {
			parts[i] = fmt.Sprintf("%s != %d", saInt, -i)
		}
	}
	return strings.Join(parts, " AND ")
}

// OrSearchText is a query of n predicates joined by OR, on a KEYWORD and
// an INT attribute by turns: CustomKeywordField = 'k-0' OR CustomIntField
// = 1000 OR …; the runs of FillSearchLimitRuns whose number is a multiple
// of 10 match it (when n is at least 20).
func OrSearchText(n int) string {
	parts := make([]string, n)
	for i := range parts {
		if i%2 == 0 {
			parts[i] = fmt.Sprintf("%s = 'k-%d'", saKeyword, 10*(i/2)%100)
		} else {
			parts[i] = fmt.Sprintf("%s = %d", saInt, 1000+i)
		}
	}
	return strings.Join(parts, " OR ")
}

// WorstSearchText is the most expensive query the limits allow, as far as
// the store's planning goes: search.MaxPredicates - 4 predicates of
// NotEqualSearchText and 4 TEXT predicates whose literals have
// search.MaxQueryTextWords words in all (w0 … w99), every one of them in
// the top-level AND. The runs of FillSearchLimitRuns whose number is a
// multiple of 10 match it.
func WorstSearchText() string {
	parts := []string{NotEqualSearchText(search.MaxPredicates - 4)}
	for w := 0; w < search.MaxQueryTextWords; w += search.MaxTextWords {
		var ws []string
		for i := w; i < w+search.MaxTextWords && i < search.MaxQueryTextWords; i++ {
			ws = append(ws, fmt.Sprintf("w%d", i))
		}
		parts = append(parts, fmt.Sprintf("%s = '%s'", saLimitText, strings.Join(ws, " ")))
	}
	return strings.Join(parts, " AND ")
}

// FillSearchLimitRuns stores n runs, lim-00000 … (in transactions of 500),
// with CustomKeywordField k-(i mod 100), CustomIntField i mod 1000 and a
// CustomStringField of the words w0 … w99 when i is a multiple of 10, of
// four of the words w100 … w299 otherwise; one run in ten is open.
func FillSearchLimitRuns(t testing.TB, s engine.Store, n int) {
	t.Helper()
	all := make([]string, search.MaxQueryTextWords)
	for i := range all {
		all[i] = fmt.Sprintf("w%d", i)
	}
	for lo := 0; lo < n; lo += 500 {
		hi := min(n, lo+500)
		err := s.Update(context.Background(), func(ctx context.Context, tx engine.Tx) error {
			for i := lo; i < hi; i++ {
				r := &engine.Run{
					RunID:        fmt.Sprintf("lim-%05d", i),
					WorkflowID:   fmt.Sprintf("lim-wf-%d", i),
					WorkflowType: fmt.Sprintf("Type%d", i%7),
					Status:       engine.RunRunning,
					StartedAt:    base.Add(time.Duration(i) * time.Second),
					Data:         []byte(`{}`),
				}
				if i%10 != 3 {
					r.Status = engine.RunCompleted
					r.ClosedAt = r.StartedAt.Add(time.Duration(1+i%3600) * time.Second)
				}
				if err := tx.RunInsert(ctx, r); err != nil {
					return err
				}
				text := strings.Join(all, " ")
				if i%10 != 0 {
					text = fmt.Sprintf("w%d w%d w%d w%d", 100+i%200, 100+(i/2)%200, 100+(i/3)%200, 100+(i/5)%200)
				}
				if err := tx.SearchAttributeUpsert(ctx, r.RunID, []*engine.SearchAttribute{
					kwAttr(saKeyword, fmt.Sprintf("k-%d", i%100)),
					intAttr(saInt, int64(i%1000)),
					textAttr(saLimitText, text),
				}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatalf("FillSearchLimitRuns: %v", err)
		}
	}
}

// padding returns n conditions that every run passes (IS NULL of
// attributes no run has), on the three tables a condition can read:
// search_attributes, search_attribute_strings (KEYWORD) and, through
// search_attributes, TEXT.
func padding(n int) []search.Expr {
	types := []search.ValueType{search.Int, search.Keyword, search.Text}
	out := make([]search.Expr, n)
	for i := range out {
		out[i] = negate(cond(field(fmt.Sprintf("Nope%d", i), types[i%len(types)]), search.Present))
	}
	return out
}

// andTerms returns the terms of e as a top-level AND has them (e itself
// unless it is an And; none for nil).
func andTerms(e search.Expr) []search.Expr {
	switch e := e.(type) {
	case nil:
		return nil
	case *search.And:
		return e.Terms
	}
	return []search.Expr{e}
}

// testSearchManyConditions runs the filters of testSearchFilters and the
// orders of testSearchOrders in searches with more conditions than a store
// may plan as joins (the PostgreSQL store plans searchsql.PostgreSQLJoinable
// subqueries as joins and probes the other conditions run by run): each
// filter is ANDed before and after conditions that every run passes, so
// that it is written among the joined conditions and among the probed
// ones; each order is read through a filter of such conditions, in pages
// of every size. Results and orders are those of the plain searches.
func testSearchManyConditions(t *testing.T, s engine.Store) {
	searchFixture(t, s)
	n := searchsql.PostgreSQLJoinable + 3
	for _, c := range searchFilterCases() {
		t.Run(c.name, func(t *testing.T) {
			after := &search.And{Terms: append(padding(n), andTerms(c.filter)...)}
			got := sortedIDs(searchAll(t, s, after, search.Order{}, 100))
			equal(t, "runs, filter after the others", got, runIDs(c.want...))
		})
	}
	for _, c := range searchFilterCases() {
		t.Run(c.name+" first", func(t *testing.T) {
			before := &search.And{Terms: append(andTerms(c.filter), padding(n)...)}
			got := sortedIDs(searchAll(t, s, before, search.Order{}, 100))
			equal(t, "runs, filter before the others", got, runIDs(c.want...))
		})
	}
	for _, c := range searchOrderCases() {
		t.Run(c.name, func(t *testing.T) {
			for _, limit := range []int{100, 3, 1} {
				got := searchAll(t, s, &search.And{Terms: padding(n)}, c.order, limit)
				equal(t, fmt.Sprintf("order with page size %d", limit), got, c.want)
			}
		})
	}
	// A filter and a custom order together, the filter probed.
	filter := &search.And{Terms: append(padding(n), cond(builtin(search.BuiltinWorkflowType), search.Eq, "TypeA"), cond(field(saDouble, search.Double), search.Gt, 0.5))}
	got := searchAll(t, s, filter, search.Order{Field: field(saDouble, search.Double), Desc: true}, 1)
	equal(t, "filtered custom order", got, []string{"run-6", "run-2"})
}

// testSearchLimits runs queries at the limits of the language (as
// search.Parse and search.Compile let them through) over the runs of
// FillSearchLimitRuns, and checks their results.
func testSearchLimits(t *testing.T, s engine.Store) {
	const n = 200
	FillSearchLimitRuns(t, s, n)
	runsWhere := func(match func(i int) bool) []string {
		out := []string{}
		for i := 0; i < n; i++ {
			if match(i) {
				out = append(out, fmt.Sprintf("lim-%05d", i))
			}
		}
		return out
	}
	list := func(count int, value func(i int) string) string {
		vs := make([]string, count)
		for i := range vs {
			vs[i] = value(i)
		}
		return "(" + strings.Join(vs, ", ") + ")"
	}
	// MaxDepth levels: NOT and "(" by turns, an even number of NOTs.
	nested := strings.Repeat("NOT (", search.MaxDepth/2) + saInt + " = 5" + strings.Repeat(")", search.MaxDepth/2)
	ors := make([]string, search.MaxPredicates)
	for i := range ors {
		ors[i] = fmt.Sprintf("%s = %d", saInt, i)
	}
	cases := []struct {
		name  string
		text  string
		match func(i int) bool
	}{
		{"MaxPredicates conditions", NotEqualSearchText(search.MaxPredicates), func(int) bool { return true }},
		{"the worst allowed", WorstSearchText(), func(i int) bool { return i%10 == 0 }},
		{"MaxValues in one IN", saInt + " IN " + list(search.MaxValues, func(i int) string { return fmt.Sprint(2 * i) }),
			func(i int) bool { return i%2 == 0 }},
		{"MaxValues in one NOT IN", saKeyword + " NOT IN " + list(search.MaxValues, func(i int) string { return fmt.Sprintf("'k-%d'", i%50+100*(i/50)) }),
			func(i int) bool { return i%100 >= 50 }},
		{"MaxDepth levels", nested, func(i int) bool { return i == 5 }},
		{"MaxPredicates ORs", strings.Join(ors, " OR "), func(i int) bool { return i < search.MaxPredicates }},
		{"TEXT IN of MaxQueryTextWords words",
			saLimitText + " IN ('w0 w1 w2 w3 w4 w5 w6 w7 w8 w9 w10 w11 w12 w13 w14 w15 w16 w17 w18 w19 w20 w21 w22 w23 w24 w25 w26 w27 w28 w29 w30 w31', " +
				list(search.MaxQueryTextWords-search.MaxTextWords, func(i int) string { return fmt.Sprintf("'w%d'", 100+i) })[1:],
			func(i int) bool {
				if i%10 == 0 {
					return true
				}
				for _, w := range []int{i % 200, (i / 2) % 200, (i / 3) % 200, (i / 5) % 200} {
					if w < search.MaxQueryTextWords-search.MaxTextWords {
						return true
					}
				}
				return false
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			q := CompileSearchText(t, c.text, n)
			want := runsWhere(c.match)
			equal(t, "runs in one page", sortedIDs(searchAll(t, s, q.Filter, q.Order, n+1)), want)
			equal(t, "runs in pages of 7", sortedIDs(searchAll(t, s, q.Filter, q.Order, 7)), want)
		})
	}
}
