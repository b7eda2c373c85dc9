package sqlite

import (
	"context"
	"database/sql"

	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/store/searchsql"
	"github.com/iwf-server/iwf-server/search"
)

// search_attribute_types (migration 0002) is kept up to date by triggers on
// search_attributes: it holds the type last written under each key.
var qSearchTypeOf = query(`SELECT value_type FROM search_attribute_types WHERE key = ?`)

// querier runs a statement that returns rows: a transaction or a pool.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// searchCountsHook, when set (by tests), replaces each count of
// compileSearch, so that the suite can run every shape of statement on a
// small fixture.
var searchCountsHook func(rows int) int

// compileSearch compiles a search for SQLite. SQLite's planner cannot tell
// how many rows a subquery yields, so the conditions on search attributes
// are first counted (each count reads at most searchsql.CountCap + 1 index
// entries), and the statement is shaped by the counts: see
// searchsql.Counts.
func compileSearch(ctx context.Context, db querier, q *search.Query) (*searchsql.Statement, error) {
	counts, err := searchsql.Counts(q, searchsql.SQLite)
	if err != nil {
		return nil, err
	}
	n := make(map[*search.Cond]int, len(counts))
	for _, c := range counts {
		var rows int
		if err := db.QueryRowContext(ctx, c.SQL, c.Args...).Scan(&rows); err != nil {
			return nil, err
		}
		if searchCountsHook != nil {
			rows = searchCountsHook(rows)
		}
		n[c.Cond] = rows
	}
	return searchsql.Compile(q, searchsql.SQLite, n)
}

// RunSearch implements engine.ReadTx: the query compiled by searchsql, with
// every literal bound as a parameter. The statement text depends on the
// query, so it is not prepared in advance.
func (t *txn) RunSearch(ctx context.Context, q *search.Query) (*search.Page, error) {
	st, err := compileSearch(ctx, t.tx, q)
	if err != nil {
		return nil, wrap("RunSearch", err)
	}
	rows, err := t.tx.QueryContext(ctx, st.SQL, st.Args...)
	if err != nil {
		return nil, wrap("RunSearch", err)
	}
	defer rows.Close()
	page, err := st.ReadPage(rows)
	return page, wrap("RunSearch", err)
}

// SearchAttributeTypeOf implements engine.ReadTx.
func (t *txn) SearchAttributeTypeOf(ctx context.Context, key string) (search.ValueType, error) {
	var vt search.ValueType
	err := t.queryRow(ctx, qSearchTypeOf, key).Scan(&vt)
	if err == sql.ErrNoRows {
		err = engine.ErrNotFound
	}
	return vt, wrap("SearchAttributeTypeOf", err)
}
