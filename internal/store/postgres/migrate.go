package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"hash/fnv"
	"regexp"
	"time"

	"github.com/iwf-server/iwf-server/internal/store/migration"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
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
// transaction together with its record, except the migrations marked
// migration.NoTransaction, whose statements run one at a time (see
// applyNoTx). With WithSchema it first creates the schema when absent.
//
// Migrate is safe when several servers start at once on one database: it
// holds a session advisory lock (per schema) on a dedicated connection for
// the whole run, so the others wait and then find nothing left to do. It is
// idempotent.
func (s *Store) Migrate(ctx context.Context) error {
	migrations, err := loadMigrations()
	if err != nil {
		return fmt.Errorf("postgres: migrate: %w", err)
	}
	return s.migrate(ctx, migrations)
}

// migrateAttempts bounds the runs of migrate that end in a deadlock.
const migrateAttempts = 5

// migrate applies migrations as Migrate applies the embedded ones. A run
// that a deadlock ends is started again, after the lock has been let go:
// a server of an earlier release waits for the lock inside a statement
// (pg_advisory_lock), which holds a snapshot that CREATE INDEX
// CONCURRENTLY waits for while that server waits for the lock. PostgreSQL
// then cancels one of the two; when it is the index build, letting the
// lock go lets the other server through (it finds nothing left to do or
// applies what it knows), and the next run finishes the migration.
func (s *Store) migrate(ctx context.Context, migrations []migration.Migration) error {
	for attempt := 1; ; attempt++ {
		err := s.migrateLocked(ctx, migrations)
		if err == nil || attempt == migrateAttempts || !isDeadlock(err) {
			return err
		}
	}
}

func isDeadlock(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "40P01" // deadlock_detected
}

// migrateLocked takes the migration lock, applies the migrations not yet
// recorded, and lets the lock go.
func (s *Store) migrateLocked(ctx context.Context, migrations []migration.Migration) (err error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("postgres: migrate: %w", err)
	}
	defer conn.Release()
	key := s.migrationLockKey()
	if err := lockMigrations(ctx, conn.Conn(), key); err != nil {
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
	// A schema with no migration recorded is new: its tables are empty, so
	// an index built CONCURRENTLY gains nothing there and would only wait
	// for every older transaction of the whole database (other schemas'
	// included) to end.
	var applied int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM schema_migrations`).Scan(&applied); err != nil {
		return fmt.Errorf("postgres: migrate: %w", err)
	}
	fresh := applied == 0
	for _, m := range migrations {
		apply := apply
		switch {
		case m.NoTransaction && fresh:
			m.SQL = plainIndexBuilds(m.SQL)
		case m.NoTransaction:
			apply = applyNoTx
		}
		if err := apply(ctx, conn.Conn(), m); err != nil {
			return fmt.Errorf("postgres: migration %04d_%s: %w", m.Version, m.Name, err)
		}
	}
	return nil
}

// lockMigrationsPoll is the longest wait between two attempts to take the
// migration lock.
const lockMigrationsPoll = 250 * time.Millisecond

// lockMigrations takes the migration lock (a session advisory lock) on
// conn. It asks with pg_try_advisory_lock, again until it gets it, rather
// than waiting inside pg_advisory_lock: a session waiting inside a
// statement holds a snapshot, and CREATE INDEX CONCURRENTLY, run by the
// lock's holder, waits for every older snapshot to go, so the two would
// deadlock. Between attempts this session holds none.
func lockMigrations(ctx context.Context, conn *pgx.Conn, key int64) error {
	wait := 5 * time.Millisecond
	for {
		var ok bool
		if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, key).Scan(&ok); err != nil {
			return err
		}
		if ok {
			return nil
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		wait = min(2*wait, lockMigrationsPoll)
	}
}

// recorded reports whether migration version is in schema_migrations.
func recorded(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, version int) (bool, error) {
	var exists bool
	err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM schema_migrations WHERE version = $1)`, version).Scan(&exists)
	return exists, err
}

const recordMigration = `INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)`

// apply runs one migration, unless it is recorded already, in a transaction
// with its record.
func apply(ctx context.Context, conn *pgx.Conn, m migration.Migration) error {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if exists, err := recorded(ctx, tx, m.Version); err != nil || exists {
		return err
	}
	// Without arguments pgx uses the simple protocol, which runs a
	// multi-statement script.
	if _, err := tx.Exec(ctx, m.SQL); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, recordMigration, m.Version, m.Name, time.Now().UnixMilli()); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// concurrently is the CONCURRENTLY of an index build or drop.
var concurrently = regexp.MustCompile(`(?i)\b((?:CREATE\s+(?:UNIQUE\s+)?|DROP\s+)INDEX)\s+CONCURRENTLY\b`)

// plainIndexBuilds returns a NoTransaction migration's statements with
// their index builds and drops made plain, to run in one transaction on a
// new schema: on empty tables a plain build is as quick and its lock
// blocks nobody.
func plainIndexBuilds(sql string) string { return concurrently.ReplaceAllString(sql, "$1") }

// applyNoTx runs one migration marked NoTransaction, unless it is recorded
// already: its statements one at a time, each in a transaction of its own
// (a statement sent alone with the simple protocol), then its record. The
// migration lock keeps other migrators out meanwhile; a run stopped
// halfway leaves the migration unrecorded, and the next run starts it
// again from its first statement.
func applyNoTx(ctx context.Context, conn *pgx.Conn, m migration.Migration) error {
	if exists, err := recorded(ctx, conn, m.Version); err != nil || exists {
		return err
	}
	stmts, err := migration.Statements(m.SQL)
	if err != nil {
		return err
	}
	for i, st := range stmts {
		if _, err := conn.Exec(ctx, st); err != nil {
			return fmt.Errorf("statement %d of %d: %w", i+1, len(stmts), err)
		}
	}
	_, err = conn.Exec(ctx, recordMigration, m.Version, m.Name, time.Now().UnixMilli())
	return err
}
