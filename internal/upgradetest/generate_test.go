package upgradetest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/store/postgres"
	"github.com/iwf-server/iwf-server/internal/store/postgres/pgtest"
	"github.com/iwf-server/iwf-server/internal/store/sqlite"
)

// dumpSchema is the schema name the PostgreSQL dump is written from; the
// upgrade test restores it under a fresh name.
const dumpSchema = "iwf_upgrade_data"

// TestWriteUpgradeData writes the test data of this release: run it on the
// release whose stored format the data must capture (see doc.go).
func TestWriteUpgradeData(t *testing.T) {
	dir := os.Getenv("IWF_UPGRADE_WRITE")
	if dir == "" {
		t.Skip("writes test data; set IWF_UPGRADE_WRITE to the output directory, e.g. $PWD/testdata/v1")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	path := filepath.Join(dir, "iwf.db")
	os.Remove(path)
	st, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	writeWith(t, st)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	for _, leftover := range []string{path + "-wal", path + "-shm"} {
		if _, err := os.Stat(leftover); err == nil {
			t.Fatalf("%s is left over: the database file is not self-contained", leftover)
		}
	}

	url := pgtest.URL(t)
	pgtest.DropSchema(t, url, dumpSchema)
	pst, err := postgres.Open(ctx, url, postgres.WithSchema(dumpSchema))
	if err != nil {
		t.Fatal(err)
	}
	if err := pst.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	writeWith(t, pst)
	pst.Close()
	out, err := exec.Command("pg_dump", "--dbname", url, "--schema", dumpSchema, "--no-owner", "--no-privileges", "--inserts", "--file", filepath.Join(dir, "postgres.sql")).CombinedOutput()
	if err != nil {
		t.Fatalf("pg_dump: %v\n%s", err, out)
	}
	pgtest.DropSchema(t, url, dumpSchema)
}

// writeWith runs the scenario on a store and stops the engine.
func writeWith(t *testing.T, st engine.Store) {
	w := newWorker(t, true)
	eng := engineFor(t, st, w, false)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	writeScenario(driver{t: t, eng: eng, ctx: ctx})
	closeCtx, cancelClose := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancelClose()
	if err := eng.Close(closeCtx); err != nil {
		t.Fatal(err)
	}
}
