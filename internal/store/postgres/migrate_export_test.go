package postgres

import (
	"context"

	"github.com/iwf-server/iwf-server/internal/store/migration"
)

// Migrations are the embedded migrations, in version order.
func Migrations() ([]migration.Migration, error) { return loadMigrations() }

// MigrateWith applies ms as Migrate applies the embedded migrations.
func MigrateWith(ctx context.Context, s *Store, ms []migration.Migration) error {
	return s.migrate(ctx, ms)
}

// MigrationLockKey is the key of s's migration lock.
func MigrationLockKey(s *Store) int64 { return s.migrationLockKey() }
