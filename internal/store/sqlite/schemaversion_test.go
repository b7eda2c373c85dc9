package sqlite_test

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// highestMigration is the version of the last file in migrations/.
func highestMigration(t *testing.T) int {
	t.Helper()
	files, err := filepath.Glob("migrations/*.up.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("no migrations: %v", err)
	}
	high := 0
	for _, f := range files {
		n, err := strconv.Atoi(strings.SplitN(filepath.Base(f), "_", 2)[0])
		if err != nil {
			t.Fatalf("migration %s: %v", f, err)
		}
		high = max(high, n)
	}
	return high
}

// A migrated store's schema version is its last migration, also after it
// is opened and migrated again.
func TestSchemaVersionIsLastMigration(t *testing.T) {
	path := filepath.Join(t.TempDir(), "iwf.db")
	for range 2 {
		s := newStore(t, path)
		if v, err := s.SchemaVersion(context.Background()); err != nil || v != highestMigration(t) {
			t.Fatalf("SchemaVersion = %d, %v; want %d", v, err, highestMigration(t))
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
