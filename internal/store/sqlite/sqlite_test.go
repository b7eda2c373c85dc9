package sqlite_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/store/sqlite"
	"github.com/iwf-server/iwf-server/internal/store/storetest"
)

// newStore opens a migrated store on a fresh database file.
func newStore(t *testing.T, dsn string) *sqlite.Store {
	t.Helper()
	ctx := context.Background()
	s, err := sqlite.Open(ctx, dsn)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) engine.Store {
		return newStore(t, filepath.Join(t.TempDir(), "iwf.db"))
	})
}

// TestConformanceMemory runs the suite on MemoryDSN, whose single connection
// serialises View and Update: a View cannot stay open while an Update
// commits, so the snapshot test, which does exactly that, cannot apply.
func TestConformanceMemory(t *testing.T) {
	storetest.Run(t, func(t *testing.T) engine.Store {
		if strings.HasSuffix(t.Name(), "/ViewIsSnapshot") {
			t.Skip("MemoryDSN has one connection: a View blocks every Update until it ends")
		}
		return newStore(t, sqlite.MemoryDSN)
	})
}

// TestReopen checks that committed data is in the file: a new Store on the
// same path sees it, and migrating again changes nothing.
func TestReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "iwf.db")
	s := newStore(t, path)
	if err := s.Update(ctx, func(ctx context.Context, tx engine.Tx) error {
		if err := tx.WorkflowSetCurrentRun(ctx, "wf", "run-1"); err != nil {
			return err
		}
		return tx.HistoryAppend(ctx, []*engine.HistoryEvent{{RunID: "run-1", Type: "x", Data: []byte(`{}`)}})
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s2 := newStore(t, path) // migrates again
	if err := s2.View(ctx, func(ctx context.Context, tx engine.ReadTx) error {
		cur, err := tx.WorkflowGetCurrentRun(ctx, "wf")
		if err != nil || cur != "run-1" {
			t.Fatalf("after reopen: current run %q, %v", cur, err)
		}
		h, err := tx.HistoryList(ctx, "run-1", 0, 0)
		if err != nil || len(h) != 1 {
			t.Fatalf("after reopen: history %v, %v", h, err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := s2.Migrate(ctx); err != nil {
		t.Fatalf("third Migrate: %v", err)
	}
	if err := s2.Close(); err != nil {
		t.Fatal(err)
	}

	// The file is in WAL mode, and each migration is recorded once.
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var mode string
	if err := db.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		t.Fatalf("journal_mode = %q, %v; want wal", mode, err)
	}
	var rows, distinct int
	if err := db.QueryRow("SELECT count(*), count(DISTINCT version) FROM schema_migrations").Scan(&rows, &distinct); err != nil {
		t.Fatal(err)
	}
	if rows == 0 || rows != distinct {
		t.Fatalf("schema_migrations has %d rows for %d versions", rows, distinct)
	}
}

func TestOpenRejectsParameters(t *testing.T) {
	if s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "x.db")+"?_journal_mode=DELETE"); err == nil {
		s.Close()
		t.Fatal("Open accepted a dsn with parameters")
	}
	if s, err := sqlite.Open(context.Background(), ""); err == nil {
		s.Close()
		t.Fatal("Open accepted an empty dsn")
	}
}

func TestNotMigrated(t *testing.T) {
	ctx := context.Background()
	s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "x.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	err = s.Update(ctx, func(context.Context, engine.Tx) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "migrated") {
		t.Fatalf("Update on an unmigrated store: %v, want an error that mentions migration", err)
	}
	// Migrating afterwards makes the same store usable.
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Update(ctx, func(context.Context, engine.Tx) error { return nil }); err != nil {
		t.Fatal(err)
	}
}

func BenchmarkStore(b *testing.B) {
	storetest.Bench(b, func(b *testing.B) engine.Store {
		ctx := context.Background()
		s, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "iwf.db"))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		if err := s.Migrate(ctx); err != nil {
			b.Fatal(err)
		}
		return s
	})
}

// TestTaskTakeExpecting: the checks run at once, and a failed one fails the
// transaction with engine.ErrUnexpected, leaving nothing of it.
func TestTaskTakeExpecting(t *testing.T) {
	storetest.TaskTakeExpecting(t, newStore(t, filepath.Join(t.TempDir(), "iwf.db")), nil)
}
