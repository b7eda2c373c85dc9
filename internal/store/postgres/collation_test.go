package postgres_test

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/store/postgres"
	"github.com/iwf-server/iwf-server/internal/store/postgres/pgtest"
	"github.com/iwf-server/iwf-server/search"
)

// linguisticDB is the database, kept between runs, whose default
// collation is linguistic. It is created once and not dropped: DROP
// DATABASE waits for a checkpoint, which under a loaded test run took
// minutes (a spread checkpoint syncing tens of thousands of files the
// other tests' schemas left), longer than any bound a cleanup could keep.
// Each test works in a schema of its own in it, dropped when it ends.
const linguisticDB = "iwf_test_linguistic"

// linguisticDatabase returns the URL of linguisticDB, created when missing
// with a linguistic default collation (en_US from the C library when the
// system has it, ICU's en-US otherwise), and a new schema in it, dropped
// when the test ends. It checks that the collation really orders
// 'Tenant-a9' between 'tenant-a' and 'tenant-b', as a prefix range would
// take it in.
func linguisticDatabase(t *testing.T) (dbURL, schema string) {
	t.Helper()
	base := pgtest.URL(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	var exists bool
	if err := admin.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, linguisticDB).Scan(&exists); err != nil {
		t.Fatal(err)
	}
	options := []string{
		`LC_COLLATE 'en_US.UTF-8' LC_CTYPE 'en_US.UTF-8'`,
		`LOCALE_PROVIDER icu ICU_LOCALE 'en-US' LOCALE 'C.UTF-8'`,
		`LOCALE_PROVIDER icu ICU_LOCALE 'en-US' LOCALE 'C'`,
	}
	for i := 0; !exists && i < len(options); i++ {
		_, err := admin.Exec(ctx, `CREATE DATABASE `+linguisticDB+` TEMPLATE template0 ENCODING 'UTF8' `+options[i])
		var pgErr *pgconn.PgError
		switch {
		case err == nil:
			exists = true
			t.Logf("database %s created: %s", linguisticDB, options[i])
		case errors.As(err, &pgErr) && pgErr.Code == "42P04": // duplicate_database: another test run created it
			exists = true
		default:
			t.Logf("CREATE DATABASE ... %s: %v", options[i], err)
		}
	}
	if !exists {
		t.Fatal("no linguistic collation to create a database with (neither en_US.UTF-8 nor ICU)")
	}
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + linguisticDB
	dbURL = u.String()
	c, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	var inRange bool
	if err := c.QueryRow(ctx, `SELECT 'Tenant-a9'::text >= 'tenant-a' AND 'Tenant-a9'::text < 'tenant-b'`).Scan(&inRange); err != nil {
		t.Fatal(err)
	}
	if !inRange {
		t.Fatalf("the default collation of database %s is byte order: the test would prove nothing", linguisticDB)
	}
	schema = pgtest.NewSchemaName()
	t.Cleanup(func() { pgtest.DropSchema(t, dbURL, schema) })
	return dbURL, schema
}

// TestByteOrderOnLinguisticDatabase runs prefix searches and orders by a
// string on a database whose default collation is linguistic: the store
// compares in byte order all the same (every text column is COLLATE "C"),
// so STARTS_WITH 'tenant-a' matches neither 'Tenant-a9' nor 'tenant-A2',
// and an order by a keyword attribute is byte order.
func TestByteOrderOnLinguisticDatabase(t *testing.T) {
	dbURL, schema := linguisticDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := postgres.Open(ctx, dbURL, postgres.WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}

	ids := []string{"tenant-a", "tenant-a1", "Tenant-a9", "tenant-A2", "tenant-b1", "tenant-ab", "TENANT-A3", "tenant-a-z", "tenant-á"}
	const key = "Tenant"
	err = s.Update(ctx, func(ctx context.Context, tx engine.Tx) error {
		for i, id := range ids {
			r := &engine.Run{RunID: "r-" + id, WorkflowID: id, WorkflowType: id, Status: engine.RunRunning, StartedAt: time.UnixMilli(int64(1000 + i))}
			if err := tx.RunInsert(ctx, r); err != nil {
				return err
			}
			v := id
			if err := tx.SearchAttributeUpsert(ctx, r.RunID, []*engine.SearchAttribute{
				{Key: key, ValueType: search.Keyword, String: &v},
				{Key: key + "Array", ValueType: search.KeywordArray, Strings: []string{"x", v}},
			}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	find := func(q *search.Query) []string {
		t.Helper()
		var out []string
		err := s.View(ctx, func(ctx context.Context, tx engine.ReadTx) error {
			p, err := tx.RunSearch(ctx, q)
			if err != nil {
				return err
			}
			for _, r := range p.Runs {
				out = append(out, r.WorkflowID)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	want := []string{"tenant-a", "tenant-a-z", "tenant-a1", "tenant-ab"} // byte order
	for _, f := range []search.Field{
		{Builtin: search.BuiltinWorkflowID, Type: search.Keyword},
		{Builtin: search.BuiltinWorkflowType, Type: search.Keyword},
		{Key: key, Type: search.Keyword},
		{Key: key + "Array", Type: search.KeywordArray},
	} {
		got := find(&search.Query{Limit: 100,
			Filter: &search.Cond{Field: f, Op: search.Prefix, Values: []any{"tenant-a"}},
			Order:  search.Order{Field: search.Field{Key: key, Type: search.Keyword}}})
		if !slices.Equal(got, want) {
			t.Errorf("STARTS_WITH 'tenant-a' on %s%s: %q, want %q", f.Builtin, f.Key, got, want)
		}
		got = find(&search.Query{Limit: 100,
			Filter: &search.Cond{Field: f, Op: search.Between, Values: []any{"tenant-a", "tenant-b"}},
			Order:  search.Order{Field: search.Field{Key: key, Type: search.Keyword}}})
		if !slices.Equal(got, want) {
			t.Errorf("BETWEEN 'tenant-a' AND 'tenant-b' on %s%s: %q, want %q", f.Builtin, f.Key, got, want)
		}
	}
	byteOrder := slices.Clone(ids)
	sort.Strings(byteOrder)
	for _, desc := range []bool{false, true} {
		got := find(&search.Query{Limit: 100, Order: search.Order{Field: search.Field{Key: key, Type: search.Keyword}, Desc: desc}})
		want := slices.Clone(byteOrder)
		if desc {
			slices.Reverse(want)
		}
		if !slices.Equal(got, want) {
			t.Errorf("ORDER BY %s (desc %v): %q, want byte order %q", key, desc, got, want)
		}
	}
}

// TestTextColumnsAreByteOrder checks the schema the migrations build:
// every text column of the store's tables, and every index key on one,
// compares in byte order ("C"), whatever the database's default
// collation. A migration that adds a text column without COLLATE "C"
// fails it.
func TestTextColumnsAreByteOrder(t *testing.T) {
	_, schema := pgtest.NewStoreWith(t)
	conn := pgtest.Conn(t, schema)
	ctx := context.Background()
	rows, err := conn.Query(ctx, `SELECT c.relname || '.' || a.attname, coalesce(co.collname, '')
		FROM pg_attribute a
		JOIN pg_class c ON c.oid = a.attrelid
		JOIN pg_namespace n ON n.oid = c.relnamespace
		LEFT JOIN pg_collation co ON co.oid = a.attcollation
		WHERE n.nspname = $1 AND c.relkind IN ('r', 'i', 'p') AND a.attnum > 0 AND NOT a.attisdropped
			AND c.relname <> 'schema_migrations' -- the migrator's record, never compared
			AND a.atttypid IN ('text'::regtype, 'varchar'::regtype, 'bpchar'::regtype)
		ORDER BY 1`, schema)
	if err != nil {
		t.Fatal(err)
	}
	type column struct{ Name, Coll string }
	cols, err := pgx.CollectRows(rows, pgx.RowToStructByPos[column])
	if err != nil {
		t.Fatal(err)
	}
	if len(cols) < 20 {
		t.Fatalf("only %d text columns found: %v", len(cols), cols)
	}
	for _, c := range cols {
		if c.Coll != "C" {
			t.Errorf("%s: collation %q, want \"C\"", c.Name, c.Coll)
		}
	}
	// Index keys that are expressions take their collation from the index.
	var bad []string
	rows, err = conn.Query(ctx, `SELECT ic.relname || ' key ' || k.i
		FROM pg_index x
		JOIN pg_class ic ON ic.oid = x.indexrelid
		JOIN pg_namespace n ON n.oid = ic.relnamespace
		CROSS JOIN LATERAL generate_subscripts(x.indcollation::oid[], 1) AS k(i)
		WHERE n.nspname = $1 AND (x.indcollation::oid[])[k.i] <> 0
			AND (x.indcollation::oid[])[k.i] <> (SELECT oid FROM pg_collation WHERE collname = 'C' AND collnamespace = 'pg_catalog'::regnamespace)`, schema)
	if err != nil {
		t.Fatal(err)
	}
	if bad, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		t.Fatal(err)
	}
	if len(bad) > 0 {
		t.Errorf("index keys not in byte order: %v", bad)
	}
}
