package searchsql

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/search"
)

func cond(key string, typ search.ValueType, op search.Op, negated bool, values ...any) *search.Cond {
	return &search.Cond{Field: search.Field{Key: key, Type: typ}, Op: op, Values: values, Negated: negated}
}

func builtin(b search.Builtin, typ search.ValueType, op search.Op, values ...any) *search.Cond {
	return &search.Cond{Field: search.Field{Builtin: b, Type: typ}, Op: op, Values: values}
}

// markerQuery uses a distinct marker in every literal and key. Its filter
// is an OR; wide makes it an AND of more conditions than PostgreSQL plans
// as joins (with an OR among them), which compiles to two levels.
func markerQuery(wide bool) (*search.Query, []string) {
	var markers []string
	m := func() string {
		s := fmt.Sprintf("MARK%02d' OR '1'='1", len(markers))
		markers = append(markers, s)
		return s
	}
	q := &search.Query{
		Filter: &search.Or{Terms: []search.Expr{
			&search.And{Terms: []search.Expr{
				cond(m(), "KEYWORD", search.Eq, false, m()),
				cond(m(), "KEYWORD", search.Prefix, true, m()),
				cond(m(), "KEYWORD_ARRAY", search.In, true, m(), m()),
				cond(m(), "TEXT", search.Match, false, m()),
				cond(m(), "TEXT", search.Match, true, m()),
			}},
			cond(m(), "KEYWORD", search.Between, false, m(), m()),
			cond(m(), "INT", search.Present, true),
			builtin(search.BuiltinWorkflowID, "KEYWORD", search.In, m(), m()),
			builtin(search.BuiltinWorkflowType, "KEYWORD", search.Prefix, m()),
		}},
		Order: search.Order{Field: search.Field{Key: m(), Type: "KEYWORD"}},
		Limit: 10,
	}
	if wide {
		or := q.Filter.(*search.Or)
		and := or.Terms[0].(*search.And)
		or.Terms = or.Terms[1:]
		q.Filter = &search.And{Terms: append(and.Terms, or)}
	}
	return q, markers
}

// TestLiteralsAreParameters: no literal or key reaches the SQL text; each
// is a bind parameter; placeholders are numbered 1..n.
func TestLiteralsAreParameters(t *testing.T) {
	for _, wide := range []bool{false, true} {
		testLiteralsAreParameters(t, wide)
	}
}

func testLiteralsAreParameters(t *testing.T, wide bool) {
	q, markers := markerQuery(wide)
	if st, err := Compile(q, PostgreSQL, nil); err != nil || strings.Contains(st.SQL, "OFFSET 0") != wide {
		t.Fatalf("wide %v: PostgreSQL statement %v, %v", wide, st, err)
	}
	for _, counts := range []map[*search.Cond]int{nil, {}} {
		for name, d := range map[string]Dialect{"sqlite": SQLite, "postgres": PostgreSQL} {
			st, err := Compile(q, d, counts)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(st.SQL, "MARK") {
				t.Fatalf("%s: a literal is in the SQL text:\n%s", name, st.SQL)
			}
			args := fmt.Sprint(st.Args...)
			for _, mk := range markers {
				if !strings.Contains(args, strings.TrimSuffix(mk, "' OR '1'='1")) {
					t.Errorf("%s: %q is not bound", name, mk)
				}
			}
			if name == "postgres" {
				n := len(regexp.MustCompile(`\$\d+`).FindAllString(st.SQL, -1))
				if n != len(st.Args) || !strings.Contains(st.SQL, fmt.Sprintf("$%d", len(st.Args))) {
					t.Errorf("%d placeholders for %d arguments", n, len(st.Args))
				}
			} else if n := strings.Count(st.SQL, "?"); n != len(st.Args) {
				t.Errorf("sqlite: %d placeholders for %d arguments", n, len(st.Args))
			}
		}
	}
	counts, err := Counts(q, SQLite)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range counts {
		if strings.Contains(c.SQL, "MARK") {
			t.Fatalf("a literal is in the count statement:\n%s", c.SQL)
		}
	}
}

func TestCounts(t *testing.T) {
	a := cond("A", "INT", search.Gt, false, int64(1))
	b := cond("B", "KEYWORD_ARRAY", search.Eq, false, "x")
	c := cond("C", "TEXT", search.Match, false, "w")
	neg := cond("D", "INT", search.Eq, true, int64(1))
	bi := builtin(search.BuiltinStatus, "KEYWORD", search.Eq, "RUNNING")
	q := &search.Query{Filter: &search.And{Terms: []search.Expr{a, &search.Or{Terms: []search.Expr{b, c, neg}}, bi}}, Limit: 5}
	counts, err := Counts(q, SQLite)
	if err != nil {
		t.Fatal(err)
	}
	var got []*search.Cond
	for _, x := range counts {
		got = append(got, x.Cond)
		if !strings.HasPrefix(x.SQL, "SELECT count(*) FROM (SELECT 1 FROM ") || x.Args[len(x.Args)-1] != int64(CountCap+1) {
			t.Errorf("count statement %s %v", x.SQL, x.Args)
		}
	}
	if len(got) != 3 || got[0] != a || got[1] != b || got[2] != c {
		t.Fatalf("counted %v, want the positive attribute conditions a, b, c", got)
	}
	// The smallest countable term of the top-level AND drives; dense
	// conditions are probes.
	st, err := Compile(q, SQLite, map[*search.Cond]int{a: 10, b: 5000, c: 3})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(st.SQL, "FROM (SELECT s.run_id AS run_id FROM search_attributes s WHERE s.key = ? AND s.int_value > ?) d CROSS JOIN runs r") {
		t.Errorf("a does not drive:\n%s", st.SQL)
	}
	if !strings.Contains(st.SQL, "EXISTS (SELECT 1 FROM search_attribute_strings e WHERE e.run_id = r.run_id AND e.key = ? AND e.value = ?)") {
		t.Errorf("b is not a probe:\n%s", st.SQL)
	}
	if !strings.Contains(st.SQL, "r.run_id IN (SELECT w.run_id FROM search_attribute_words w WHERE w.key = ? AND w.word = ?)") {
		t.Errorf("c is not a list:\n%s", st.SQL)
	}
	// Without counts: lists everywhere, nothing drives.
	st, err = Compile(q, PostgreSQL, nil)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(st.SQL, "CROSS JOIN") || strings.Contains(st.SQL, "EXISTS (SELECT 1 FROM search_attribute_strings e WHERE e.run_id = r.run_id AND e.key = $") {
		t.Errorf("PostgreSQL statement with counts' shapes:\n%s", st.SQL)
	}
}

func TestCompileRejectsMalformedQueries(t *testing.T) {
	bad := []*search.Query{
		{Limit: 0},
		{Limit: 1, Filter: cond("A", "INT", search.Eq, false)},
		{Limit: 1, Filter: cond("A", "INT", search.Between, false, int64(1))},
		{Limit: 1, Filter: cond("A", "INT", search.Eq, false, "1")},
		{Limit: 1, Filter: cond("A", "DOUBLE", search.Eq, false, int64(1))},
		{Limit: 1, Filter: cond("A", "BOOL", search.Eq, false, "true")},
		{Limit: 1, Filter: cond("A", "DATETIME", search.Eq, false, "2024")},
		{Limit: 1, Filter: cond("A", "KEYWORD", search.Match, false, "w")},
		{Limit: 1, Filter: cond("A", "TEXT", search.Eq, false, "w")},
		{Limit: 1, Filter: cond("A", "TEXT", search.Match, false, "a", "b")},
		{Limit: 1, Filter: cond("A", "BLOB", search.Eq, false, "x")},
		{Limit: 1, Filter: cond("A", "KEYWORD", search.Present, false, "x")},
		{Limit: 1, Filter: &search.And{}},
		{Limit: 1, Order: search.Order{Field: search.Field{Key: "A", Type: "KEYWORD_ARRAY"}}},
		{Limit: 1, Order: search.Order{Field: search.Field{Builtin: "Nope", Type: "KEYWORD"}}},
	}
	for i, q := range bad {
		if st, err := Compile(q, SQLite, nil); err == nil {
			t.Errorf("query %d compiled: %s", i, st.SQL)
		}
	}
}

func TestCursorMustFitTheOrder(t *testing.T) {
	q := &search.Query{Limit: 2, Cursor: `{"k":["1","2"],"r":"x"}`}
	if _, err := Compile(q, SQLite, nil); err != nil {
		t.Fatalf("a default-order cursor: %v", err)
	}
	for _, c := range []string{"", "{", `{"k":["1"],"r":"x"}`, `{"k":["a","2"],"r":"x"}`, `{"k":["1","2"]}`, `{"n":true,"r":"x"}`} {
		q := &search.Query{Limit: 2, Cursor: c}
		if c == "" {
			continue
		}
		if _, err := Compile(q, SQLite, nil); !errors.Is(err, search.ErrInvalidCursor) {
			t.Errorf("cursor %q: %v", c, err)
		}
	}
	custom := search.Order{Field: search.Field{Key: "D", Type: "DOUBLE"}}
	for c, ok := range map[string]bool{`{"k":["1.5"],"r":"x"}`: true, `{"n":true,"r":"x"}`: true, `{"k":["x"],"r":"x"}`: false} {
		_, err := Compile(&search.Query{Limit: 2, Order: custom, Cursor: c}, PostgreSQL, nil)
		if (err == nil) != ok {
			t.Errorf("custom order cursor %q: %v", c, err)
		}
	}
}

func TestPrefixEnd(t *testing.T) {
	cases := []struct {
		in, out string
		ok      bool
	}{
		{"", "", false},
		{"a", "b", true},
		{"ab", "ac", true},
		{"a%", "a&", true},
		{"z\U0010FFFF", "{", true},
		{"\U0010FFFF", "", false},
		{"\uD7FF", "\uE000", true},
		{"é", "ê", true},
	}
	for _, c := range cases {
		out, ok := prefixEnd(c.in)
		if out != c.out || ok != c.ok {
			t.Errorf("prefixEnd(%q) = %q, %v; want %q, %v", c.in, out, ok, c.out, c.ok)
		}
	}
}

// TestDatetimeUnits: a DATETIME literal is bound in nanoseconds for a
// search attribute, in milliseconds for a runs column (StartTime,
// CloseTime); one beyond what nanoseconds can hold as the nearest bound.
func TestDatetimeUnits(t *testing.T) {
	tm := time.Date(2024, 1, 2, 3, 4, 5, 987654321, time.FixedZone("X", 3600))
	st, err := Compile(&search.Query{Limit: 1, Filter: cond("T", "DATETIME", search.Eq, false, tm)}, SQLite, nil)
	if err != nil {
		t.Fatal(err)
	}
	if st.Args[1] != tm.UnixNano() {
		t.Fatalf("attribute: bound %v, want %d", st.Args[1], tm.UnixNano())
	}
	start := &search.Cond{Field: search.Field{Builtin: search.BuiltinStartTime, Type: search.Datetime}, Op: search.Eq, Values: []any{tm}}
	if st, err = Compile(&search.Query{Limit: 1, Filter: start}, SQLite, nil); err != nil {
		t.Fatal(err)
	}
	if st.Args[0] != tm.UnixMilli() {
		t.Fatalf("StartTime: bound %v, want %d", st.Args[0], tm.UnixMilli())
	}
	far := time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)
	if st, err = Compile(&search.Query{Limit: 1, Filter: cond("T", "DATETIME", search.Eq, false, far)}, SQLite, nil); err != nil {
		t.Fatal(err)
	}
	if st.Args[1] != int64(math.MaxInt64) {
		t.Fatalf("year 3000: bound %v, want the largest int64", st.Args[1])
	}
}

// TestFewSubqueriesOneLevel: a search whose top-level AND has at most
// PostgreSQLJoinable subqueries (every search of the benchmark) compiles
// for PostgreSQL to the one-level statement, every subquery joinable.
func TestFewSubqueriesOneLevel(t *testing.T) {
	typ := builtin(search.BuiltinWorkflowType, "KEYWORD", search.Eq, "T")
	filters := []search.Expr{
		cond("K", "KEYWORD", search.Eq, false, "k"),
		&search.And{Terms: []search.Expr{typ, cond("K", "KEYWORD", search.Eq, true, "k")}},
		&search.And{Terms: []search.Expr{typ, cond("I", "INT", search.Gt, false, int64(1)), cond("B", "BOOL", search.Eq, false, true),
			cond("K", "KEYWORD", search.Eq, true, "k")}},
		// An OR's subqueries are never joins.
		&search.And{Terms: []search.Expr{cond("I", "INT", search.Gt, false, int64(1)), &search.Or{Terms: []search.Expr{
			cond("A", "INT", search.Eq, false, int64(1)), cond("B", "INT", search.Eq, false, int64(1)),
			cond("C", "INT", search.Eq, false, int64(1)), cond("D", "INT", search.Eq, false, int64(1)), cond("E", "INT", search.Eq, false, int64(1)),
		}}}},
	}
	unbounded := PostgreSQL
	unbounded.Joinable = 0
	for i, f := range filters {
		q := &search.Query{Filter: f, Limit: 10}
		st, err := Compile(q, PostgreSQL, nil)
		if err != nil {
			t.Fatal(err)
		}
		plain, err := Compile(q, unbounded, nil)
		if err != nil {
			t.Fatal(err)
		}
		if st.SQL != plain.SQL || strings.Contains(st.SQL, "OFFSET") {
			t.Errorf("filter %d:\n%s\nwant\n%s", i, st.SQL, plain.SQL)
		}
	}
}

// TestManySubqueriesTwoLevels: beyond PostgreSQLJoinable subqueries, the
// run-column conditions, the ORs and the first conditions up to
// PostgreSQLJoinable subqueries select the runs in a subquery that sorts
// them; the other conditions are fenced probes (EXISTS … OFFSET 0) of
// the outer query, which orders by the subquery's sorted columns.
func TestManySubqueriesTwoLevels(t *testing.T) {
	terms := []search.Expr{
		cond("K0", "KEYWORD", search.Eq, true, "a"),   // 2 subqueries
		cond("I1", "INT", search.Eq, false, int64(1)), // 1
		cond("K2", "KEYWORD", search.Eq, true, "b"),   // 2: over the bound
		builtin(search.BuiltinWorkflowType, "KEYWORD", search.Eq, "T"),
		cond("I3", "INT", search.Present, true), // 1
		&search.Or{Terms: []search.Expr{cond("I4", "INT", search.Eq, false, int64(4)), cond("I5", "INT", search.Eq, false, int64(5))}},
		cond("T6", "TEXT", search.Match, true, "w"), // 2
	}
	inner, outer := splitJoinable(&search.And{Terms: terms}, PostgreSQLJoinable)
	if len(inner) != 5 || inner[2] != terms[3] || inner[3] != terms[4] || inner[4] != terms[5] ||
		len(outer) != 2 || outer[0] != terms[2] || outer[1] != terms[6] {
		t.Fatalf("split: inner %v, outer %v", inner, outer)
	}
	st, err := Compile(&search.Query{Filter: &search.And{Terms: terms}, Limit: 10}, PostgreSQL, nil)
	if err != nil {
		t.Fatal(err)
	}
	sub := st.SQL[strings.Index(st.SQL, "(SELECT r.workflow_id"):strings.LastIndex(st.SQL, " OFFSET 0) r")]
	out := st.SQL[strings.LastIndex(st.SQL, " OFFSET 0) r"):]
	for _, c := range []struct {
		in   string
		what string
		n    int
	}{
		{sub, "r.run_id IN (SELECT", 4}, // K0 has a value, I1, and I4, I5 under the OR
		{sub, "NOT EXISTS (SELECT", 2},  // K0's element, I3
		{sub, "OFFSET 0", 0},
		{sub, "r.workflow_type", 1},
		{out, "r.run_id IN (SELECT", 0},
		{out, "OFFSET 0)", 5}, // the subquery's end, K2 (2), T6 (2)
		{out, "ORDER BY r.s0 DESC, r.s1 DESC, r.run_id DESC LIMIT", 1},
	} {
		if got := strings.Count(c.in, c.what); got != c.n {
			t.Errorf("%d × %q, want %d, in\n%s", got, c.what, c.n, c.in)
		}
	}
}

// TestSQLiteProbesAreFenced: with counts, the per-run probes (conditions
// counted as dense, or not counted) of the top-level AND end with the
// SQLite dialect's LIMIT, which keeps SQLite from turning them into joins;
// under an OR they are left as they are.
func TestSQLiteProbesAreFenced(t *testing.T) {
	terms := []search.Expr{
		cond("I0", "INT", search.Eq, false, int64(1)), // counted small: a list
		cond("I1", "INT", search.Eq, false, int64(1)), // counted dense: a probe
		cond("K2", "KEYWORD", search.Eq, true, "x"),   // not countable: a probe, and NOT EXISTS
		cond("I3", "INT", search.Eq, true, int64(1)),  // a probe
		&search.Or{Terms: []search.Expr{cond("I4", "INT", search.Eq, false, int64(4)), cond("I5", "INT", search.Eq, false, int64(5))}},
	}
	counts := map[*search.Cond]int{terms[0].(*search.Cond): 5, terms[1].(*search.Cond): CountCap + 1}
	st, err := Compile(&search.Query{Filter: &search.And{Terms: terms}, Limit: 10}, SQLite, counts)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(st.SQL, "EXISTS (SELECT 1 "); n != 6 { // I1, K2 (2), I3, I4, I5
		t.Fatalf("%d EXISTS, want 6:\n%s", n, st.SQL)
	}
	if n := strings.Count(st.SQL, " LIMIT 1)"); n != 3 { // I1, K2's value, I3
		t.Fatalf("%d fenced probes, want 3:\n%s", n, st.SQL)
	}
}
