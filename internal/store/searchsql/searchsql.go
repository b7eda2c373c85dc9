// Package searchsql compiles an search.Query into one parameterised
// SELECT over the tables that the SQLite and PostgreSQL schemas share: runs,
// search_attributes (one typed column per value type),
// search_attribute_strings (KEYWORD_ARRAY elements) and
// search_attribute_words (the words of TEXT values, kept by triggers). The
// stores differ only in what Dialect describes (placeholders and boolean
// parameters), so both run the same statements.
//
// Every literal of the query and every search attribute key is a bind
// parameter; the only constants in the SQL text are the package's own.
//
// The statement reads:
//
//	SELECT r.workflow_id, r.run_id, <sort keys>
//	FROM runs r [LEFT JOIN search_attributes o ON o.run_id = r.run_id AND o.key = ?]
//	WHERE <filter> [AND <after the cursor>]
//	ORDER BY <sort keys>, r.run_id
//	LIMIT <page size + 1>
//
// A condition on a run column is a plain comparison; a condition on a search
// attribute is either a semi-join,
// r.run_id IN (SELECT run_id FROM search_attributes WHERE key = ? AND ...),
// or a per-run probe, EXISTS (SELECT 1 ... WHERE run_id = r.run_id AND ...).
// PostgreSQL's planner sizes semi-joins from its statistics and chooses
// between the two plans itself, so it always gets the first form. SQLite
// builds every IN list in full, which is slow for a condition that half the
// runs pass, and cannot tell how long a list will be; its store therefore
// counts, cheaply and up to CountCap, the rows of each condition first
// (Counts) and hands the counts to Compile: conditions with few rows become
// lists, the smallest of the top-level AND drives the search, and dense ones
// become probes that the database checks as it walks the runs in the
// result's order.
//
// Databases turn the subqueries of the top-level AND into joins and search
// for the best order of all of them, at a cost that grows steeply with
// their number. So a search is compiled so that they see only a few:
// PostgreSQL gets, when its top-level AND has more than PostgreSQLJoinable
// subqueries, a statement of two levels (see splitJoinable): the runs that
// pass the first conditions, sorted, in a subquery, and the other
// conditions as per-run probes fenced against the conversion (Dialect.Fence)
// that the outer query applies to them until the page is full. SQLite's
// probes are fenced too. With the limits of the search language (at most
// search.MaxPredicates predicates and search.MaxQueryTextWords TEXT words)
// planning stays in milliseconds and a search costs at most one probe per
// condition and run it reads.
//
// Paging is by keyset: the cursor holds the sort keys of the last run of a
// page, so a page costs the same however deep it is, and runs added
// meanwhile do not shift the pages.
//
// The package imports the search package (for the query types), rowfmt and
// storesql (for the Dialect) and the standard library.
package searchsql

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/iwf-server/iwf-server/internal/store/rowfmt"
	"github.com/iwf-server/iwf-server/internal/store/storesql"
	"github.com/iwf-server/iwf-server/search"
)

// Dialect is what differs between the databases: storesql's, which
// renders the stores' other statements too.
type Dialect = storesql.Dialect

// The dialects of the two stores (see storesql for what each differs in).
var (
	SQLite     = storesql.SQLite
	PostgreSQL = storesql.PostgreSQL
)

// PostgreSQLJoinable is the Joinable of the PostgreSQL dialect.
const PostgreSQLJoinable = storesql.PostgreSQLJoinable

// openCloseKey is the default order's first key: the close time, or the
// largest BIGINT for an open run, so that open runs come first in
// descending order. Migration 0002 indexes this exact expression.
const openCloseKey = `(CASE WHEN r.closed_at = 0 THEN 9223372036854775807 ELSE r.closed_at END)`

// keyKind is the Go type of a sort key.
type keyKind int

const (
	keyInt    keyKind = iota + 1 // int64 (times in ms, INT, BOOL as 0/1)
	keyFloat                     // float64
	keyString                    // string
	keyBool                      // bool
)

// Statement is a compiled search.
type Statement struct {
	// SQL is the statement text; Args its bind parameters, in order.
	SQL  string
	Args []any

	limit    int
	keys     []keyKind // sort keys selected after workflow_id and run_id
	nullable bool      // the single key may be NULL (custom attribute order)
}

// cursor is the position after the last run of a page: its sort keys,
// each formatted according to its keyKind, and its run id.
type cursor struct {
	Keys  []string `json:"k,omitempty"`
	Null  bool     `json:"n,omitempty"` // the (custom) sort key is NULL; Keys is empty
	RunID string   `json:"r"`
}

// condMode is how a condition on a search attribute is written.
type condMode int

const (
	// modeIn: r.run_id IN (SELECT run_id ... WHERE key = ? AND test), a list
	// that the database builds once; cheap when few rows pass the test, and
	// the database may also drive the search from it.
	modeIn condMode = iota
	// modeExists: EXISTS (SELECT 1 ... WHERE run_id = r.run_id AND key = ?
	// AND test), one primary key probe per run that the database visits;
	// right when many rows pass the test, so that the search can walk the
	// runs in the order of the result and stop at the page's end.
	modeExists
)

// CountCap is the number of rows above which a condition counts as dense
// (see Counts). Driving a search from a condition costs about one primary
// key lookup per row, at most CountCap of them; probing costs one lookup per
// run visited until the page is full, about 10 × runs / rows if matches are
// spread evenly (fewer than CountCap lookups once rows exceed
// sqrt(10 × runs), about 1,000 at 100,000 runs) but up to one per run when
// they cluster at the end of the order. The cap leans towards the bounded
// cost.
const CountCap = 2000

// maxCounted bounds the conditions Counts counts.
const maxCounted = 8

// builder accumulates SQL text and its parameters.
type builder struct {
	d    Dialect
	sb   strings.Builder
	args []any

	// With counts (see Compile): the mode of each condition and the
	// condition whose rows drive the search.
	counts map[*search.Cond]int
	driver *search.Cond

	orDepth int  // the Or nodes around the node being written
	fence   bool // writing the fenced conditions (see splitJoinable)
}

// fenced reports whether a subquery about to be written must be fenced
// against its conversion to a join: when it is one of the fenced
// conditions (see splitJoinable), outside any OR (a subquery under an OR
// is never converted). A fenced subquery is a correlated [NOT] EXISTS that
// ends with the dialect's Fence: it stays a per-run probe (an index lookup
// by run id), planned on its own.
func (b *builder) fenced() bool { return b.fence && b.orDepth == 0 }

// fencedProbe reports whether a per-run probe (modeExists, with counts)
// about to be written must be fenced: when it is in the top-level AND
// (where a database may turn it into a join) and the dialect has a Fence.
func (b *builder) fencedProbe() bool { return b.d.Fence != "" && b.orDepth == 0 }

// subqueries returns the number of subqueries that a term of the
// filter's top-level AND writes where the database may turn them into
// joins: none for a condition on a run column or an OR (whose subqueries
// are never converted), one or two for a condition on a search attribute
// (two for a negated test on KEYWORD elements or TEXT words: a value, and
// none that passes).
func subqueries(e search.Expr) int {
	switch e := e.(type) {
	case *search.And:
		n := 0
		for _, t := range e.Terms {
			n += subqueries(t)
		}
		return n
	case *search.Cond:
		if e.Field.Builtin != "" {
			return 0
		}
		if e.Negated && e.Op != search.Present {
			if src, err := testSource(e); err == nil && src.table != "search_attributes" {
				return 2
			}
		}
		return 1
	}
	return 0
}

// splitJoinable splits the terms of a filter's top-level AND for a
// database that plans at most max of its subqueries as joins. When the
// filter writes no more than max, outer is empty and the statement is
// written in one level. Otherwise inner holds the conditions on run
// columns, the ORs and, in order, the conditions on search attributes up
// to max subqueries; outer holds the other conditions. The statement
// then selects from a subquery of the runs that pass inner (fenced by
// OFFSET 0, so that it is planned on its own, with the estimates of its
// own conditions) and applies outer to them as fenced per-run probes:
// probes whose selectivity the planner cannot estimate would otherwise
// make it expect a handful of runs and choose nested loops over whole
// tables for the joins.
func splitJoinable(filter search.Expr, max int) (inner, outer []search.Expr) {
	terms := []search.Expr{filter}
	if a, ok := filter.(*search.And); ok {
		terms = a.Terms
	}
	total := 0
	for _, t := range terms {
		total += subqueries(t)
	}
	if total <= max {
		return terms, nil
	}
	used := 0
	for _, t := range terms {
		n := subqueries(t)
		if n == 0 || used+n <= max {
			inner = append(inner, t)
			used += n
		} else {
			outer = append(outer, t)
		}
	}
	return inner, outer
}

// modeOf returns the mode of a condition on a search attribute: without
// counts always modeIn (the database chooses its plan from statistics);
// with counts, modeIn for conditions that match at most CountCap rows and
// modeExists for the others (uncounted ones included).
func (b *builder) modeOf(c *search.Cond) condMode {
	if b.counts == nil {
		return modeIn
	}
	if n, ok := b.counts[c]; ok && n <= CountCap {
		return modeIn
	}
	return modeExists
}

func (b *builder) sql(s string) { b.sb.WriteString(s) }

// arg writes a placeholder bound to v.
func (b *builder) arg(v any) {
	b.args = append(b.args, v)
	b.sb.WriteString(b.d.Placeholder(len(b.args)))
}

// Count is a statement that counts the rows matching one condition, up to
// CountCap + 1: SELECT count(*) with one column of one row.
type Count struct {
	Cond *search.Cond
	SQL  string
	Args []any
}

// countable reports whether Counts counts a condition: a positive one on a
// search attribute (an index finds its rows).
func countable(c *search.Cond) bool {
	return c.Field.Builtin == "" && !c.Negated
}

// Counts returns the statements that count the rows matching the first few
// countable conditions of q. A store whose planner cannot size a
// subquery (SQLite) runs them and passes the results to Compile, which then
// writes dense conditions as per-run probes and drives the search from the
// smallest condition of the top-level AND. Each statement reads at most
// CountCap + 1 index entries.
func Counts(q *search.Query, d Dialect) ([]Count, error) {
	var conds []*search.Cond
	var walk func(e search.Expr)
	walk = func(e search.Expr) {
		switch e := e.(type) {
		case *search.And:
			for _, t := range e.Terms {
				walk(t)
			}
		case *search.Or:
			for _, t := range e.Terms {
				walk(t)
			}
		case *search.Cond:
			if countable(e) && len(conds) < maxCounted {
				conds = append(conds, e)
			}
		}
	}
	walk(q.Filter)
	var out []Count
	for _, c := range conds {
		if err := checkValues(c); err != nil {
			return nil, err
		}
		b := &builder{d: d}
		src, pred, err := b.matching(c)
		if err != nil {
			return nil, err
		}
		b.sql("SELECT count(*) FROM (SELECT 1 ")
		if err := b.rows(src, c.Field.Key, false, pred); err != nil {
			return nil, err
		}
		b.sql(" LIMIT ")
		b.arg(int64(CountCap + 1))
		b.sql(") AS c")
		out = append(out, Count{Cond: c, SQL: b.sb.String(), Args: b.args})
	}
	return out, nil
}

// pickDriver returns the condition of the top-level AND (or the filter
// itself) with the fewest rows, if it has at most CountCap.
func pickDriver(filter search.Expr, counts map[*search.Cond]int) *search.Cond {
	var cands []search.Expr
	switch f := filter.(type) {
	case *search.Cond:
		cands = []search.Expr{f}
	case *search.And:
		cands = f.Terms
	}
	var best *search.Cond
	for _, e := range cands {
		c, ok := e.(*search.Cond)
		if !ok {
			continue
		}
		n, ok := counts[c]
		if ok && n <= CountCap && (best == nil || n < counts[best]) {
			best = c
		}
	}
	return best
}

// Compile compiles q for dialect d. counts, when not nil, holds the results
// of the statements of Counts (by condition); see Counts.
func Compile(q *search.Query, d Dialect, counts map[*search.Cond]int) (*Statement, error) {
	if q.Limit <= 0 {
		return nil, fmt.Errorf("searchsql: limit %d, want > 0", q.Limit)
	}
	st := &Statement{limit: q.Limit}
	b := &builder{d: d, counts: counts}
	if counts != nil {
		b.driver = pickDriver(q.Filter, counts)
	}

	// Sort keys and their direction.
	var (
		keyExprs []string // selected and ordered, before r.run_id
		join     bool
		custom   string // the typed column of o, for a custom order
	)
	dir := " ASC"
	cmp := ">"
	if q.Order.Desc || q.Order.IsDefault() {
		dir, cmp = " DESC", "<"
	}
	switch {
	case q.Order.IsDefault():
		keyExprs = []string{openCloseKey, "r.started_at"}
		st.keys = []keyKind{keyInt, keyInt}
	case q.Order.Field.Builtin != "":
		col, kind, err := builtinColumn(q.Order.Field.Builtin)
		if err != nil {
			return nil, err
		}
		if col != "r.run_id" {
			keyExprs = []string{col}
			st.keys = []keyKind{kind}
		}
	default:
		col, err := attributeColumn(q.Order.Field.Type)
		if err != nil {
			return nil, err
		}
		custom = "o." + col
		join = true
		keyExprs = []string{custom}
		st.keys = []keyKind{orderKind(q.Order.Field.Type)}
		st.nullable = true
	}

	// The keyset condition of the cursor, if any.
	var after func() error
	if q.Cursor != "" {
		c, vals, err := decodeCursor(q.Cursor, st, d)
		if err != nil {
			return nil, err
		}
		after = func() error {
			b.after(c, vals, keyExprs, custom, cmp)
			return nil
		}
	}
	var inner, outer []search.Expr
	if d.Joinable > 0 && counts == nil && q.Filter != nil {
		inner, outer = splitJoinable(q.Filter, d.Joinable)
	}
	split := len(outer) > 0

	// The expressions of the ORDER BY before r.run_id, and their
	// directions.
	var sortExprs, sortDirs []string
	if custom != "" {
		sortExprs, sortDirs = append(sortExprs, custom+" IS NULL"), append(sortDirs, " ASC")
	}
	for _, k := range keyExprs {
		sortExprs, sortDirs = append(sortExprs, k), append(sortDirs, dir)
	}
	orderBy := func(exprs []string) {
		b.sql(" ORDER BY ")
		for i, k := range exprs {
			b.sql(k + sortDirs[i] + ", ")
		}
		b.sql("r.run_id" + dir)
	}

	if split {
		// SELECT r.workflow_id, r.run_id, r.s<key> … FROM (SELECT
		// r.workflow_id, r.run_id, <sort expression> AS s0, … FROM runs r
		// [LEFT JOIN o] WHERE <inner> [AND <after the cursor>] ORDER BY …
		// OFFSET 0) r WHERE <outer> ORDER BY r.s0, …, r.run_id LIMIT n:
		// the subquery is planned for all its rows (the outer query
		// sorts), and sorts them; the outer query reads them in that
		// order (its ORDER BY names the subquery's sorted columns, so the
		// planner adds no sort), probes each with the outer conditions
		// and stops when the page is full.
		cols := make([]string, len(sortExprs))
		for i := range sortExprs {
			cols[i] = fmt.Sprintf("r.s%d", i)
		}
		b.sql("SELECT r.workflow_id, r.run_id")
		for _, c := range cols[len(cols)-len(keyExprs):] {
			b.sql(", " + c)
		}
		b.sql(" FROM (SELECT r.workflow_id, r.run_id")
		for i, k := range sortExprs {
			b.sql(fmt.Sprintf(", %s AS s%d", k, i))
		}
		b.sql(" FROM runs r")
		if join {
			b.sql(" LEFT JOIN search_attributes o ON o.run_id = r.run_id AND o.key = ")
			b.arg(q.Order.Field.Key)
		}
		var conds []func() error
		for _, t := range inner {
			conds = append(conds, func() error { return b.expr(t) })
		}
		if after != nil {
			conds = append(conds, after)
		}
		if err := b.where(conds); err != nil {
			return nil, err
		}
		orderBy(sortExprs)
		b.sql(" OFFSET 0) r")
		conds = nil
		b.fence = true
		for _, t := range outer {
			conds = append(conds, func() error { return b.expr(t) })
		}
		if err := b.where(conds); err != nil {
			return nil, err
		}
		b.fence = false
		orderBy(cols)
		b.sql(" LIMIT ")
		b.arg(int64(q.Limit) + 1)
		st.SQL, st.Args = b.sb.String(), b.args
		return st, nil
	}

	b.sql("SELECT r.workflow_id, r.run_id")
	for _, k := range keyExprs {
		b.sql(", " + k)
	}
	b.sql(" FROM ")
	if c := b.driver; c != nil {
		// The driving rows first: CROSS JOIN keeps this loop order in
		// SQLite. A run has one row per key in search_attributes, but may
		// have several matching elements.
		src, pred, err := b.matching(c)
		if err != nil {
			return nil, err
		}
		b.sql("(SELECT ")
		if src == stringsSource {
			b.sql("DISTINCT ")
		}
		b.sql(src.alias + ".run_id AS run_id ")
		if err := b.rows(src, c.Field.Key, false, pred); err != nil {
			return nil, err
		}
		b.sql(") d CROSS JOIN runs r ON r.run_id = d.run_id")
	} else {
		b.sql("runs r")
	}
	if join {
		b.sql(" LEFT JOIN search_attributes o ON o.run_id = r.run_id AND o.key = ")
		b.arg(q.Order.Field.Key)
	}
	var where []func() error
	if q.Filter != nil {
		where = append(where, func() error { return b.expr(q.Filter) })
	}
	if after != nil {
		where = append(where, after)
	}
	if err := b.where(where); err != nil {
		return nil, err
	}
	orderBy(sortExprs)
	b.sql(" LIMIT ")
	b.arg(int64(q.Limit) + 1)
	st.SQL, st.Args = b.sb.String(), b.args
	return st, nil
}

// where writes " WHERE (c1) AND (c2) …" for the conditions that conds
// write; nothing when there are none.
func (b *builder) where(conds []func() error) error {
	for i, c := range conds {
		if i == 0 {
			b.sql(" WHERE ")
		} else {
			b.sql(" AND ")
		}
		b.sql("(")
		if err := c(); err != nil {
			return err
		}
		b.sql(")")
	}
	return nil
}

// after writes the keyset condition "the row sorts after the cursor" (whose
// keys are vals).
func (b *builder) after(c *cursor, vals []any, keyExprs []string, custom, cmp string) {
	switch {
	case custom != "" && c.Null:
		// The cursor is among the runs without a value, which come last.
		b.sql(custom + " IS NULL AND r.run_id " + cmp + " ")
		b.arg(c.RunID)
	case custom != "":
		b.sql(custom + " IS NULL OR " + custom + " " + cmp + " ")
		b.arg(vals[0])
		b.sql(" OR (" + custom + " = ")
		b.arg(vals[0])
		b.sql(" AND r.run_id " + cmp + " ")
		b.arg(c.RunID)
		b.sql(")")
	default:
		// A row value comparison, which both databases run as an index
		// range when an index has these columns in this order; SQLite only
		// when they are plain columns, so the first key is also bounded on
		// its own (an expression index serves that).
		if len(keyExprs) > 0 {
			b.sql(keyExprs[0] + " " + cmp + "= ")
			b.arg(vals[0])
			b.sql(" AND ")
		}
		b.sql("(")
		for _, k := range keyExprs {
			b.sql(k + ", ")
		}
		b.sql("r.run_id) " + cmp + " (")
		for _, v := range vals {
			b.arg(v)
			b.sql(", ")
		}
		b.arg(c.RunID)
		b.sql(")")
	}
}

// decodeCursor parses a cursor issued for a statement with the same sort
// keys and returns it with its key values, ready to bind.
func decodeCursor(s string, st *Statement, d Dialect) (*cursor, []any, error) {
	var c cursor
	bad := fmt.Errorf("searchsql: %w", search.ErrInvalidCursor)
	if err := json.Unmarshal([]byte(s), &c); err != nil || c.RunID == "" {
		return nil, nil, bad
	}
	if c.Null {
		if !st.nullable || len(c.Keys) != 0 {
			return nil, nil, bad
		}
		return &c, nil, nil
	}
	if len(c.Keys) != len(st.keys) {
		return nil, nil, bad
	}
	vals := make([]any, len(c.Keys))
	for i, k := range st.keys {
		var err error
		switch k {
		case keyInt:
			vals[i], err = strconv.ParseInt(c.Keys[i], 10, 64)
		case keyFloat:
			vals[i], err = strconv.ParseFloat(c.Keys[i], 64)
		case keyBool:
			var x bool
			x, err = strconv.ParseBool(c.Keys[i])
			vals[i] = d.Bool(x)
		default:
			vals[i] = c.Keys[i]
		}
		if err != nil {
			return nil, nil, bad
		}
	}
	return &c, vals, nil
}

// builtinColumn returns the runs column of a built-in field.
func builtinColumn(f search.Builtin) (string, keyKind, error) {
	switch f {
	case search.BuiltinWorkflowID:
		return "r.workflow_id", keyString, nil
	case search.BuiltinRunID:
		return "r.run_id", keyString, nil
	case search.BuiltinWorkflowType:
		return "r.workflow_type", keyString, nil
	case search.BuiltinStatus:
		return "r.status", keyString, nil
	case search.BuiltinStartTime:
		return "r.started_at", keyInt, nil
	case search.BuiltinCloseTime:
		return "r.closed_at", keyInt, nil
	}
	return "", 0, fmt.Errorf("searchsql: unknown built-in field %q", f)
}

// attributeColumn returns the column of search_attributes that holds a
// value type.
func attributeColumn(valueType search.ValueType) (string, error) {
	switch valueType {
	case search.Keyword, search.Text:
		return "string_value", nil
	case search.Int:
		return "int_value", nil
	case search.Double:
		return "double_value", nil
	case search.Bool:
		return "bool_value", nil
	case search.Datetime:
		return "time_value", nil
	}
	return "", fmt.Errorf("searchsql: no scalar column for type %q", valueType)
}

func orderKind(valueType search.ValueType) keyKind {
	switch valueType {
	case search.Double:
		return keyFloat
	case search.Keyword:
		return keyString
	case search.Bool:
		return keyBool
	}
	return keyInt
}

// expr writes a filter.
func (b *builder) expr(e search.Expr) error {
	switch e := e.(type) {
	case *search.And:
		return b.join(e.Terms, " AND ")
	case *search.Or:
		b.orDepth++
		defer func() { b.orDepth-- }()
		return b.join(e.Terms, " OR ")
	case *search.Cond:
		return b.cond(e)
	}
	return fmt.Errorf("searchsql: unknown filter node %T", e)
}

func (b *builder) join(terms []search.Expr, op string) error {
	if len(terms) == 0 {
		return fmt.Errorf("searchsql: empty%s", op)
	}
	b.sql("(")
	for i, t := range terms {
		if i > 0 {
			b.sql(op)
		}
		if err := b.expr(t); err != nil {
			return err
		}
	}
	b.sql(")")
	return nil
}

func (b *builder) cond(c *search.Cond) error {
	if err := checkValues(c); err != nil {
		return err
	}
	if c.Field.Builtin != "" {
		return b.builtinCond(c)
	}
	if b.driver == c {
		// The join with the driving rows applies it already.
		b.sql("1 = 1")
		return nil
	}
	return b.attributeCond(c)
}

// checkValues checks the number of values of a condition.
func checkValues(c *search.Cond) error {
	n := len(c.Values)
	ok := false
	switch c.Op {
	case search.Eq, search.Lt, search.Le, search.Gt, search.Ge, search.Prefix:
		ok = n == 1
	case search.Between:
		ok = n == 2
	case search.In:
		ok = n > 0
	case search.Match:
		ok = n == 1
	case search.Present:
		ok = n == 0
	}
	if !ok {
		return fmt.Errorf("searchsql: operator %d with %d values", c.Op, n)
	}
	if c.Op == search.Match && c.Field.Type != "TEXT" {
		return fmt.Errorf("searchsql: word match on a %s field", c.Field.Type)
	}
	if c.Field.Type == search.Text && c.Op != search.Match && c.Op != search.Present {
		return fmt.Errorf("searchsql: operator %d on a TEXT field", c.Op)
	}
	return nil
}

func (b *builder) builtinCond(c *search.Cond) error {
	col, _, err := builtinColumn(c.Field.Builtin)
	if err != nil {
		return err
	}
	closeTime := c.Field.Builtin == search.BuiltinCloseTime
	if c.Op == search.Present {
		switch {
		case closeTime && c.Negated:
			b.sql("r.closed_at = 0")
		case closeTime:
			b.sql("r.closed_at <> 0")
		case c.Negated:
			b.sql("1 = 0")
		default:
			b.sql("1 = 1")
		}
		return nil
	}
	b.sql("(")
	if closeTime {
		b.sql("r.closed_at <> 0 AND ")
	}
	if c.Negated {
		b.sql("NOT ")
	}
	b.sql("(")
	if err := b.test(col, c); err != nil {
		return err
	}
	b.sql("))")
	return nil
}

// source is a table of search attribute rows that a condition reads: the
// table, its alias and the column of the value.
type source struct{ table, alias, col string }

// The tables of search attribute values: typed scalars (one row per run and
// key), KEYWORD_ARRAY elements and the words of TEXT values (one row per
// element or word).
var (
	stringsSource = source{"search_attribute_strings", "e", "e.value"}
	wordsSource   = source{"search_attribute_words", "w", "w.word"}
)

// testSource returns the rows that a condition's test reads.
func testSource(c *search.Cond) (source, error) {
	switch {
	case c.Field.Type == search.KeywordArray, c.Field.Type == search.Keyword && c.Field.Builtin == "":
		// One family, as in Temporal: a KEYWORD condition matches any
		// element of a list written under the key, and a single value is
		// a one-element list.
		return stringsSource, nil
	case c.Op == search.Match:
		return wordsSource, nil
	}
	col, err := attributeColumn(c.Field.Type)
	if err != nil {
		return source{}, err
	}
	return source{"search_attributes", "s", "s." + col}, nil
}

// presence returns the rows that show a field has a value, and the
// predicate they must satisfy (nil: any row): an element for a
// KEYWORD_ARRAY, a non-NULL column of the field's type otherwise.
func (b *builder) presence(f search.Field) (source, func() error, error) {
	if f.Type == search.KeywordArray || f.Type == search.Keyword && f.Builtin == "" {
		return stringsSource, nil, nil
	}
	col, err := attributeColumn(f.Type)
	if err != nil {
		return source{}, nil, err
	}
	src := source{"search_attributes", "s", "s." + col}
	return src, func() error {
		b.sql(src.col + " IS NOT NULL")
		return nil
	}, nil
}

// matching returns where the rows that make c hold (c positive) are, and
// their predicate.
func (b *builder) matching(c *search.Cond) (source, func() error, error) {
	if c.Op == search.Present {
		return b.presence(c.Field)
	}
	src, err := testSource(c)
	if err != nil {
		return source{}, nil, err
	}
	return src, func() error { return b.test(src.col, c) }, nil
}

// rows writes "FROM <table> <alias> WHERE <alias>.key = ? AND <pred>" for
// the rows of src under key that satisfy pred (all its rows when pred is
// nil); correlated restricts them to the run r.
func (b *builder) rows(src source, key string, correlated bool, pred func() error) error {
	b.sql("FROM " + src.table + " " + src.alias + " WHERE ")
	if correlated {
		b.sql(src.alias + ".run_id = r.run_id AND ")
	}
	b.sql(src.alias + ".key = ")
	b.arg(key)
	if pred != nil {
		b.sql(" AND ")
		return pred()
	}
	return nil
}

// member writes "the run has a row of src under key that satisfies pred",
// as an IN list or a correlated EXISTS according to mode.
func (b *builder) member(src source, key string, mode condMode, pred func() error) error {
	if fenced := b.fenced(); fenced || mode == modeExists {
		if mode == modeExists && b.counts != nil {
			fenced = b.fencedProbe()
		}
		b.sql("EXISTS (SELECT 1 ")
		if err := b.rows(src, key, true, pred); err != nil {
			return err
		}
		if fenced {
			b.sql(b.d.Fence)
		}
	} else {
		b.sql("r.run_id IN (SELECT " + src.alias + ".run_id ")
		if err := b.rows(src, key, false, pred); err != nil {
			return err
		}
	}
	b.sql(")")
	return nil
}

// absent writes "the run has no row of src under key that satisfies pred".
func (b *builder) absent(src source, key string, pred func() error) error {
	fenced := b.fenced()
	b.sql("NOT EXISTS (SELECT 1 ")
	if err := b.rows(src, key, true, pred); err != nil {
		return err
	}
	if fenced {
		b.sql(b.d.Fence)
	}
	b.sql(")")
	return nil
}

// attributeCond writes a condition on a search attribute.
func (b *builder) attributeCond(c *search.Cond) error {
	mode := b.modeOf(c)
	key := c.Field.Key
	if !c.Negated {
		src, pred, err := b.matching(c)
		if err != nil {
			return err
		}
		return b.member(src, key, mode, pred)
	}
	psrc, ppred, err := b.presence(c.Field)
	if err != nil {
		return err
	}
	if c.Op == search.Present {
		return b.absent(psrc, key, ppred)
	}
	tsrc, err := testSource(c)
	if err != nil {
		return err
	}
	test := func() error { return b.test(tsrc.col, c) }
	if tsrc.table == "search_attributes" {
		// One row holds the value: it must fail the test.
		return b.member(psrc, key, mode, func() error {
			b.sql(psrc.col + " IS NOT NULL AND NOT (")
			if err := test(); err != nil {
				return err
			}
			b.sql(")")
			return nil
		})
	}
	// A value (an element, or a TEXT value), and no element or word that
	// passes the test.
	b.sql("(")
	if err := b.member(psrc, key, mode, ppred); err != nil {
		return err
	}
	b.sql(" AND ")
	if err := b.absent(tsrc, key, test); err != nil {
		return err
	}
	b.sql(")")
	return nil
}

// test writes the positive test of c on column col (never NULL here).
func (b *builder) test(col string, c *search.Cond) error {
	vals := make([]any, len(c.Values))
	for i, v := range c.Values {
		x, err := b.value(c.Field, v)
		if err != nil {
			return err
		}
		vals[i] = x
	}
	binop := func(op string) {
		b.sql(col + " " + op + " ")
		b.arg(vals[0])
	}
	switch c.Op {
	case search.Eq:
		binop("=")
	case search.Lt:
		binop("<")
	case search.Le:
		binop("<=")
	case search.Gt:
		binop(">")
	case search.Ge:
		binop(">=")
	case search.Between:
		b.sql(col + " >= ")
		b.arg(vals[0])
		b.sql(" AND " + col + " <= ")
		b.arg(vals[1])
	case search.In:
		b.sql(col + " IN (")
		for i, v := range vals {
			if i > 0 {
				b.sql(", ")
			}
			b.arg(v)
		}
		b.sql(")")
	case search.Prefix:
		p, ok := c.Values[0].(string)
		if !ok {
			return fmt.Errorf("searchsql: STARTS_WITH needs a string, got %T", c.Values[0])
		}
		// A byte-order range rather than LIKE: it uses the index, and it is
		// case-sensitive in both databases.
		b.sql(col + " >= ")
		b.arg(p)
		if hi, ok := prefixEnd(p); ok {
			b.sql(" AND " + col + " < ")
			b.arg(hi)
		}
	case search.Match:
		// col is search_attribute_words.word: one row per word.
		binop("=")
	default:
		return fmt.Errorf("searchsql: unknown operator %d", c.Op)
	}
	return nil
}

// value converts a literal to the bound value of its column.
func (b *builder) value(f search.Field, v any) (any, error) {
	switch f.Type {
	case search.Datetime:
		t, ok := v.(time.Time)
		if !ok {
			return nil, fmt.Errorf("searchsql: DATETIME value %T", v)
		}
		if f.Builtin != "" {
			return rowfmt.ToMs(t), nil // a runs column: milliseconds
		}
		return rowfmt.ToNs(t), nil
	case search.Int:
		if _, ok := v.(int64); !ok {
			return nil, fmt.Errorf("searchsql: INT value %T", v)
		}
	case search.Double:
		if _, ok := v.(float64); !ok {
			return nil, fmt.Errorf("searchsql: DOUBLE value %T", v)
		}
	case search.Bool:
		x, ok := v.(bool)
		if !ok {
			return nil, fmt.Errorf("searchsql: BOOL value %T", v)
		}
		return b.d.Bool(x), nil
	default:
		if _, ok := v.(string); !ok {
			return nil, fmt.Errorf("searchsql: %s value %T", f.Type, v)
		}
	}
	return v, nil
}

// prefixEnd returns the smallest string greater than every string that
// starts with p, in byte (= code point) order: p with its last character
// incremented, after dropping trailing U+10FFFF. ok is false when there is
// none (p is empty or made of U+10FFFF only).
func prefixEnd(p string) (string, bool) {
	rs := []rune(p)
	for len(rs) > 0 {
		last := rs[len(rs)-1]
		rs = rs[:len(rs)-1]
		if last == utf8.MaxRune {
			continue
		}
		next := last + 1
		if next >= 0xD800 && next <= 0xDFFF { // surrogates are not characters
			next = 0xE000
		}
		return string(append(rs, next)), true
	}
	return "", false
}

// Page collects the rows of a compiled statement into a SearchPage.
type Page struct {
	st   *Statement
	runs []search.Run
	last []any // scan destinations of the last row
	more bool
}

// NewPage starts collecting the rows of st.
func (st *Statement) NewPage() *Page { return &Page{st: st} }

// Scan reads one result row with scan (sql.Rows.Scan or pgx.Rows.Scan).
func (p *Page) Scan(scan func(dest ...any) error) error {
	var wf, run string
	dest := []any{&wf, &run}
	keys := make([]any, len(p.st.keys))
	for i, k := range p.st.keys {
		switch {
		case k == keyString:
			keys[i] = new(sql.NullString)
		case k == keyFloat:
			keys[i] = new(sql.NullFloat64)
		case k == keyBool:
			keys[i] = new(sql.NullBool)
		default:
			keys[i] = new(sql.NullInt64)
		}
	}
	if err := scan(append(dest, keys...)...); err != nil {
		return err
	}
	if len(p.runs) == p.st.limit {
		p.more = true
		return nil
	}
	p.runs = append(p.runs, search.Run{WorkflowID: wf, RunID: run})
	p.last = keys
	return nil
}

// Rows is a result set of either driver (*sql.Rows, pgx.Rows).
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// ReadPage reads every row of st's result into a search page.
func (st *Statement) ReadPage(rows Rows) (*search.Page, error) {
	page := st.NewPage()
	for rows.Next() {
		if err := page.Scan(rows.Scan); err != nil {
			return nil, err
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return page.Result()
}

// Result returns the page: at most the query's limit of runs, and a cursor
// when more rows followed.
func (p *Page) Result() (*search.Page, error) {
	page := &search.Page{Runs: p.runs}
	if !p.more || len(p.runs) == 0 {
		return page, nil
	}
	c := cursor{RunID: p.runs[len(p.runs)-1].RunID}
	for _, k := range p.last {
		var (
			v     string
			valid bool
		)
		switch k := k.(type) {
		case *sql.NullInt64:
			v, valid = strconv.FormatInt(k.Int64, 10), k.Valid
		case *sql.NullFloat64:
			v, valid = strconv.FormatFloat(k.Float64, 'g', -1, 64), k.Valid
		case *sql.NullString:
			v, valid = k.String, k.Valid
		case *sql.NullBool:
			v, valid = strconv.FormatBool(k.Bool), k.Valid
		}
		if !valid {
			if !p.st.nullable {
				return nil, fmt.Errorf("searchsql: NULL sort key in a built-in order")
			}
			c.Null = true
			continue
		}
		c.Keys = append(c.Keys, v)
	}
	b, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	page.Cursor = string(b)
	return page, nil
}
