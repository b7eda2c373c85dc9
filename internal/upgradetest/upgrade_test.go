package upgradetest

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/store/postgres"
	"github.com/iwf-server/iwf-server/internal/store/postgres/pgtest"
	"github.com/iwf-server/iwf-server/internal/store/sqlite"
)

// upgradeNode is the engine's node id in the upgrade tests.
const upgradeNode = "upgrade-test"

// upgradeDelay is how long after the data was written the upgraded engine
// believes it runs, at least: the upgrade tests may run right after the
// data is written, and the nap timer must be due then too.
const upgradeDelay = time.Hour

// TestSQLiteUpgradeV1 opens a copy of the SQLite data of release v1 with
// the code of the checkout and finishes its workflows.
func TestSQLiteUpgradeV1(t *testing.T) {
	path := filepath.Join(t.TempDir(), "iwf.db")
	copyFile(t, filepath.Join(v1Dir, "iwf.db"), path)
	st, err := sqlite.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	runUpgrade(t, st)
}

// TestPostgresUpgradeV1 restores the PostgreSQL dump of release v1 into a
// fresh schema, opens it with the code of the checkout and finishes its
// workflows.
func TestPostgresUpgradeV1(t *testing.T) {
	url := pgtest.URL(t)
	schema := pgtest.NewSchemaName()
	restore(t, url, filepath.Join(v1Dir, "postgres.sql"), v1Schema, schema)
	st, err := postgres.Open(context.Background(), url, postgres.WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	runUpgrade(t, st)
	checkFillfactors(t, schema)
}

// checkFillfactors checks that the upgraded schema has the storage
// parameters of PostgreSQL migration 0011: room for HOT updates in the
// pages of runs and executions, none asked for in those of tasks.
func checkFillfactors(t *testing.T, schema string) {
	t.Helper()
	conn := pgtest.Conn(t, schema)
	for table, want := range map[string]string{"runs": "fillfactor=80", "executions": "fillfactor=80", "tasks": ""} {
		var opts []string
		if err := conn.QueryRow(context.Background(), `SELECT coalesce(reloptions, '{}') FROM pg_class
			WHERE oid = to_regclass($1)`, pgx.Identifier{schema, table}.Sanitize()).Scan(&opts); err != nil {
			t.Fatalf("%s: %v", table, err)
		}
		if got := strings.Join(opts, ","); got != want {
			t.Errorf("%s: storage parameters %q after the upgrade, want %q", table, got, want)
		}
	}
}

// runUpgrade serves the stored data (which migrates it) and runs the
// upgrade half of the scenario.
// The upgraded engine runs with a concurrency limit of one call on the
// scenario's worker host, so that every call left to make goes through the
// limits' tables and function of migrations 0009 (PostgreSQL) and 0006
// (SQLite), on a schema that was migrated to them.
func runUpgrade(t *testing.T, st store) {
	s := newStack(t, st, newWorker(false), engine.Config{NodeID: upgradeNode, Clock: laterClock{by: upgradeDelay},
		Limits: engine.Limits{WorkerConcurrency: map[string]int{"upgrade-worker.test:80": 1}}})
	upgrade(s)
	var m strings.Builder
	if err := s.engine.WriteMetrics(&m); err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^iwf_limit_wait_seconds_count\{limit="worker:upgrade-worker.test:80"\} [1-9]`).MatchString(m.String()) {
		t.Errorf("no call took a permit of the limit:\n%s", m.String())
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
