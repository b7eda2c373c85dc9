package sqlite

import (
	"context"
	"embed"
	"fmt"
	"time"

	"github.com/iwf-server/iwf-server/internal/store/migration"
)

//go:embed migrations/*.up.sql
var migrationFiles embed.FS

// loadMigrations reads the embedded migrations in version order.
func loadMigrations() ([]migration.Migration, error) {
	return migration.Load(migrationFiles)
}

// Migrate brings the schema up to date: it applies, in version order, every
// embedded migration not yet recorded in schema_migrations, each in its own
// transaction together with its record. It is idempotent; a store that is
// already up to date is left unchanged.
func (s *Store) Migrate(ctx context.Context) error {
	migrations, err := loadMigrations()
	if err != nil {
		return fmt.Errorf("sqlite: migrate: %w", err)
	}
	if _, err := s.w.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER NOT NULL PRIMARY KEY,
		name       TEXT    NOT NULL,
		applied_at INTEGER NOT NULL
	)`); err != nil {
		return fmt.Errorf("sqlite: migrate: %w", err)
	}
	for _, m := range migrations {
		if err := s.apply(ctx, m); err != nil {
			return fmt.Errorf("sqlite: migration %04d_%s: %w", m.Version, m.Name, err)
		}
	}
	return nil
}

// apply runs one migration unless it is recorded already. The IMMEDIATE
// transaction takes the write lock first, so the check and the change are
// atomic even against another process migrating the same file.
func (s *Store) apply(ctx context.Context, m migration.Migration) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM schema_migrations WHERE version = ?`, m.Version).Scan(&n); err != nil {
		return err
	}
	if n > 0 {
		return nil
	}
	if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
		m.Version, m.Name, time.Now().UnixMilli()); err != nil {
		return err
	}
	return tx.Commit()
}
