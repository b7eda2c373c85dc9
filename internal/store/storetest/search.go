package storetest

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/search"
)

// searchTests are the conformance tests of ReadTx.RunSearch and
// SearchAttributeTypeOf; Run runs them with the others.
var searchTests = []struct {
	name string
	fn   func(t *testing.T, s engine.Store)
}{
	{"SearchAttributeTypeOf", testSearchAttributeTypeOf},
	{"SearchFilters", testSearchFilters},
	{"SearchDefaultOrder", testSearchDefaultOrder},
	{"SearchOrders", testSearchOrders},
	{"SearchPaging", testSearchPaging},
	{"SearchPagingAcrossWrites", testSearchPagingAcrossWrites},
	{"SearchInvalidCursor", testSearchInvalidCursor},
	{"SearchParametersAreNotSQL", testSearchParametersAreNotSQL},
	{"SearchTypedColumns", testSearchTypedColumns},
	{"SearchTextWords", testSearchTextWords},
	{"SearchManyConditions", testSearchManyConditions},
	{"SearchLimits", testSearchLimits},
}

// RunSearch runs the search tests of Run only. A store whose statements
// depend on its data (the SQLite store sizes conditions before compiling)
// uses it to run them again with the other shapes forced.
func RunSearch(t *testing.T, newStore func(t *testing.T) engine.Store) {
	t.Helper()
	for _, tc := range searchTests {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, newStore(t))
		})
	}
}

// Search attribute keys of the fixture.
const (
	saKeyword = "CustomKeywordField"
	saInt     = "CustomIntField"
	saDouble  = "CustomDoubleField"
	saBool    = "CustomBoolField"
	saTime    = "CustomDatetimeField"
	saText    = "CustomTextField"
	saArray   = "CustomKeywordArrayField"
)

// Typed search attribute values, as the engine builds them.
func kwAttr(key, v string) *engine.SearchAttribute {
	return &engine.SearchAttribute{Key: key, ValueType: search.Keyword, Raw: []byte(`{}`), String: &v}
}

func textAttr(key, v string) *engine.SearchAttribute {
	return &engine.SearchAttribute{Key: key, ValueType: search.Text, Raw: []byte(`{}`), String: &v}
}

func intAttr(key string, v int64) *engine.SearchAttribute {
	return &engine.SearchAttribute{Key: key, ValueType: search.Int, Raw: []byte(`{}`), Int: &v}
}

func doubleAttr(key string, v float64) *engine.SearchAttribute {
	return &engine.SearchAttribute{Key: key, ValueType: search.Double, Raw: []byte(`{}`), Double: &v}
}

func boolAttr(key string, v bool) *engine.SearchAttribute {
	return &engine.SearchAttribute{Key: key, ValueType: search.Bool, Raw: []byte(`{}`), Bool: &v}
}

func timeAttr(key string, v time.Time) *engine.SearchAttribute {
	return &engine.SearchAttribute{Key: key, ValueType: search.Datetime, Raw: []byte(`{}`), Time: &v}
}

func arrayAttr(key string, v ...string) *engine.SearchAttribute {
	return &engine.SearchAttribute{Key: key, ValueType: search.KeywordArray, Raw: []byte(`{}`), Strings: append([]string{}, v...)}
}

// searchRun is one run of a fixture and its search attributes.
type searchRun struct {
	run   engine.Run
	attrs []*engine.SearchAttribute
}

func insertSearchRuns(t *testing.T, s engine.Store, runs []searchRun) {
	t.Helper()
	update(t, s, func(ctx context.Context, tx engine.Tx) error {
		for _, r := range runs {
			run := r.run
			if err := tx.RunInsert(ctx, &run); err != nil {
				return err
			}
			if len(r.attrs) > 0 {
				if err := tx.SearchAttributeUpsert(ctx, run.RunID, r.attrs); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// searchFixture stores seven runs, run-1 ... run-7. Their default order is
// run-5, run-1 (open, latest start first), run-6, run-3 (closed, latest
// close first), run-7, run-4 (same close and start: run id descending),
// run-2.
func searchFixture(t *testing.T, s engine.Store) {
	t.Helper()
	run := func(n int, wf, typ string, status engine.RunStatus, start, closed time.Duration) engine.Run {
		r := engine.Run{RunID: fmt.Sprintf("run-%d", n), WorkflowID: wf, WorkflowType: typ, Status: status, StartedAt: at(start), Data: []byte(`{}`)}
		if closed > 0 {
			r.ClosedAt = at(closed)
		}
		return r
	}
	insertSearchRuns(t, s, []searchRun{
		{run(1, "wf-1", "TypeA", engine.RunRunning, time.Minute, 0), []*engine.SearchAttribute{
			kwAttr(saKeyword, "alpha"), intAttr(saInt, 1), doubleAttr(saDouble, 0.01), boolAttr(saBool, true),
			timeAttr(saTime, at(time.Hour)), textAttr(saText, "My name is Quanzheng Long"), arrayAttr(saArray, "a", "b"),
		}},
		{run(2, "wf-2", "TypeA", engine.RunCompleted, 2*time.Minute, 10*time.Minute), []*engine.SearchAttribute{
			kwAttr(saKeyword, "beta"), intAttr(saInt, 2), doubleAttr(saDouble, 1.5), boolAttr(saBool, false),
			timeAttr(saTime, at(2*time.Hour)), textAttr(saText, "hello, World!"), arrayAttr(saArray, "b", "c"),
		}},
		{run(3, "wf-3", "TypeB", engine.RunFailed, 3*time.Minute, 20*time.Minute), []*engine.SearchAttribute{
			kwAttr(saKeyword, "alphabet"), intAttr(saInt, 3), doubleAttr(saDouble, -2.25), boolAttr(saBool, true),
			timeAttr(saTime, at(3*time.Hour)), textAttr(saText, "quanzheng_long other"), arrayAttr(saArray),
		}},
		{run(4, "wf-4", "TypeB", engine.RunTimeout, 4*time.Minute, 10*time.Minute), []*engine.SearchAttribute{
			intAttr(saInt, 10),
		}},
		{run(5, "wf-5", "TypeC", engine.RunRunning, 5*time.Minute, 0), []*engine.SearchAttribute{
			kwAttr(saKeyword, "100%_sure"), arrayAttr(saArray, "z"), timeAttr(saTime, at(-time.Hour)),
		}},
		{run(6, "wf-1", "TypeA", engine.RunTerminated, 6*time.Minute, 30*time.Minute), []*engine.SearchAttribute{
			kwAttr(saKeyword, "alpha"), doubleAttr(saDouble, 100), textAttr(saText, "quanzhengxlong"),
		}},
		{run(7, "wf-7", "TypeC", engine.RunCanceled, 4*time.Minute, 10*time.Minute), []*engine.SearchAttribute{
			kwAttr(saKeyword, "100x_sure"),
		}},
	})
}

// fixtureDefaultOrder is the fixture in the default order.
var fixtureDefaultOrder = []string{"run-5", "run-1", "run-6", "run-3", "run-7", "run-4", "run-2"}

// runSearch runs one RunSearch in a View.
func runSearch(t *testing.T, s engine.Store, q search.Query) (*search.Page, error) {
	t.Helper()
	var page *search.Page
	err := s.View(ctxT(t), func(ctx context.Context, tx engine.ReadTx) error {
		var err error
		page, err = tx.RunSearch(ctx, &q)
		return err
	})
	return page, err
}

// searchAll pages through a search with the given page size and returns the
// run ids in order. It checks the paging contract: every page but the last
// is full and carries a cursor, the last carries none, and no run repeats.
func searchAll(t *testing.T, s engine.Store, filter search.Expr, order search.Order, limit int) []string {
	t.Helper()
	var out []string
	seen := map[string]bool{}
	cursor := ""
	for page := 1; ; page++ {
		p, err := runSearch(t, s, search.Query{Filter: filter, Order: order, Limit: limit, Cursor: cursor})
		if err != nil {
			t.Fatalf("RunSearch page %d: %v", page, err)
		}
		if len(p.Runs) > limit {
			t.Fatalf("page %d has %d runs, limit %d", page, len(p.Runs), limit)
		}
		for _, r := range p.Runs {
			if seen[r.RunID] {
				t.Fatalf("page %d repeats %s", page, r.RunID)
			}
			seen[r.RunID] = true
			out = append(out, r.RunID)
		}
		if p.Cursor == "" {
			return out
		}
		if len(p.Runs) != limit {
			t.Fatalf("page %d has %d runs and a cursor; a page with a cursor must be full (%d)", page, len(p.Runs), limit)
		}
		if page > 1000 {
			t.Fatal("more than 1000 pages")
		}
		cursor = p.Cursor
	}
}

func sortedIDs(ids []string) []string {
	out := append([]string{}, ids...)
	sort.Strings(out)
	return out
}

// runIDs names fixture runs by number.
func runIDs(ns ...int) []string {
	out := []string{}
	for _, n := range ns {
		out = append(out, fmt.Sprintf("run-%d", n))
	}
	sort.Strings(out)
	return out
}

func field(key string, typ search.ValueType) search.Field {
	return search.Field{Key: key, Type: typ}
}

func builtin(b search.Builtin) search.Field {
	typ := search.Keyword
	if b == search.BuiltinStartTime || b == search.BuiltinCloseTime {
		typ = search.Datetime
	}
	return search.Field{Builtin: b, Type: typ}
}

func cond(f search.Field, op search.Op, values ...any) *search.Cond {
	return &search.Cond{Field: f, Op: op, Values: values}
}

func negate(c *search.Cond) *search.Cond {
	c.Negated = !c.Negated
	return c
}

func and(terms ...search.Expr) *search.And { return &search.And{Terms: terms} }
func or(terms ...search.Expr) *search.Or   { return &search.Or{Terms: terms} }

func testSearchAttributeTypeOf(t *testing.T, s engine.Store) {
	typeOf := func(key string) (search.ValueType, error) {
		var vt search.ValueType
		err := s.View(ctxT(t), func(ctx context.Context, tx engine.ReadTx) error {
			var err error
			vt, err = tx.SearchAttributeTypeOf(ctx, key)
			return err
		})
		return vt, err
	}
	if vt, err := typeOf("Never"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("type of an unwritten key: %q, %v; want ErrNotFound", vt, err)
	}
	write := func(run string, a *engine.SearchAttribute) {
		update(t, s, func(ctx context.Context, tx engine.Tx) error {
			return tx.SearchAttributeUpsert(ctx, run, []*engine.SearchAttribute{a})
		})
	}
	want := func(key string, typ search.ValueType) {
		t.Helper()
		vt, err := typeOf(key)
		if err != nil || vt != typ {
			t.Fatalf("type of %s: %q, %v; want %s", key, vt, err, typ)
		}
	}
	write("r1", intAttr("K", 1))
	want("K", search.Int)
	write("r2", kwAttr("K", "x")) // another run, another type: last written wins
	want("K", search.Keyword)
	write("r1", intAttr("K", 2)) // an update of the first run's value
	want("K", search.Int)
	write("r1", arrayAttr("K", "a"))
	want("K", search.KeywordArray)
	// A write that rolls back changes nothing.
	errBoom := errors.New("boom")
	if err := s.Update(ctxT(t), func(ctx context.Context, tx engine.Tx) error {
		if err := tx.SearchAttributeUpsert(ctx, "r3", []*engine.SearchAttribute{boolAttr("K", true)}); err != nil {
			return err
		}
		return errBoom
	}); !errors.Is(err, errBoom) {
		t.Fatal(err)
	}
	want("K", search.KeywordArray)
	// Several keys in one upsert.
	update(t, s, func(ctx context.Context, tx engine.Tx) error {
		return tx.SearchAttributeUpsert(ctx, "r4", []*engine.SearchAttribute{doubleAttr("D", 1), timeAttr("T", base), textAttr("X", "a b")})
	})
	want("D", search.Double)
	want("T", search.Datetime)
	want("X", search.Text)
}

// searchFilterCase is a filter over searchFixture and the runs it
// matches.
type searchFilterCase struct {
	name   string
	filter search.Expr
	want   []int
}

// searchFilterCases returns the filters of testSearchFilters, new each
// time (conditions are compared by identity in stores).
func searchFilterCases() []searchFilterCase {
	kw, in, dbl, bl := field(saKeyword, search.Keyword), field(saInt, search.Int), field(saDouble, search.Double), field(saBool, search.Bool)
	dt, tx, arr := field(saTime, search.Datetime), field(saText, search.Text), field(saArray, search.KeywordArray)
	wfID, runID, wfType := builtin(search.BuiltinWorkflowID), builtin(search.BuiltinRunID), builtin(search.BuiltinWorkflowType)
	status, start, closeT := builtin(search.BuiltinStatus), builtin(search.BuiltinStartTime), builtin(search.BuiltinCloseTime)
	all := []int{1, 2, 3, 4, 5, 6, 7}
	return []searchFilterCase{
		{"all", nil, all},

		{"keyword =", cond(kw, search.Eq, "alpha"), []int{1, 6}},
		{"keyword = is case-sensitive", cond(kw, search.Eq, "ALPHA"), nil},
		{"keyword !=", negate(cond(kw, search.Eq, "alpha")), []int{2, 3, 5, 7}},
		{"keyword IN", cond(kw, search.In, "beta", "100x_sure", "nope"), []int{2, 7}},
		{"keyword NOT IN", negate(cond(kw, search.In, "beta", "alpha")), []int{3, 5, 7}},
		{"keyword <", cond(kw, search.Lt, "b"), []int{1, 3, 5, 6, 7}},
		{"keyword <=", cond(kw, search.Le, "alpha"), []int{1, 5, 6, 7}},
		{"keyword >", cond(kw, search.Gt, "alpha"), []int{2, 3}},
		{"keyword >=", cond(kw, search.Ge, "alphabet"), []int{2, 3}},
		{"keyword BETWEEN", cond(kw, search.Between, "alpha", "beta"), []int{1, 2, 3, 6}},
		{"keyword NOT BETWEEN", negate(cond(kw, search.Between, "alpha", "beta")), []int{5, 7}},
		{"keyword STARTS_WITH", cond(kw, search.Prefix, "alpha"), []int{1, 3, 6}},
		{"keyword STARTS_WITH is case-sensitive", cond(kw, search.Prefix, "ALP"), nil},
		{"keyword STARTS_WITH has no wildcards", cond(kw, search.Prefix, "100%_"), []int{5}},
		{"keyword STARTS_WITH ''", cond(kw, search.Prefix, ""), []int{1, 2, 3, 5, 6, 7}},
		{"keyword NOT STARTS_WITH", negate(cond(kw, search.Prefix, "alpha")), []int{2, 5, 7}},
		{"keyword IS NOT NULL", cond(kw, search.Present), []int{1, 2, 3, 5, 6, 7}},
		{"keyword IS NULL", negate(cond(kw, search.Present)), []int{4}},

		{"int =", cond(in, search.Eq, int64(2)), []int{2}},
		{"int >", cond(in, search.Gt, int64(2)), []int{3, 4}},
		{"int <=", cond(in, search.Le, int64(2)), []int{1, 2}},
		{"int BETWEEN", cond(in, search.Between, int64(2), int64(10)), []int{2, 3, 4}},
		{"int IN", cond(in, search.In, int64(1), int64(10)), []int{1, 4}},
		{"int !=", negate(cond(in, search.Eq, int64(1))), []int{2, 3, 4}},
		{"int NOT >", negate(cond(in, search.Gt, int64(2))), []int{1, 2}},
		{"int IS NULL", negate(cond(in, search.Present)), []int{5, 6, 7}},

		{"double =", cond(dbl, search.Eq, 0.01), []int{1}},
		{"double <", cond(dbl, search.Lt, 0.0), []int{3}},
		{"double >=", cond(dbl, search.Ge, 1.5), []int{2, 6}},
		{"double IN", cond(dbl, search.In, 1.5, 100.0), []int{2, 6}},
		{"double BETWEEN", cond(dbl, search.Between, -3.0, 1.0), []int{1, 3}},
		{"double !=", negate(cond(dbl, search.Eq, 0.01)), []int{2, 3, 6}},

		{"bool = true", cond(bl, search.Eq, true), []int{1, 3}},
		{"bool = false", cond(bl, search.Eq, false), []int{2}},
		{"bool != true", negate(cond(bl, search.Eq, true)), []int{2}},
		{"bool IN", cond(bl, search.In, true, false), []int{1, 2, 3}},
		{"bool IS NULL", negate(cond(bl, search.Present)), []int{4, 5, 6, 7}},

		// Times are kept to the millisecond: at(time.Hour) has nanoseconds,
		// and equality still holds.
		{"datetime =", cond(dt, search.Eq, at(time.Hour)), []int{1}},
		{"datetime = other zone", cond(dt, search.Eq, at(time.Hour).UTC()), []int{1}},
		{"datetime >", cond(dt, search.Gt, at(90*time.Minute)), []int{2, 3}},
		{"datetime <", cond(dt, search.Lt, at(0)), []int{5}},
		{"datetime BETWEEN inclusive", cond(dt, search.Between, at(time.Hour), at(2*time.Hour)), []int{1, 2}},
		{"datetime !=", negate(cond(dt, search.Eq, at(time.Hour))), []int{2, 3, 5}},

		{"text word", cond(tx, search.Match, "quanzheng"), []int{1}},
		{"text words in any order", and(cond(tx, search.Match, "long"), cond(tx, search.Match, "my")), []int{1}},
		{"text word next to punctuation", cond(tx, search.Match, "world"), []int{2}},
		{"text first and last word", and(cond(tx, search.Match, "hello"), cond(tx, search.Match, "world")), []int{2}},
		{"text part of a word", cond(tx, search.Match, "wor"), nil},
		{"text underscore joins words", cond(tx, search.Match, "quanzheng_long"), []int{3}},
		{"text no match of every word", and(cond(tx, search.Match, "hello"), cond(tx, search.Match, "long")), nil},
		{"text either word", or(cond(tx, search.Match, "hello"), cond(tx, search.Match, "long")), []int{1, 2}},
		{"text negated", negate(cond(tx, search.Match, "world")), []int{1, 3, 6}},
		{"text IS NOT NULL", cond(tx, search.Present), []int{1, 2, 3, 6}},

		{"array = any element", cond(arr, search.Eq, "b"), []int{1, 2}},
		{"array != no element", negate(cond(arr, search.Eq, "b")), []int{5}},
		{"array IN", cond(arr, search.In, "a", "z"), []int{1, 5}},
		{"array NOT IN", negate(cond(arr, search.In, "a", "c")), []int{5}},
		{"array <", cond(arr, search.Lt, "b"), []int{1}},
		{"array NOT <", negate(cond(arr, search.Lt, "c")), []int{5}},
		{"array STARTS_WITH", cond(arr, search.Prefix, "z"), []int{5}},
		{"array IS NOT NULL (empty is null)", cond(arr, search.Present), []int{1, 2, 5}},
		{"array IS NULL", negate(cond(arr, search.Present)), []int{3, 4, 6, 7}},

		{"WorkflowId =", cond(wfID, search.Eq, "wf-1"), []int{1, 6}},
		{"WorkflowId IN", cond(wfID, search.In, "wf-2", "wf-3"), []int{2, 3}},
		{"WorkflowId STARTS_WITH", cond(wfID, search.Prefix, "wf-"), all},
		{"WorkflowId !=", negate(cond(wfID, search.Eq, "wf-1")), []int{2, 3, 4, 5, 7}},
		{"WorkflowId >", cond(wfID, search.Gt, "wf-5"), []int{7}},
		{"WorkflowId IS NOT NULL", cond(wfID, search.Present), all},
		{"WorkflowId IS NULL", negate(cond(wfID, search.Present)), nil},
		{"RunId =", cond(runID, search.Eq, "run-2"), []int{2}},
		{"WorkflowType =", cond(wfType, search.Eq, "TypeB"), []int{3, 4}},
		{"WorkflowType STARTS_WITH", cond(wfType, search.Prefix, "TypeC"), []int{5, 7}},
		{"ExecutionStatus =", cond(status, search.Eq, string(engine.RunRunning)), []int{1, 5}},
		{"ExecutionStatus IN", cond(status, search.In, string(engine.RunCompleted), string(engine.RunFailed)), []int{2, 3}},
		{"ExecutionStatus !=", negate(cond(status, search.Eq, string(engine.RunRunning))), []int{2, 3, 4, 6, 7}},
		{"ExecutionStatus = TIMEOUT", cond(status, search.Eq, string(engine.RunTimeout)), []int{4}},
		{"StartTime >", cond(start, search.Gt, at(4*time.Minute)), []int{5, 6}},
		{"StartTime >=", cond(start, search.Ge, at(4*time.Minute)), []int{4, 5, 6, 7}},
		{"StartTime BETWEEN", cond(start, search.Between, at(2*time.Minute), at(3*time.Minute)), []int{2, 3}},
		{"StartTime NOT <", negate(cond(start, search.Lt, at(4*time.Minute))), []int{4, 5, 6, 7}},
		{"CloseTime IS NOT NULL", cond(closeT, search.Present), []int{2, 3, 4, 6, 7}},
		{"CloseTime IS NULL", negate(cond(closeT, search.Present)), []int{1, 5}},
		{"CloseTime < skips open runs", cond(closeT, search.Lt, at(15*time.Minute)), []int{2, 4, 7}},
		{"CloseTime != skips open runs", negate(cond(closeT, search.Eq, at(10*time.Minute))), []int{3, 6}},
		{"CloseTime NOT >", negate(cond(closeT, search.Gt, at(10*time.Minute))), []int{2, 4, 7}},

		{"AND", and(cond(wfType, search.Eq, "TypeA"), cond(in, search.Gt, int64(1))), []int{2}},
		{"OR", or(cond(kw, search.Eq, "beta"), cond(in, search.Eq, int64(10))), []int{2, 4}},
		{"AND of OR", and(
			or(cond(status, search.Eq, string(engine.RunRunning)), cond(closeT, search.Lt, at(15*time.Minute))),
			cond(kw, search.Present)), []int{1, 2, 5, 7}},
		{"OR of AND", or(
			and(cond(wfID, search.Eq, "wf-1"), negate(cond(status, search.Eq, string(engine.RunRunning)))),
			and(cond(arr, search.Eq, "z"), cond(dt, search.Lt, at(0)))), []int{5, 6}},
		{"unknown key", cond(field("Nope", search.Keyword), search.Eq, "alpha"), nil},
		{"unknown key IS NULL", negate(cond(field("Nope", search.Int), search.Present)), all},
	}
}

func testSearchFilters(t *testing.T, s engine.Store) {
	searchFixture(t, s)
	for _, c := range searchFilterCases() {
		t.Run(c.name, func(t *testing.T) {
			got := sortedIDs(searchAll(t, s, c.filter, search.Order{}, 100))
			equal(t, "runs", got, runIDs(c.want...))
		})
	}
}

func testSearchDefaultOrder(t *testing.T, s engine.Store) {
	searchFixture(t, s)
	equal(t, "default order", searchAll(t, s, nil, search.Order{}, 100), fixtureDefaultOrder)
	// A filter keeps the order.
	got := searchAll(t, s, cond(builtin(search.BuiltinWorkflowType), search.In, "TypeB", "TypeC"), search.Order{}, 100)
	equal(t, "filtered default order", got, []string{"run-5", "run-3", "run-7", "run-4"})
}

// searchOrderCase is an order of searchFixture's runs.
type searchOrderCase struct {
	name  string
	order search.Order
	want  []string
}

// searchOrderCases returns the orders of testSearchOrders.
func searchOrderCases() []searchOrderCase {
	return []searchOrderCase{
		{"StartTime ASC", search.Order{Field: builtin(search.BuiltinStartTime)},
			[]string{"run-1", "run-2", "run-3", "run-4", "run-7", "run-5", "run-6"}},
		{"StartTime DESC", search.Order{Field: builtin(search.BuiltinStartTime), Desc: true},
			[]string{"run-6", "run-5", "run-7", "run-4", "run-3", "run-2", "run-1"}},
		{"CloseTime ASC (open runs first)", search.Order{Field: builtin(search.BuiltinCloseTime)},
			[]string{"run-1", "run-5", "run-2", "run-4", "run-7", "run-3", "run-6"}},
		{"CloseTime DESC (open runs last)", search.Order{Field: builtin(search.BuiltinCloseTime), Desc: true},
			[]string{"run-6", "run-3", "run-7", "run-4", "run-2", "run-5", "run-1"}},
		{"WorkflowId ASC", search.Order{Field: builtin(search.BuiltinWorkflowID)},
			[]string{"run-1", "run-6", "run-2", "run-3", "run-4", "run-5", "run-7"}},
		{"WorkflowId DESC", search.Order{Field: builtin(search.BuiltinWorkflowID), Desc: true},
			[]string{"run-7", "run-5", "run-4", "run-3", "run-2", "run-6", "run-1"}},
		{"RunId DESC", search.Order{Field: builtin(search.BuiltinRunID), Desc: true},
			[]string{"run-7", "run-6", "run-5", "run-4", "run-3", "run-2", "run-1"}},
		{"WorkflowType ASC", search.Order{Field: builtin(search.BuiltinWorkflowType)},
			[]string{"run-1", "run-2", "run-6", "run-3", "run-4", "run-5", "run-7"}},
		{"ExecutionStatus ASC", search.Order{Field: builtin(search.BuiltinStatus)},
			[]string{"run-7", "run-2", "run-3", "run-1", "run-5", "run-6", "run-4"}},
		{"INT DESC (missing last)", search.Order{Field: field(saInt, search.Int), Desc: true},
			[]string{"run-4", "run-3", "run-2", "run-1", "run-7", "run-6", "run-5"}},
		{"INT ASC (missing last)", search.Order{Field: field(saInt, search.Int)},
			[]string{"run-1", "run-2", "run-3", "run-4", "run-5", "run-6", "run-7"}},
		{"DOUBLE ASC", search.Order{Field: field(saDouble, search.Double)},
			[]string{"run-3", "run-1", "run-2", "run-6", "run-4", "run-5", "run-7"}},
		{"KEYWORD DESC", search.Order{Field: field(saKeyword, search.Keyword), Desc: true},
			[]string{"run-2", "run-3", "run-6", "run-1", "run-7", "run-5", "run-4"}},
		{"BOOL DESC", search.Order{Field: field(saBool, search.Bool), Desc: true},
			[]string{"run-3", "run-1", "run-2", "run-7", "run-6", "run-5", "run-4"}},
		{"DATETIME ASC", search.Order{Field: field(saTime, search.Datetime)},
			[]string{"run-5", "run-1", "run-2", "run-3", "run-4", "run-6", "run-7"}},
	}
}

func testSearchOrders(t *testing.T, s engine.Store) {
	searchFixture(t, s)
	for _, c := range searchOrderCases() {
		t.Run(c.name, func(t *testing.T) {
			for _, limit := range []int{100, 3, 1} {
				equal(t, fmt.Sprintf("order with page size %d", limit), searchAll(t, s, nil, c.order, limit), c.want)
			}
		})
	}
	// A filter and a custom order together.
	got := searchAll(t, s, cond(builtin(search.BuiltinWorkflowType), search.Eq, "TypeA"), search.Order{Field: field(saDouble, search.Double), Desc: true}, 1)
	equal(t, "filtered custom order", got, []string{"run-6", "run-2", "run-1"})
}

func testSearchPaging(t *testing.T, s engine.Store) {
	searchFixture(t, s)
	for limit := 1; limit <= 8; limit++ {
		equal(t, fmt.Sprintf("pages of %d", limit), searchAll(t, s, nil, search.Order{}, limit), fixtureDefaultOrder)
	}
	// The page sizes of the iWF persistence test: 2, 2, 2, 1, and the last
	// page has no cursor.
	var sizes []int
	cursor := ""
	for {
		p, err := runSearch(t, s, search.Query{Limit: 2, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, len(p.Runs))
		if p.Cursor == "" {
			break
		}
		cursor = p.Cursor
	}
	equal(t, "page sizes", sizes, []int{2, 2, 2, 1})
	// Nothing matches: an empty page without a cursor.
	p, err := runSearch(t, s, search.Query{Filter: cond(builtin(search.BuiltinWorkflowID), search.Eq, "none"), Limit: 10})
	if err != nil || len(p.Runs) != 0 || p.Cursor != "" {
		t.Fatalf("empty search: %+v, %v", p, err)
	}
	// The page reports workflow ids too.
	p, err = runSearch(t, s, search.Query{Filter: cond(builtin(search.BuiltinRunID), search.Eq, "run-6"), Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	equal(t, "runs", p.Runs, []search.Run{{WorkflowID: "wf-1", RunID: "run-6"}})
}

// testSearchPagingAcrossWrites checks that runs written between two pages
// neither repeat nor hide the runs of the next page.
func testSearchPagingAcrossWrites(t *testing.T, s engine.Store) {
	searchFixture(t, s)
	p, err := runSearch(t, s, search.Query{Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	// A new open run sorts first; a run that closes moves.
	insertSearchRuns(t, s, []searchRun{{run: engine.Run{RunID: "run-8", WorkflowID: "wf-8", WorkflowType: "TypeA", Status: engine.RunRunning, StartedAt: at(time.Hour)}}})
	p2, err := runSearch(t, s, search.Query{Limit: 10, Cursor: p.Cursor})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range append(p.Runs, p2.Runs...) {
		got = append(got, r.RunID)
	}
	equal(t, "pages across a write", got, fixtureDefaultOrder)
}

func testSearchInvalidCursor(t *testing.T, s engine.Store) {
	searchFixture(t, s)
	p, err := runSearch(t, s, search.Query{Limit: 2})
	if err != nil || p.Cursor == "" {
		t.Fatalf("first page: %+v, %v", p, err)
	}
	bad := []struct {
		name   string
		order  search.Order
		cursor string
	}{
		{"garbage", search.Order{}, "not a cursor"},
		{"another order's cursor", search.Order{Field: builtin(search.BuiltinWorkflowID)}, p.Cursor},
		{"a custom order's cursor", search.Order{Field: field(saDouble, search.Double)}, p.Cursor},
	}
	for _, b := range bad {
		_, err := runSearch(t, s, search.Query{Order: b.order, Limit: 2, Cursor: b.cursor})
		if !errors.Is(err, search.ErrInvalidCursor) {
			t.Errorf("%s: %v, want ErrInvalidSearchCursor", b.name, err)
		}
	}
}

// testSearchParametersAreNotSQL checks that literals and keys reach the
// database as values: quotes, comment markers and LIKE wildcards match
// themselves only.
func testSearchParametersAreNotSQL(t *testing.T, s engine.Store) {
	searchFixture(t, s)
	odd := `x' OR '1'='1`
	key := `K'; DROP TABLE runs; --`
	insertSearchRuns(t, s, []searchRun{{
		run:   engine.Run{RunID: "run-odd", WorkflowID: "wf-odd", WorkflowType: "T", Status: engine.RunRunning, StartedAt: at(0)},
		attrs: []*engine.SearchAttribute{kwAttr(key, odd), textAttr(saText, "100% sure, it's fine")},
	}})
	kw := field(saKeyword, search.Keyword)
	for _, lit := range []string{odd, `' OR 1=1 --`, `%`, `_`, `\`, `alpha' --`} {
		for _, c := range []search.Expr{
			cond(kw, search.Eq, lit), cond(kw, search.Prefix, lit), cond(kw, search.In, lit, lit),
			cond(builtin(search.BuiltinWorkflowID), search.Eq, lit),
		} {
			if got := searchAll(t, s, c, search.Order{}, 100); len(got) != 0 {
				t.Fatalf("literal %q matched %v", lit, got)
			}
		}
	}
	equal(t, "odd key and value", searchAll(t, s, cond(field(key, search.Keyword), search.Eq, odd), search.Order{}, 100), []string{"run-odd"})
	equal(t, "odd key order", searchAll(t, s, cond(field(key, search.Keyword), search.Present), search.Order{Field: field(key, search.Keyword)}, 1), []string{"run-odd"})
	tx := field(saText, search.Text)
	equal(t, "text word with a quote", searchAll(t, s, and(cond(tx, search.Match, "it"), cond(tx, search.Match, "s"), cond(tx, search.Match, "fine")), search.Order{}, 100), []string{"run-odd"})
	equal(t, "text word 100", searchAll(t, s, cond(tx, search.Match, "100"), search.Order{}, 100), []string{"run-odd"})
	// The tables are intact.
	equal(t, "runs after", len(searchAll(t, s, nil, search.Order{}, 100)), 8)
}

// testSearchTypedColumns checks that a condition reads the column of its
// field's type: a key written with another type in some runs matches there
// neither the comparison nor its negation. KEYWORD and KEYWORD_ARRAY are one
// family, as in Temporal: a condition on either matches a single value and
// any element of a list.
func testSearchTypedColumns(t *testing.T, s engine.Store) {
	insertSearchRuns(t, s, []searchRun{
		{engine.Run{RunID: "a", WorkflowID: "a", WorkflowType: "T", Status: engine.RunRunning, StartedAt: at(0)}, []*engine.SearchAttribute{intAttr("K", 5)}},
		{engine.Run{RunID: "b", WorkflowID: "b", WorkflowType: "T", Status: engine.RunRunning, StartedAt: at(0)}, []*engine.SearchAttribute{kwAttr("K", "5")}},
		{engine.Run{RunID: "c", WorkflowID: "c", WorkflowType: "T", Status: engine.RunRunning, StartedAt: at(0)}, []*engine.SearchAttribute{arrayAttr("K", "5")}},
	})
	i, k, a := field("K", search.Int), field("K", search.Keyword), field("K", search.KeywordArray)
	check := func(name string, e search.Expr, want ...string) {
		t.Helper()
		got := sortedIDs(searchAll(t, s, e, search.Order{}, 100))
		if want == nil {
			want = []string{}
		}
		if got == nil {
			got = []string{}
		}
		equal(t, name, got, want)
	}
	check("INT =", cond(i, search.Eq, int64(5)), "a")
	check("INT !=", negate(cond(i, search.Eq, int64(6))), "a")
	check("INT present", cond(i, search.Present), "a")
	check("KEYWORD =", cond(k, search.Eq, "5"), "b", "c")
	check("KEYWORD !=", negate(cond(k, search.Eq, "6")), "b", "c")
	check("KEYWORD present", cond(k, search.Present), "b", "c")
	check("KEYWORD_ARRAY =", cond(a, search.Eq, "5"), "b", "c")
	check("KEYWORD_ARRAY prefix", cond(a, search.Prefix, "5"), "b", "c")
	// Rewriting a run's value with another type moves it.
	update(t, s, func(ctx context.Context, tx engine.Tx) error {
		return tx.SearchAttributeUpsert(ctx, "c", []*engine.SearchAttribute{intAttr("K", 7)})
	})
	check("KEYWORD_ARRAY after a rewrite", cond(a, search.Present), "b")
	check("INT after a rewrite", cond(i, search.Ge, int64(5)), "a", "c")
}

// testSearchTextWords checks that the words a store finds in TEXT values
// are search.Words: every separator splits, the underscore, digits
// and non-ASCII characters do not, and ASCII letters fold to lower case;
// rewriting or retyping a value replaces its words.
func testSearchTextWords(t *testing.T, s engine.Store) {
	var sep []byte
	for c := 1; c < 128; c++ {
		if c != '_' && !('a' <= c && c <= 'z') && !('A' <= c && c <= 'Z') && !('0' <= c && c <= '9') {
			sep = append(sep, byte(c))
		}
	}
	var value strings.Builder
	for i, c := range sep {
		fmt.Fprintf(&value, "W%d%c", i, c)
	}
	value.WriteString("snake_Case Ünï naïve ÜNÏ 42")
	words := search.Words(value.String())
	if len(words) != len(sep)+5 {
		t.Fatalf("search.Words found %d words in %q: %q", len(words), value.String(), words)
	}
	insertSearchRuns(t, s, []searchRun{
		{engine.Run{RunID: "t1", WorkflowID: "t1", WorkflowType: "T", Status: engine.RunRunning, StartedAt: at(0)}, []*engine.SearchAttribute{textAttr("X", value.String())}},
		{engine.Run{RunID: "t2", WorkflowID: "t2", WorkflowType: "T", Status: engine.RunRunning, StartedAt: at(0)}, []*engine.SearchAttribute{textAttr("X", "")}},
	})
	x := field("X", search.Text)
	for _, w := range words {
		equal(t, "word "+w, searchAll(t, s, cond(x, search.Match, w), search.Order{}, 100), []string{"t1"})
	}
	for _, w := range []string{"w", "w99", "snake", "case", "ünï", "naive", "4", "", " "} {
		equal(t, "not a word: "+w, len(searchAll(t, s, cond(x, search.Match, w), search.Order{}, 100)), 0)
	}
	// A value without words is present and matches no word.
	equal(t, "negated match", searchAll(t, s, negate(cond(x, search.Match, "w1")), search.Order{}, 100), []string{"t2"})
	// A new value replaces the words; another type removes them.
	update(t, s, func(ctx context.Context, tx engine.Tx) error {
		if err := tx.SearchAttributeUpsert(ctx, "t1", []*engine.SearchAttribute{textAttr("X", "fresh words")}); err != nil {
			return err
		}
		return tx.SearchAttributeUpsert(ctx, "t2", []*engine.SearchAttribute{textAttr("X", "words")})
	})
	equal(t, "old word", len(searchAll(t, s, cond(x, search.Match, "w0"), search.Order{}, 100)), 0)
	equal(t, "new word", sortedIDs(searchAll(t, s, cond(x, search.Match, "words"), search.Order{}, 100)), []string{"t1", "t2"})
	update(t, s, func(ctx context.Context, tx engine.Tx) error {
		return tx.SearchAttributeUpsert(ctx, "t1", []*engine.SearchAttribute{kwAttr("X", "words")})
	})
	equal(t, "retyped", searchAll(t, s, cond(x, search.Match, "words"), search.Order{}, 100), []string{"t2"})
}
