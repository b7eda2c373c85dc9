package postgres_test

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/iwf-server/iwf-server/internal/store/postgres/pgtest"
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

// A migrated store's schema version is its last migration.
func TestSchemaVersionIsLastMigration(t *testing.T) {
	s := pgtest.NewStore(t)
	if v, err := s.SchemaVersion(context.Background()); err != nil || v != highestMigration(t) {
		t.Fatalf("SchemaVersion = %d, %v; want %d", v, err, highestMigration(t))
	}
}
