package upgradetest

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/store/postgres"
	"github.com/iwf-server/iwf-server/internal/store/postgres/pgtest"
	"github.com/iwf-server/iwf-server/internal/store/sqlite"
)

// v1Dir holds the data written by release v1.
var v1Dir = filepath.Join("testdata", "v1")

// v1Schema is the PostgreSQL schema the generator writes and dumps; the
// upgrade test restores the dump under another name.
const v1Schema = "iwf_upgrade_v1"

// generatorNode is the engine's node id while the data is written; the
// tasks it had leased carry it.
const generatorNode = "upgrade-v1-generator"

// generatorLease is the lease duration of the generator's engine. It keeps
// in its own schedule, leased, every task due within half of it, so the data
// holds leased tasks (the retries, the nap timer) besides unleased ones (the
// timers of 2100).
const generatorLease = 10 * time.Minute

// TestWriteUpgradeData writes testdata/v1 with the code of the checkout.
// It runs only with IWF_UPGRADE_WRITE=1: see the package documentation.
func TestWriteUpgradeData(t *testing.T) {
	if os.Getenv("IWF_UPGRADE_WRITE") != "1" {
		t.Skip("writes the upgrade test data; set IWF_UPGRADE_WRITE=1 to do so (see the package doc)")
	}
	if err := os.MkdirAll(v1Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Run("sqlite", func(t *testing.T) {
		path := filepath.Join(v1Dir, "iwf.db")
		for _, suffix := range []string{"", "-wal", "-shm"} {
			if err := os.Remove(path + suffix); err != nil && !errors.Is(err, fs.ErrNotExist) {
				t.Fatal(err)
			}
		}
		st, err := sqlite.Open(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		writeScenario(t, st)
		// Closing the last connection checkpointed the WAL into the file.
		for _, suffix := range []string{"-wal", "-shm"} {
			if _, err := os.Stat(path + suffix); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("%s%s is left after the store closed (err %v): the data would need it", path, suffix, err)
			}
		}
	})
	t.Run("postgres", func(t *testing.T) {
		url := pgtest.URL(t)
		pgtest.DropSchema(t, url, v1Schema)
		t.Cleanup(func() { pgtest.DropSchema(t, url, v1Schema) })
		st, err := postgres.Open(context.Background(), url, postgres.WithSchema(v1Schema))
		if err != nil {
			t.Fatal(err)
		}
		writeScenario(t, st)
		dump := pgDump(t, url, v1Schema)
		if err := os.WriteFile(filepath.Join(v1Dir, "postgres.sql"), dump, 0o644); err != nil {
			t.Fatal(err)
		}
	})
}

// writeScenario runs the scenario on st, stops the engine and closes st,
// and checks that the states failing on purpose failed exactly
// failedAttempts times: a further attempt before the engine stopped would
// make the data differ from what the upgrade tests expect.
func writeScenario(t *testing.T, st store) {
	w := newWorker(true)
	s := newStack(t, st, w, engine.Config{NodeID: generatorNode, LeaseDuration: generatorLease})
	generate(s)
	s.stop()
	count := func(api, name string) int {
		n := 0
		for _, c := range w.all() {
			if c.API == api && c.Name == name {
				n++
			}
		}
		return n
	}
	for _, state := range failingStates {
		if n := count("waitUntil", state) + count("execute", state); n != failedAttempts {
			t.Fatalf("the worker saw %d calls of %s, want %d: the engine retried before it stopped; write the data again", n, state, failedAttempts)
		}
	}
	if count("execute", "nap") != 0 {
		t.Fatalf("the nap timer fired before the engine stopped (%d s after it started): write the data again", napSeconds)
	}
}
