package crashtest

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/iwf-server/iwf-server/internal/store/postgres/pgtest"
)

// PostgresDB creates a fresh, empty schema on the test PostgreSQL server and
// returns a --db URL that puts the server's tables in it; the schema is
// dropped when the test ends (after the test's servers were killed, if they
// were started after this call). It skips the test when PostgreSQL is
// unreachable, or fails it when IWF_TEST_POSTGRES_REQUIRED=1 (see pgtest).
//
// iwf-server has no schema setting of its own: it hands the URL to pgx,
// which sends unknown URL parameters as run-time parameters, so
// ?search_path=<schema> selects the schema for every connection. The schema
// must exist before the server starts: without postgres.WithSchema the
// server's migrations do not create it.
func PostgresDB(t testing.TB) string {
	t.Helper()
	base := pgtest.URL(t)
	schema := pgtest.NewSchemaName()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("connect to PostgreSQL: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE SCHEMA `+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatalf("create schema %s: %v", schema, err)
	}
	t.Cleanup(func() { pgtest.DropSchema(t, base, schema) })
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("parse %s: %v", pgtest.EnvURL, err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// SQLiteDB returns a --db URL for a new SQLite file in the test's temporary
// directory.
func SQLiteDB(t testing.TB) string {
	return "sqlite://" + t.TempDir() + "/iwf.db"
}
