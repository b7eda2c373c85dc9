// Package storesql holds the SQL that the SQLite and PostgreSQL stores
// share: each statement is written once, in PostgreSQL's syntax ($N
// parameters), and rendered for a store by its Dialect. Where the two
// databases truly differ, a statement asks the Dialect by a named
// capability (lists as arrays or as JSON, FOR UPDATE SKIP LOCKED, several
// writes in one statement) instead of being copied per store.
//
// Statements of a store's own machinery (SQLite's write queue, PostgreSQL's
// pipelining) and its migrations stay in the store; the search compiler
// (searchsql) renders through the same Dialect. Business rules stay in Go:
// a statement here reads or writes rows, and the caller decides (the
// permit rule is engine.PermitRequest.Decide).
//
// The package imports the engine package (for the types statements take)
// and the standard library.
package storesql

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Dialect is what differs between the databases.
type Dialect struct {
	// Placeholder returns the marker of the n-th bind parameter (1-based)
	// of a statement built parameter by parameter (searchsql): "?" for
	// SQLite, "$n" for PostgreSQL.
	Placeholder func(n int) string
	// Bool converts a BOOL literal to the value bound for the bool_value
	// column (SQLite stores 0 and 1, PostgreSQL a BOOLEAN).
	Bool func(b bool) any
	// Joinable, when positive, bounds the subqueries of a search filter's
	// top-level AND that the database may turn into joins, for a store
	// that compiles without counts (see searchsql); zero: no bound.
	Joinable int
	// Fence is the clause that, written at the end of an EXISTS
	// subquery, keeps the database from turning it into a join.
	Fence string

	// postgres: the text is PostgreSQL's own; otherwise SQLite's, with
	// $N rendered ?N, lists bound as JSON arrays and rows locked by the
	// single writer.
	postgres bool
}

// SQLite is the dialect of the SQLite store.
//
// SQLite turns the EXISTS subqueries of the top-level AND into joins (up
// to its 64 tables a join) and orders them with the others; with tens of
// them it chose, for some, a range scan of the attribute's whole index
// run after run (100 conditions over 3,000 runs took 11 s). A LIMIT keeps
// a subquery what the counts made it: a probe by run id.
var SQLite = Dialect{
	Placeholder: func(int) string { return "?" },
	Bool: func(b bool) any {
		if b {
			return int64(1)
		}
		return int64(0)
	},
	Fence: " LIMIT 1",
}

// PostgreSQL is the dialect of the PostgreSQL store.
//
// PostgreSQL's planner turns each IN or [NOT] EXISTS subquery of the
// top-level AND into a semi-join (anti-join) and then searches for the
// best order of all the joins: a search whose cost grows steeply with
// their number (100 conditions took seconds to plan, 200 tens of seconds).
// Only PostgreSQLJoinable subqueries are left to it (see searchsql);
// enough for the planner to choose, among the conditions of a typical
// search, the one that drives it.
//
// PostgreSQL converts an EXISTS subquery with a LIMIT (it drops the
// LIMIT), but not one with an OFFSET, which it never flattens either.
var PostgreSQL = Dialect{
	Placeholder: func(n int) string { return fmt.Sprintf("$%d", n) },
	Bool:        func(b bool) any { return b },
	Joinable:    PostgreSQLJoinable,
	Fence:       " OFFSET 0",
	postgres:    true,
}

// PostgreSQLJoinable is the Joinable of the PostgreSQL dialect.
const PostgreSQLJoinable = 4

// Render returns q, written with PostgreSQL's $N parameters, for d:
// unchanged for PostgreSQL, with ?N for SQLite (the same numbered
// parameter, so that one may be used more than once). Text in single
// quotes is left alone.
func (d Dialect) Render(q string) string {
	if d.postgres {
		return q
	}
	var b strings.Builder
	b.Grow(len(q))
	quoted := false
	for i := 0; i < len(q); i++ {
		c := q[i]
		switch {
		case c == '\'':
			quoted = !quoted
		case c == '$' && !quoted && i+1 < len(q) && q[i+1] >= '0' && q[i+1] <= '9':
			c = '?'
		}
		b.WriteByte(c)
	}
	return b.String()
}

// ArrayParameters reports whether a list is bound as one array parameter
// (PostgreSQL; else as one JSON array, SQLite). Statements use In, NotIn
// and List rather than asking, but for a list of rows (BatchItemInsert).
func (d Dialect) ArrayParameters() bool { return d.postgres }

// In is the test that a value is one of the list bound as parameter n
// (List), whose elements are of SQL type elem: " = ANY ($n::elem[])" on
// PostgreSQL, " IN (SELECT value FROM json_each($n))" on SQLite. Either
// reads an index on the column for each element.
func (d Dialect) In(n int, elem string) string {
	if d.postgres {
		return " = ANY ($" + strconv.Itoa(n) + "::" + elem + "[])"
	}
	return " IN (SELECT value FROM json_each($" + strconv.Itoa(n) + "))"
}

// NotIn is the negation of In.
func (d Dialect) NotIn(n int, elem string) string {
	if d.postgres {
		return " <> ALL ($" + strconv.Itoa(n) + "::" + elem + "[])"
	}
	return " NOT IN (SELECT value FROM json_each($" + strconv.Itoa(n) + "))"
}

// NullOrIn is the test that the list bound as parameter n is NULL (a nil
// list: no restriction) or that a value is one of it; col is the value.
func (d Dialect) NullOrIn(col string, n int, elem string) string {
	p := "$" + strconv.Itoa(n)
	if d.postgres {
		p += "::" + elem + "[]"
	}
	return "(" + p + " IS NULL OR " + col + d.In(n, elem) + ")"
}

// List is the value bound for an In, NotIn or NullOrIn parameter: values
// themselves (a Go slice) on PostgreSQL, their JSON array on SQLite; a nil
// slice is NULL on both.
func List[T any](d Dialect, values []T) any {
	if d.postgres {
		return values
	}
	if values == nil {
		return nil
	}
	b, err := json.Marshal(values)
	if err != nil {
		// Lists are of strings and integers, which always encode.
		panic(fmt.Sprintf("storesql: list: %v", err))
	}
	return string(b)
}

// Limit is the value bound for a LIMIT parameter: n, or when n <= 0 no
// limit (NULL on PostgreSQL, -1 on SQLite).
func (d Dialect) Limit(n int) any {
	if n > 0 {
		return int64(n)
	}
	if d.postgres {
		return nil
	}
	return int64(-1)
}

// SkipLocked is the clause that ends a SELECT of rows that one of several
// claimers takes: " FOR UPDATE SKIP LOCKED" on PostgreSQL, where claimers
// on other nodes run at once; nothing on SQLite, whose single writer runs
// one claim at a time.
func (d Dialect) SkipLocked() string {
	if d.postgres {
		return " FOR UPDATE SKIP LOCKED"
	}
	return ""
}

// LockShared is the clause that ends a SELECT of rows another
// transaction must not delete before this one ends: " FOR SHARE" on
// PostgreSQL; nothing on SQLite, whose single writer runs one transaction
// at a time.
func (d Dialect) LockShared() string {
	if d.postgres {
		return " FOR SHARE"
	}
	return ""
}

// WritesInOneStatement reports whether one statement may hold several
// writes (data-modifying WITH queries, PostgreSQL): a deletion of many
// tables' rows is then one statement, one round trip (RunsDelete).
func (d Dialect) WritesInOneStatement() bool { return d.postgres }
