package searchsql

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/engine"
)

func cond(key, typ string, op engine.SearchOp, negated bool, values ...any) *engine.SearchCond {
	return &engine.SearchCond{Field: engine.SearchField{Key: key, Type: typ}, Op: op, Values: values, Negated: negated}
}

func builtin(b engine.SearchBuiltin, typ string, op engine.SearchOp, values ...any) *engine.SearchCond {
	return &engine.SearchCond{Field: engine.SearchField{Builtin: b, Type: typ}, Op: op, Values: values}
}

// markerQuery uses a distinct marker in every literal and key.
func markerQuery() (*engine.SearchQuery, []string) {
	var markers []string
	m := func() string {
		s := fmt.Sprintf("MARK%02d' OR '1'='1", len(markers))
		markers = append(markers, s)
		return s
	}
	q := &engine.SearchQuery{
		Filter: &engine.SearchOr{Terms: []engine.SearchExpr{
			&engine.SearchAnd{Terms: []engine.SearchExpr{
				cond(m(), "KEYWORD", engine.SearchEq, false, m()),
				cond(m(), "KEYWORD", engine.SearchPrefix, true, m()),
				cond(m(), "KEYWORD_ARRAY", engine.SearchIn, true, m(), m()),
				cond(m(), "TEXT", engine.SearchMatch, false, m()),
				cond(m(), "TEXT", engine.SearchMatch, true, m()),
			}},
			cond(m(), "KEYWORD", engine.SearchBetween, false, m(), m()),
			cond(m(), "INT", engine.SearchPresent, true),
			builtin(engine.BuiltinWorkflowID, "KEYWORD", engine.SearchIn, m(), m()),
			builtin(engine.BuiltinWorkflowType, "KEYWORD", engine.SearchPrefix, m()),
		}},
		Order: engine.SearchOrder{Field: engine.SearchField{Key: m(), Type: "KEYWORD"}},
		Limit: 10,
	}
	return q, markers
}

// TestLiteralsAreParameters: no literal or key reaches the SQL text; each
// is a bind parameter; placeholders are numbered 1..n.
func TestLiteralsAreParameters(t *testing.T) {
	q, markers := markerQuery()
	for _, counts := range []map[*engine.SearchCond]int{nil, {}} {
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
	a := cond("A", "INT", engine.SearchGt, false, int64(1))
	b := cond("B", "KEYWORD_ARRAY", engine.SearchEq, false, "x")
	c := cond("C", "TEXT", engine.SearchMatch, false, "w")
	neg := cond("D", "INT", engine.SearchEq, true, int64(1))
	bi := builtin(engine.BuiltinStatus, "KEYWORD", engine.SearchEq, "RUNNING")
	q := &engine.SearchQuery{Filter: &engine.SearchAnd{Terms: []engine.SearchExpr{a, &engine.SearchOr{Terms: []engine.SearchExpr{b, c, neg}}, bi}}, Limit: 5}
	counts, err := Counts(q, SQLite)
	if err != nil {
		t.Fatal(err)
	}
	var got []*engine.SearchCond
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
	st, err := Compile(q, SQLite, map[*engine.SearchCond]int{a: 10, b: 5000, c: 3})
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
	bad := []*engine.SearchQuery{
		{Limit: 0},
		{Limit: 1, Filter: cond("A", "INT", engine.SearchEq, false)},
		{Limit: 1, Filter: cond("A", "INT", engine.SearchBetween, false, int64(1))},
		{Limit: 1, Filter: cond("A", "INT", engine.SearchEq, false, "1")},
		{Limit: 1, Filter: cond("A", "DOUBLE", engine.SearchEq, false, int64(1))},
		{Limit: 1, Filter: cond("A", "BOOL", engine.SearchEq, false, "true")},
		{Limit: 1, Filter: cond("A", "DATETIME", engine.SearchEq, false, "2024")},
		{Limit: 1, Filter: cond("A", "KEYWORD", engine.SearchMatch, false, "w")},
		{Limit: 1, Filter: cond("A", "TEXT", engine.SearchEq, false, "w")},
		{Limit: 1, Filter: cond("A", "TEXT", engine.SearchMatch, false, "a", "b")},
		{Limit: 1, Filter: cond("A", "BLOB", engine.SearchEq, false, "x")},
		{Limit: 1, Filter: cond("A", "KEYWORD", engine.SearchPresent, false, "x")},
		{Limit: 1, Filter: &engine.SearchAnd{}},
		{Limit: 1, Order: engine.SearchOrder{Field: engine.SearchField{Key: "A", Type: "KEYWORD_ARRAY"}}},
		{Limit: 1, Order: engine.SearchOrder{Field: engine.SearchField{Builtin: "Nope", Type: "KEYWORD"}}},
	}
	for i, q := range bad {
		if st, err := Compile(q, SQLite, nil); err == nil {
			t.Errorf("query %d compiled: %s", i, st.SQL)
		}
	}
}

func TestCursorMustFitTheOrder(t *testing.T) {
	q := &engine.SearchQuery{Limit: 2, Cursor: `{"k":["1","2"],"r":"x"}`}
	if _, err := Compile(q, SQLite, nil); err != nil {
		t.Fatalf("a default-order cursor: %v", err)
	}
	for _, c := range []string{"", "{", `{"k":["1"],"r":"x"}`, `{"k":["a","2"],"r":"x"}`, `{"k":["1","2"]}`, `{"n":true,"r":"x"}`} {
		q := &engine.SearchQuery{Limit: 2, Cursor: c}
		if c == "" {
			continue
		}
		if _, err := Compile(q, SQLite, nil); !errors.Is(err, engine.ErrInvalidSearchCursor) {
			t.Errorf("cursor %q: %v", c, err)
		}
	}
	custom := engine.SearchOrder{Field: engine.SearchField{Key: "D", Type: "DOUBLE"}}
	for c, ok := range map[string]bool{`{"k":["1.5"],"r":"x"}`: true, `{"n":true,"r":"x"}`: true, `{"k":["x"],"r":"x"}`: false} {
		_, err := Compile(&engine.SearchQuery{Limit: 2, Order: custom, Cursor: c}, PostgreSQL, nil)
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

func TestDatetimeIsMilliseconds(t *testing.T) {
	tm := time.Date(2024, 1, 2, 3, 4, 5, 987654321, time.FixedZone("X", 3600))
	st, err := Compile(&engine.SearchQuery{Limit: 1, Filter: cond("T", "DATETIME", engine.SearchEq, false, tm)}, SQLite, nil)
	if err != nil {
		t.Fatal(err)
	}
	if st.Args[1] != tm.UnixMilli() {
		t.Fatalf("bound %v, want %d", st.Args[1], tm.UnixMilli())
	}
}
