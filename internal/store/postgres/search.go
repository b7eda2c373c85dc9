package postgres

import (
	"context"

	"github.com/iwf-server/iwf-server/internal/store/searchsql"
	"github.com/iwf-server/iwf-server/search"
)

// RunSearch implements engine.ReadTx: the query compiled by searchsql, with
// every literal bound as a parameter. Up to searchsql.PostgreSQLJoinable
// conditions on search attributes are semi-joins (IN subqueries) that
// PostgreSQL's planner sizes from its statistics, picking the plan, so no
// counts are needed (see searchsql.Counts); further conditions are fenced
// per-run probes, so that planning does not grow steeply with their number.
func (t *txn) RunSearch(ctx context.Context, q *search.Query) (*search.Page, error) {
	st, err := searchsql.Compile(q, searchsql.PostgreSQL, nil)
	if err != nil {
		return nil, wrap("RunSearch", err)
	}
	rows, err := t.tx.Query(ctx, st.SQL, st.Args...)
	if err != nil {
		return nil, wrap("RunSearch", err)
	}
	defer rows.Close()
	page, err := st.ReadPage(rows)
	return page, wrap("RunSearch", err)
}

// SearchAttributeTypeOf implements engine.ReadTx. search_attribute_types
// (migration 0002) is kept up to date by a trigger on search_attributes: it
// holds the type last written under each key.
func (t *txn) SearchAttributeTypeOf(ctx context.Context, key string) (search.ValueType, error) {
	var vt search.ValueType
	err := notFound(t.tx.QueryRow(ctx, `SELECT value_type FROM search_attribute_types WHERE key = $1`, key).Scan(&vt))
	return vt, wrap("SearchAttributeTypeOf", err)
}
