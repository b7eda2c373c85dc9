package postgres_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/iwf-server/iwf-server/internal/store/postgres/pgtest"
	"github.com/iwf-server/iwf-server/internal/store/searchsql"
	"github.com/iwf-server/iwf-server/internal/store/storetest"
	"github.com/iwf-server/iwf-server/search"
)

// BenchmarkSearch times typical searches over 100,000 runs (see
// storetest.BenchSearch), after an ANALYZE of the loaded tables as
// autovacuum would run. It is not part of make test:
//
//	go test -run '^$' -bench Search -benchtime 200x ./internal/store/postgres
func BenchmarkSearch(b *testing.B) {
	s, schema := pgtest.NewStoreWith(b)
	conn := pgtest.Conn(b, schema) // for EXPLAIN
	storetest.BenchSearch(b, s, storetest.SearchBenchOptions{
		Explain: func(ctx context.Context, q *search.Query) (string, error) { return explainSearch(ctx, conn, q) },
		Analyze: func(ctx context.Context) error {
			_, err := conn.Exec(ctx, "ANALYZE")
			return err
		},
	})
}

// explainSearch returns PostgreSQL's plan of a search, run once
// (EXPLAIN ANALYZE).
func explainSearch(ctx context.Context, conn *pgx.Conn, q *search.Query) (string, error) {
	st, err := searchsql.Compile(q, searchsql.PostgreSQL, nil)
	if err != nil {
		return "", err
	}
	rows, err := conn.Query(ctx, "EXPLAIN (ANALYZE, COSTS OFF) "+st.SQL, st.Args...)
	if err != nil {
		return "", err
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return strings.Join(lines, "\n"), err
}
