package postgres_test

import (
	"context"
	"fmt"
	"maps"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/iwf-server/iwf-server/internal/store/migration"
	"github.com/iwf-server/iwf-server/internal/store/postgres"
	"github.com/iwf-server/iwf-server/internal/store/postgres/pgtest"
)

// partialIndexes is migration 0010 as it was first released: one
// transaction, plain DROP INDEX and CREATE INDEX. Databases that applied it
// keep its indexes; the version that replaced it must end with the same.
const partialIndexes = `
DROP INDEX search_attributes_string;
DROP INDEX search_attributes_int;
DROP INDEX search_attributes_double;
DROP INDEX search_attributes_bool;
DROP INDEX search_attributes_time;
CREATE INDEX search_attributes_string ON search_attributes (key, string_value) WHERE string_value IS NOT NULL;
CREATE INDEX search_attributes_int ON search_attributes (key, int_value) WHERE int_value IS NOT NULL;
CREATE INDEX search_attributes_double ON search_attributes (key, double_value) WHERE double_value IS NOT NULL;
CREATE INDEX search_attributes_bool ON search_attributes (key, bool_value) WHERE bool_value IS NOT NULL;
CREATE INDEX search_attributes_time ON search_attributes (key, time_value) WHERE time_value IS NOT NULL;
DROP INDEX runs_started_at;
CREATE INDEX runs_started_at ON runs (started_at, run_id);
`

const partialIndexesVersion = 10

// migrations returns the embedded migrations and the one of version v.
func migrations(t *testing.T, v int) ([]migration.Migration, migration.Migration) {
	t.Helper()
	ms, err := postgres.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.Version == v {
			return ms, m
		}
	}
	t.Fatalf("no migration %d", v)
	return nil, migration.Migration{}
}

// before returns the migrations older than v.
func before(ms []migration.Migration, v int) []migration.Migration {
	var out []migration.Migration
	for _, m := range ms {
		if m.Version < v {
			out = append(out, m)
		}
	}
	return out
}

// withParams adds run-time parameters to a PostgreSQL URL.
func withParams(t *testing.T, u string, kv ...string) string {
	t.Helper()
	p, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	q := p.Query()
	for i := 0; i+1 < len(kv); i += 2 {
		q.Set(kv[i], kv[i+1])
	}
	p.RawQuery = q.Encode()
	return p.String()
}

// newSchemaStore opens a store on a new schema, dropped when the test ends.
func newSchemaStore(t *testing.T, u string) (*postgres.Store, string) {
	t.Helper()
	schema := pgtest.NewSchemaName()
	t.Cleanup(func() { pgtest.DropSchema(t, pgtest.URL(t), schema) })
	s, err := postgres.Open(context.Background(), u, postgres.WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, schema
}

func connect(t *testing.T, u string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// indexes returns the definitions of a schema's indexes by name (without
// the schema's name), and fails the test on an invalid one (a build that
// did not finish).
func indexes(t *testing.T, conn *pgx.Conn, schema string) map[string]string {
	t.Helper()
	ctx := context.Background()
	rows, err := conn.Query(ctx, `SELECT c.relname, pg_get_indexdef(i.indexrelid), i.indisvalid
		FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = $1`, schema)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for rows.Next() {
		var name, def string
		var valid bool
		if err := rows.Scan(&name, &def, &valid); err != nil {
			t.Fatal(err)
		}
		if !valid {
			t.Errorf("index %s is invalid: %s", name, def)
		}
		out[name] = strings.ReplaceAll(def, " "+schema+".", " ")
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// diffIndexes reports how got differs from want.
func diffIndexes(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	if maps.Equal(got, want) {
		return
	}
	for name, def := range want {
		if got[name] != def {
			t.Errorf("%s: index %s is %q, want %q", what, name, got[name], def)
		}
	}
	for name, def := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("%s: extra index %s: %s", what, name, def)
		}
	}
}

// TestPartialIndexesMigrationSchema: a database migrated by the
// concurrent 0010 has the indexes of one that applied 0010 as first
// released, in a transaction (which such a database keeps: a recorded
// migration is never run again), and so does one whose 0010 stopped after
// any of its statements and was run again.
func TestPartialIndexesMigrationSchema(t *testing.T) {
	u := pgtest.URL(t)
	ctx := context.Background()
	conn := connect(t, u)
	all, m10 := migrations(t, partialIndexesVersion)
	if !m10.NoTransaction {
		t.Fatalf("migration %d runs in a transaction: its DROP INDEX and CREATE INDEX lock the tables' writes", partialIndexesVersion)
	}

	// Released: the transactional 0010 in place of the embedded one.
	old, oldSchema := newSchemaStore(t, u)
	released := before(all, partialIndexesVersion)
	released = append(released, migration.Migration{Version: partialIndexesVersion, Name: m10.Name, SQL: partialIndexes})
	for _, m := range all {
		if m.Version > partialIndexesVersion {
			released = append(released, m)
		}
	}
	if err := postgres.MigrateWith(ctx, old, released); err != nil {
		t.Fatal(err)
	}
	want := indexes(t, conn, oldSchema)
	if !strings.Contains(want["search_attributes_string"], "WHERE (string_value IS NOT NULL)") ||
		!strings.Contains(want["runs_started_at"], "(started_at, run_id)") {
		t.Fatalf("the released 0010 did not apply: %v", want)
	}

	s, schema := newSchemaStore(t, u)
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	diffIndexes(t, "migrated", indexes(t, conn, schema), want)

	stmts, err := migration.Statements(m10.SQL)
	if err != nil {
		t.Fatal(err)
	}
	for k := range stmts {
		t.Run(fmt.Sprintf("stopped after statement %d", k+1), func(t *testing.T) {
			s, schema := newSchemaStore(t, u)
			if err := postgres.MigrateWith(ctx, s, before(all, partialIndexesVersion)); err != nil {
				t.Fatal(err)
			}
			// Each statement alone: CREATE INDEX CONCURRENTLY refuses to
			// run in a script of several.
			if _, err := conn.Exec(ctx, `SET search_path TO `+pgx.Identifier{schema}.Sanitize()); err != nil {
				t.Fatal(err)
			}
			for _, st := range stmts[:k+1] {
				if _, err := conn.Exec(ctx, st); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			diffIndexes(t, "run again", indexes(t, conn, schema), want)
		})
	}
}

// waitingOnLock returns a condition for waitFor: a backend of the
// application waits for a lock (heavyweight: a table, a transaction, an
// advisory lock).
func waitingOnLock(conn *pgx.Conn, app string) func() (bool, error) {
	return func() (bool, error) {
		var n int
		err := conn.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE application_name = $1 AND wait_event_type = 'Lock'`, app).Scan(&n)
		return n > 0, err
	}
}

// TestPartialIndexesMigrationKeepsWrites: migration 0010 does not stop
// writes. A transaction that writes to search_attributes holds the
// migration up (a concurrent build waits for the writes begun before it);
// meanwhile another writer takes its lock on the table at once. A plain
// DROP INDEX or CREATE INDEX would have queued every writer behind it.
func TestPartialIndexesMigrationKeepsWrites(t *testing.T) {
	u := pgtest.URL(t)
	ctx := context.Background()
	app := "iwf_migrate_" + pgtest.NewSchemaName()
	all, _ := migrations(t, partialIndexesVersion)
	s, schema := newSchemaStore(t, withParams(t, u, "application_name", app))
	if err := postgres.MigrateWith(ctx, s, before(all, partialIndexesVersion)); err != nil {
		t.Fatal(err)
	}
	table := func(name string) string { return pgx.Identifier{schema, name}.Sanitize() }
	watch := connect(t, u)

	first, err := connect(t, u).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Rollback(ctx)
	if _, err := first.Exec(ctx, `LOCK TABLE `+table("search_attributes")+`, `+table("runs")+` IN ROW EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Migrate(ctx) }()
	waitFor(t, "the migration waits for the open write", waitingOnLock(watch, app))

	second, err := connect(t, u).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Rollback(ctx)
	if _, err := second.Exec(ctx, `SET LOCAL lock_timeout = '3s'`); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"search_attributes", "runs"} {
		if _, err := second.Exec(ctx, `LOCK TABLE `+table(name)+` IN ROW EXCLUSIVE MODE`); err != nil {
			t.Errorf("a writer of %s waits behind the migration: %v", name, err)
			break
		}
	}
	second.Rollback(ctx)
	if err := first.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Migrate did not end within a minute of the write's commit")
	}
}

// TestMigrateBesideAWaitingServer: a server of an earlier release waits
// for the migration lock inside pg_advisory_lock while the concurrent
// index build of 0010 runs. The build waits for that server's snapshot and
// the server for the lock: PostgreSQL cancels one of the two. Migrate
// still succeeds (when the build is cancelled, it lets the lock go, the
// server passes, and it runs 0010 again), and so does the waiting server.
func TestMigrateBesideAWaitingServer(t *testing.T) {
	u := pgtest.URL(t)
	ctx := context.Background()
	app := "iwf_migrate_" + pgtest.NewSchemaName()
	all, _ := migrations(t, partialIndexesVersion)
	// The build finds the deadlock (it checks after 20 ms, the waiting
	// server after ten minutes): the case Migrate must recover from.
	s, schema := newSchemaStore(t, withParams(t, u, "application_name", app, "deadlock_timeout", "20ms"))
	if err := postgres.MigrateWith(ctx, s, before(all, partialIndexesVersion)); err != nil {
		t.Fatal(err)
	}
	watch := connect(t, u)
	first, err := connect(t, u).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Rollback(ctx)
	if _, err := first.Exec(ctx, `LOCK TABLE `+pgx.Identifier{schema, "search_attributes"}.Sanitize()+` IN ROW EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Migrate(ctx) }()
	waitFor(t, "the migration holds its lock and waits", waitingOnLock(watch, app))

	oldApp := app + "_old"
	old := connect(t, withParams(t, u, "application_name", oldApp))
	if _, err := old.Exec(ctx, `SET deadlock_timeout = '10min'`); err != nil {
		t.Skipf("cannot set deadlock_timeout: %v", err)
	}
	oldDone := make(chan error, 1)
	go func() {
		key := postgres.MigrationLockKey(s)
		_, err := old.Exec(ctx, `SELECT pg_advisory_lock($1)`, key)
		if err == nil {
			_, err = old.Exec(ctx, `SELECT pg_advisory_unlock($1)`, key)
		}
		oldDone <- err
	}()
	waitFor(t, "the earlier server waits for the lock", waitingOnLock(watch, oldApp))
	if err := first.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	for name, ch := range map[string]chan error{"Migrate": done, "the earlier server's lock": oldDone} {
		select {
		case err := <-ch:
			if err != nil {
				t.Errorf("%s: %v", name, err)
			}
		case <-time.After(time.Minute):
			t.Fatalf("%s did not end within a minute", name)
		}
	}
	if got := indexes(t, watch, schema)["search_attributes_string"]; !strings.Contains(got, "WHERE (string_value IS NOT NULL)") {
		t.Fatalf("search_attributes_string after the migration: %q", got)
	}
}
