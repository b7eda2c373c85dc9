package search

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// searchSeeds are valid queries (from docs/search.md and the tests above)
// and a few near misses, the seed corpus of FuzzSearchQuery.
var searchSeeds = []string{
	"",
	"CustomIntField = 5",
	"A < 1 AND B <= -2.5 AND C > 1e3 AND D >= .5",
	"A = 'it''s'",
	`EmployerId="test-employer-id"`,
	`A = "it""s" OR A = "it\"s" OR A = "a\\b" OR A = "c:\d"`,
	`A IN ("x", 'y')`,
	"A = 'naïve ☃'",
	"A NOT BETWEEN '1' AND '5'",
	"A not starts_with 'pre'",
	"A is not null",
	"NOT NOT (A = 1)",
	"`a``b` = 'x'",
	"A = 1 order by StartTime DESC",
	"ORDER BY CloseTime asc",
	"CustomDatetimeField < '1h'",
	"CustomDatetimeField > 1000000000",
	"CustomDatetimeField = '2024-01-02T03:04:05+08:00'",
	"CustomStringField IN ('a', 'b c')",
	"CustomStringField NOT IN ('a', 'b c')",
	"CustomKeywordArrayField != 'a'",
	"ExecutionStatus IN ('Completed', 'Failed', 'Canceled', 'Terminated', 'TimedOut', 'ContinuedAsNew')",
	"NOT (CustomIntField < 1 AND (WorkflowId = 'a' OR NOT WorkflowId = 'b'))",
	"IwfWorkflowType='Type3' AND CustomIntField > 500",
	"CustomIntField BETWEEN 100 AND 110 ORDER BY CustomIntField DESC",
	"CustomBoolField = TRUE OR CustomDoubleField >= '0.01'",
	"`Weird Name` STARTS_WITH 'a%'",
	"A=1AND B=2",
	"A = 1 ; DROP TABLE runs",
	"x = 'é' AND ?",
	"CustomStringField = ', !'",
	"ORDER BY CustomStringField",
}

// limitSeeds are queries at and beyond the limits: deep parentheses and
// NOT chains, many predicates, long IN lists and TEXT literals, NUL bytes,
// invalid UTF-8 and an overlong query.
func limitSeeds() []string {
	values := func(n int) string {
		vs := make([]string, n)
		for i := range vs {
			vs[i] = fmt.Sprint(i)
		}
		return strings.Join(vs, ",")
	}
	words := func(n int) string {
		ws := make([]string, n)
		for i := range ws {
			ws[i] = fmt.Sprintf("w%d", i)
		}
		return strings.Join(ws, " ")
	}
	return []string{
		strings.Repeat("(", MaxDepth) + "A = 1" + strings.Repeat(")", MaxDepth),
		strings.Repeat("(", MaxDepth+1) + "A = 1" + strings.Repeat(")", MaxDepth+1),
		strings.Repeat("(", 4*MaxDepth),
		strings.Repeat("NOT ", MaxDepth) + "CustomIntField = 1",
		strings.Repeat("NOT ", MaxDepth+1) + "CustomIntField = 1",
		strings.Repeat("NOT (", MaxDepth/2) + "CustomStringField = 'a b'" + strings.Repeat(")", MaxDepth/2),
		strings.Repeat("CustomIntField = 1 OR ", MaxPredicates-1) + "CustomKeywordField = 'x'",
		strings.Repeat("CustomIntField != 1 AND ", MaxPredicates) + "CustomKeywordField = 'x'",
		"CustomIntField IN (" + values(MaxValues) + ")",
		"CustomIntField NOT IN (" + values(MaxValues+1) + ")",
		"CustomStringField = '" + words(MaxTextWords) + "'",
		"CustomStringField != '" + words(MaxTextWords+1) + "'",
		"CustomStringField IN ('" + words(MaxTextWords) + "', '" + words(MaxTextWords) + "', '" + words(MaxTextWords) + "', 'x y z a b')",
		"A = 'x\x00y'",
		"CustomKeywordField IN ('a', 'b\x00')",
		"CustomKeywordField = \"\x00\"",
		"`\x00` = 1",
		"\x00",
		"A = '\xff\xfe'",
		"`\xc3` IS NULL",
		strings.Repeat(" ", MaxQueryLength) + "A = 1",
	}
}

// FuzzSearchQuery parses and compiles arbitrary queries. Invariants: no
// panic; an error is a *Error (or, from Compile, a Resolver error) with a
// non-empty one-line message and a position inside the query; an accepted
// query, printed back by render, parses to the same syntax tree and
// compiles to the same typed query. (The printed form has more parentheses
// and spaces, so it is parsed with the length and depth limits widened to
// what render can add: twice the depth plus one, eight times the length.)
func FuzzSearchQuery(f *testing.F) {
	for _, s := range searchSeeds {
		f.Add(s)
	}
	for _, s := range limitSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, query string) {
		pq, err := Parse(query)
		if err != nil {
			checkQueryError(t, query, err)
			return
		}
		printed := render(pq)
		again, err := parse(printed, 8*MaxQueryLength, 2*MaxDepth+1)
		if err != nil {
			t.Fatalf("%q printed as %q, which does not parse: %v", query, printed, err)
		}
		if a, b := dumpParsed(pq), dumpParsed(again); a != b {
			t.Fatalf("%q printed as %q parses differently:\n first %s\nsecond %s", query, printed, a, b)
		}
		q, err := Compile(context.Background(), pq, testTypes, typingNow)
		if err != nil {
			checkQueryError(t, query, err)
			return
		}
		q2, err := Compile(context.Background(), again, testTypes, typingNow)
		if err != nil {
			t.Fatalf("%q compiles but its printed form %q does not: %v", query, printed, err)
		}
		if !reflect.DeepEqual(q, q2) {
			t.Fatalf("%q and its printed form %q compile differently:\n%s\n%s", query, printed, dumpTyped(q.Filter), dumpTyped(q2.Filter))
		}
		checkTyped(t, query, q.Filter)
	})
}

// checkQueryError checks the shape of an error of Parse or Compile.
func checkQueryError(t *testing.T, query string, err error) {
	t.Helper()
	msg := err.Error()
	if msg == "" || strings.ContainsAny(msg, "\n\r\u0085\u2028\u2029") {
		t.Fatalf("%q: error message %q is empty or not one line", query, msg)
	}
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("%q: error %v is not a *search.Error", query, err)
	}
	if e.Msg == "" || e.Pos < 1 || e.Pos > len([]rune(query))+1 {
		t.Fatalf("%q: error %+v has no message or a position outside the query", query, e)
	}
}

// checkTyped checks what stores rely on in a compiled filter: And and Or
// have at least two terms, conditions carry a known operator with the
// number of values it takes, and a TEXT match is on one non-empty word.
func checkTyped(t *testing.T, query string, e Expr) {
	t.Helper()
	switch e := e.(type) {
	case nil:
	case *And:
		if len(e.Terms) < 2 {
			t.Fatalf("%q: AND with %d terms", query, len(e.Terms))
		}
		for _, x := range e.Terms {
			checkTyped(t, query, x)
		}
	case *Or:
		if len(e.Terms) < 2 {
			t.Fatalf("%q: OR with %d terms", query, len(e.Terms))
		}
		for _, x := range e.Terms {
			checkTyped(t, query, x)
		}
	case *Cond:
		want := map[Op]int{Eq: 1, Lt: 1, Le: 1, Gt: 1, Ge: 1, Between: 2, Prefix: 1, Match: 1, Present: 0}
		n, ok := want[e.Op]
		switch {
		case e.Op == In:
			if len(e.Values) == 0 {
				t.Fatalf("%q: IN without values", query)
			}
		case !ok:
			t.Fatalf("%q: unknown operator %d", query, e.Op)
		case len(e.Values) != n:
			t.Fatalf("%q: operator %d with %d values", query, e.Op, len(e.Values))
		}
		if e.Op == Match {
			if w, _ := e.Values[0].(string); len(Words(w)) != 1 || Words(w)[0] != w {
				t.Fatalf("%q: TEXT match on %q, not one word", query, e.Values[0])
			}
		}
	default:
		t.Fatalf("%q: unknown node %T", query, e)
	}
}

// render prints a parsed query in the language: every attribute
// backquoted, every string single-quoted, every group in parentheses.
func render(q *Parsed) string {
	var b strings.Builder
	if q.where != nil {
		renderExpr(&b, q.where)
	}
	if q.orderBy != nil {
		b.WriteString(" ORDER BY ")
		renderToken(&b, *q.orderBy)
		if q.desc {
			b.WriteString(" DESC")
		} else {
			b.WriteString(" ASC")
		}
	}
	return b.String()
}

func renderExpr(b *strings.Builder, e searchExpr) {
	switch e := e.(type) {
	case *boolExpr:
		op := " OR "
		if e.and {
			op = " AND "
		}
		b.WriteString("(")
		for i, x := range e.terms {
			if i > 0 {
				b.WriteString(op)
			}
			renderExpr(b, x)
		}
		b.WriteString(")")
	case *notExpr:
		b.WriteString("NOT (")
		renderExpr(b, e.term)
		b.WriteString(")")
	case *predicate:
		renderToken(b, e.attr)
		b.WriteString(" " + e.opText())
		switch e.op {
		case "BETWEEN":
			b.WriteString(" ")
			renderToken(b, e.values[0])
			b.WriteString(" AND ")
			renderToken(b, e.values[1])
		case "IN":
			b.WriteString(" (")
			for i, v := range e.values {
				if i > 0 {
					b.WriteString(", ")
				}
				renderToken(b, v)
			}
			b.WriteString(")")
		case "IS NULL":
		default:
			b.WriteString(" ")
			renderToken(b, e.values[0])
		}
	}
}

func renderToken(b *strings.Builder, t token) {
	switch t.kind {
	case tIdent:
		b.WriteString("`" + strings.ReplaceAll(t.text, "`", "``") + "`")
	case tString:
		b.WriteString("'" + strings.ReplaceAll(t.text, "'", "''") + "'")
	default:
		b.WriteString(t.text)
	}
}

// dumpParsed renders a parsed query without positions, for comparison.
func dumpParsed(q *Parsed) string {
	s := dumpSyntax(q.where)
	if q.orderBy != nil {
		s += " ORDER BY " + describe(*q.orderBy)
		if q.desc {
			s += " DESC"
		}
	}
	return s
}

// TestErrorMessagesAreOneLine is the regression test of a FuzzSearchQuery
// finding: error messages quoted the query's strings and attribute names
// raw, so a newline in them split the message (and a log line) in two.
func TestErrorMessagesAreOneLine(t *testing.T) {
	for _, query := range []string{"'\r'", "A = 'x\ny' B", "`a\nb` = 1", "A = 'x\u2028'"} {
		_, err := typeQuery(query)
		if err == nil {
			t.Fatalf("%q: no error", query)
		}
		checkQueryError(t, query, err)
	}
}
