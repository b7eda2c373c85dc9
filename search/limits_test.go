package search

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// wantLimitError checks that err is a *Error at pos whose message contains
// msg (which names the limit's value).
func wantLimitError(t *testing.T, what string, err error, pos int, msg string) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("%s: %v, want a *search.Error", what, err)
	}
	if e.Pos != pos || !strings.Contains(e.Msg, msg) {
		t.Fatalf("%s: %q at %d, want %q at %d", what, e.Msg, e.Pos, msg, pos)
	}
}

// orOf joins n predicates made by pred with OR.
func orOf(n int, pred func(i int) string) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = pred(i)
	}
	return strings.Join(parts, " OR ")
}

func textLiteral(words int) string {
	ws := make([]string, words)
	for i := range ws {
		ws[i] = fmt.Sprintf("w%d", i)
	}
	return "'" + strings.Join(ws, " ") + "'"
}

// TestQueryLengthLimit: the query of 1,700,000 opening
// parentheses is refused by its length, before the lexer copies it, and
// quickly; a query of exactly MaxQueryLength bytes is read.
func TestQueryLengthLimit(t *testing.T) {
	huge := strings.Repeat("(", 1_700_000)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	_, err := Parse(huge)
	took := time.Since(start)
	runtime.ReadMemStats(&after)
	wantLimitError(t, "1.7 MB of '('", err, MaxQueryLength+1, "1700000 bytes long, more than the limit of 16384 bytes")
	// The lexer would copy the query into runes (4 bytes each, 6.8 MB);
	// the error alone allocates a few hundred bytes.
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<10 {
		t.Errorf("refusing a 1.7 MB query allocated %d bytes", alloc)
	}
	t.Logf("refused in %v", took)

	// Exactly at the limit: read.
	_, err = Parse(strings.Repeat(" ", MaxQueryLength-len("A = 1")) + "A = 1")
	if err != nil {
		t.Fatalf("a query of %d bytes: %v", MaxQueryLength, err)
	}
	_, err = Parse(strings.Repeat(" ", MaxQueryLength-len("A = 1")+1) + "A = 1")
	wantLimitError(t, "one byte more", err, MaxQueryLength+1, "the limit of 16384 bytes")
	// The limit counts bytes; the position counts characters.
	q := strings.Repeat("é", MaxQueryLength/2) + "x"
	_, err = Parse(q)
	wantLimitError(t, "two-byte characters", err, MaxQueryLength/2+1, "16385 bytes long")
}

// TestDepthLimit: parentheses and NOT each open a level; level MaxDepth is
// read, one more is an error at the "(" or NOT that opens it, and a
// MaxQueryLength query of "(" is refused by depth, not by a stack overflow.
func TestDepthLimit(t *testing.T) {
	nest := func(opens []string) string {
		return strings.Join(opens, "") + "A = 1" + strings.Repeat(")", strings.Count(strings.Join(opens, ""), "("))
	}
	repeat := func(s string, n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = s
		}
		return out
	}
	for _, c := range []struct {
		name  string
		opens []string
	}{
		{"parentheses", repeat("(", MaxDepth)},
		{"NOT", repeat("NOT ", MaxDepth)},
		{"both", append(repeat("(", MaxDepth/2), repeat("NOT ", MaxDepth/2)...)},
	} {
		q := nest(c.opens)
		if _, err := Parse(q); err != nil {
			t.Fatalf("%s, %d levels: %v", c.name, MaxDepth, err)
		}
		deeper := nest(append(c.opens, c.opens[0]))
		pos := len(strings.Join(c.opens, "")) + 1
		_, err := Parse(deeper)
		wantLimitError(t, fmt.Sprintf("%s, %d levels", c.name, MaxDepth+1), err, pos, "deeper than the limit of 32 levels")
	}
	// Levels close: siblings do not add up.
	q := orOf(MaxPredicates, func(int) string { return "(((A = 1)))" })
	if _, err := Parse(q); err != nil {
		t.Fatalf("shallow siblings: %v", err)
	}
	_, err := Parse(strings.Repeat("(", MaxQueryLength))
	wantLimitError(t, "16 KiB of '('", err, MaxDepth+1, "limit of 32 levels")
	_, err = Parse(strings.Repeat("NOT ", MaxQueryLength/4))
	wantLimitError(t, "16 KiB of NOT", err, 4*MaxDepth+1, "limit of 32 levels")
}

// TestPredicateLimit: MaxPredicates predicates are read, one more is an
// error at its attribute.
func TestPredicateLimit(t *testing.T) {
	q := orOf(MaxPredicates, func(i int) string { return fmt.Sprintf("A%d = %d", i%10, i) })
	if _, err := Parse(q); err != nil {
		t.Fatalf("%d predicates: %v", MaxPredicates, err)
	}
	_, err := Parse(q + " AND B IS NULL")
	wantLimitError(t, "one more", err, len(q)+len(" AND ")+1, "more predicates than the limit of 100")
}

// TestValueLimit: MaxValues values are read, in one IN list or over the
// whole query; one more is an error at that value.
func TestValueLimit(t *testing.T) {
	list := func(n, from int) string {
		vs := make([]string, n)
		for i := range vs {
			vs[i] = fmt.Sprint(from + i)
		}
		return "(" + strings.Join(vs, ",") + ")"
	}
	one := "A IN " + list(MaxValues, 0)
	if _, err := Parse(one); err != nil {
		t.Fatalf("an IN list of %d: %v", MaxValues, err)
	}
	long := "A IN " + list(MaxValues+1, 0)
	_, err := Parse(long)
	wantLimitError(t, "an IN list of 1001", err, strings.LastIndex(long, ",")+2, "more values than the limit of 1000")
	two := "A IN " + list(MaxValues/2, 0) + " OR B BETWEEN 1 AND 2 OR C NOT IN " + list(MaxValues/2-2, 0) + " OR D = 'x'"
	_, err = Parse(two)
	wantLimitError(t, "values over the query", err, len(two)-2, "more values than the limit of 1000")
}

// TestTextWordLimits: a TEXT literal of MaxTextWords words compiles, one
// of more is an error at the literal; so are TEXT literals of more than
// MaxQueryTextWords words in all (IN lists included).
func TestTextWordLimits(t *testing.T) {
	q := "CustomStringField = " + textLiteral(MaxTextWords)
	if _, err := typeQuery(q); err != nil {
		t.Fatalf("%d words: %v", MaxTextWords, err)
	}
	// Repeated words count once, as they match once.
	if _, err := typeQuery("CustomStringField = '" + strings.Repeat("a A ", 1000) + "'"); err != nil {
		t.Fatalf("one word repeated: %v", err)
	}
	_, err := typeQuery("CustomStringField != " + textLiteral(MaxTextWords+1))
	wantLimitError(t, "33 words", err, len("CustomStringField != ")+1, "has 33 words, more than the limit of 32")

	// 3 × 32 + 4 = 100 words in all.
	full := "CustomStringField IN (" + strings.Repeat(textLiteral(MaxTextWords)+", ", 3) + textLiteral(4) + ")"
	if _, err := typeQuery(full); err != nil {
		t.Fatalf("%d words in all: %v", MaxQueryTextWords, err)
	}
	over := full + " AND NOT CustomStringField = 'x'"
	_, err = typeQuery(over)
	wantLimitError(t, "101 words", err, len(over)-2, "more words than the limit of 100 in all")
}

// worstQuery is a query at the limits, built as the store tests build
// theirs (storetest.WorstSearchQuery): MaxPredicates - 4 predicates != on
// a KEYWORD and an INT attribute, and 4 TEXT predicates with
// MaxQueryTextWords words in all, every one in the top-level AND.
func worstQuery(kw, in, text string) string {
	var parts []string
	for i := 0; i < MaxPredicates-4; i++ {
		if i%2 == 0 {
			parts = append(parts, fmt.Sprintf("%s != 'absent-%d'", kw, i))
		} else {
			parts = append(parts, fmt.Sprintf("%s != %d", in, -i))
		}
	}
	for w := 0; w < MaxQueryTextWords; w += MaxTextWords {
		var ws []string
		for i := w; i < w+MaxTextWords && i < MaxQueryTextWords; i++ {
			ws = append(ws, fmt.Sprintf("w%d", i))
		}
		parts = append(parts, fmt.Sprintf("%s = '%s'", text, strings.Join(ws, " ")))
	}
	return strings.Join(parts, " AND ")
}

// TestWorstAllowedQuery: a query at the predicate and word limits fits in
// MaxQueryLength and compiles to one condition per non-TEXT predicate and
// per TEXT word.
func TestWorstAllowedQuery(t *testing.T) {
	q := worstQuery("CustomKeywordField", "CustomIntField", "CustomStringField")
	if len(q) > MaxQueryLength {
		t.Fatalf("the worst allowed query is %d bytes", len(q))
	}
	cq, err := typeQuery(q)
	if err != nil {
		t.Fatal(err)
	}
	and, ok := cq.Filter.(*And)
	if want := MaxPredicates - 4 + MaxQueryTextWords; !ok || len(and.Terms) != want {
		t.Fatalf("the worst allowed query compiles to %s, want an AND of %d conditions", dumpTyped(cq.Filter), want)
	}
	if _, err := typeQuery(q + " AND CustomIntField IS NULL"); err == nil {
		t.Fatal("one predicate more is accepted")
	}
}

// TestNULAndInvalidUTF8: a NUL in a string or a quoted name, and a byte
// that is not UTF-8, are errors at their position (PostgreSQL cannot hold
// either in text), in every kind of string.
func TestNULAndInvalidUTF8(t *testing.T) {
	cases := []struct {
		query string
		pos   int
		msg   string
	}{
		{"A = 'x\x00y'", 7, "cannot contain the NUL character"},
		{"A = \"x\x00\"", 7, "cannot contain the NUL character"},
		{"A IN ('a', '\x00')", 13, "cannot contain the NUL character"},
		{"`A\x00` = 1", 3, "cannot contain the NUL character"},
		{"A = 1 OR \x00", 10, "unexpected character '\\x00'"},
		{"A = 'x\xff'", 7, "not valid UTF-8 (byte 0xff)"},
		{"é = '\xc3'", 6, "not valid UTF-8 (byte 0xc3)"},
		{"`\xed\xa0\x80` = 1", 2, "not valid UTF-8"}, // a surrogate
	}
	for _, c := range cases {
		_, err := Parse(c.query)
		wantLimitError(t, fmt.Sprintf("%q", c.query), err, c.pos, c.msg)
		checkQueryError(t, c.query, err)
	}
	// Other control characters are ordinary characters of a string.
	if _, err := Parse("A = '\x01\t\x7f'"); err != nil {
		t.Fatal(err)
	}
}
