package postgres

import (
	"context"
	"embed"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/iwf-server/iwf-server/internal/store/migration"

	"github.com/jackc/pgx/v5"
)

//go:embed migrations/*.up.sql
var migrationFiles embed.FS

// loadMigrations reads the embedded migrations in version order.
func loadMigrations() ([]migration.Migration, error) {
	return migration.Load(migrationFiles)
}

// migrationLockKey is the key of the advisory lock that serialises Migrate
// runs on one database schema, across processes.
func (s *Store) migrationLockKey() int64 {
	h := fnv.New64a()
	h.Write([]byte("iwf-server/migrate/" + s.schema))
	return int64(h.Sum64())
}

// Migrate brings the schema up to date: it applies, in version order, every
// embedded migration not yet recorded in schema_migrations, each in its own
// transaction together with its record. With WithSchema it first creates the
// schema when absent.
//
// Migrate is safe when several servers start at once on one database: it
// holds a session advisory lock (per schema) on a dedicated connection for
// the whole run, so the others wait and then find nothing left to do. It is
// idempotent.
func (s *Store) Migrate(ctx context.Context) (err error) {
	migrations, err := loadMigrations()
	if err != nil {
		return fmt.Errorf("postgres: migrate: %w", err)
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("postgres: migrate: %w", err)
	}
	defer conn.Release()
	key := s.migrationLockKey()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, key); err != nil {
		return fmt.Errorf("postgres: migrate: taking the migration lock: %w", err)
	}
	defer func() {
		if _, uerr := conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, key); uerr != nil {
			// Closing the session is the other way to release its lock.
			conn.Conn().Close(context.WithoutCancel(ctx))
			if err == nil {
				err = fmt.Errorf("postgres: migrate: releasing the migration lock: %w", uerr)
			}
		}
	}()

	if s.schema != "" {
		if _, err := conn.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+pgx.Identifier{s.schema}.Sanitize()); err != nil {
			return fmt.Errorf("postgres: migrate: creating schema %q: %w", s.schema, err)
		}
	}
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER NOT NULL PRIMARY KEY,
		name       TEXT    NOT NULL,
		applied_at BIGINT  NOT NULL
	)`); err != nil {
		return fmt.Errorf("postgres: migrate: %w", err)
	}
	for _, m := range migrations {
		if err := apply(ctx, conn.Conn(), m); err != nil {
			return fmt.Errorf("postgres: migration %04d_%s: %w", m.Version, m.Name, err)
		}
	}
	return nil
}

// apply runs one migration, unless it is recorded already, in a transaction
// with its record.
func apply(ctx context.Context, conn *pgx.Conn, m migration.Migration) error {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	var exists bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM schema_migrations WHERE version = $1)`, m.Version).Scan(&exists); err != nil {
		return err
	}
	if exists {
		return nil
	}
	// Without arguments pgx uses the simple protocol, which runs a
	// multi-statement script.
	if _, err := tx.Exec(ctx, m.SQL); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)`,
		m.Version, m.Name, time.Now().UnixMilli()); err != nil {
		return err
	}
	return tx.Commit(ctx)
}
