package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	// The SQLite driver the store uses: the copy is made by the same SQLite.
	_ "modernc.org/sqlite"

	"github.com/iwf-server/iwf-server/internal/server"
)

// CommandBackup copies a SQLite store to a file while a server may be
// serving it (see runBackup).
const CommandBackup = "backup"

// postgresBackupHelp is what backup answers when given a PostgreSQL URL.
const postgresBackupHelp = "backup copies SQLite stores only; back up PostgreSQL with its own tools: " +
	"pg_dump -Fc for a logical copy, or pg_basebackup with WAL archiving for point-in-time recovery " +
	"(see docs/operations.md)"

// runBackup runs `iwf-server backup --db sqlite://PATH --to FILE`: an
// online, consistent copy of the SQLite database at PATH, taken with
// VACUUM INTO on a read transaction of its own, so the server serving the
// file keeps committing meanwhile. The copy holds every transaction
// committed before the copy began. It is written to a temporary file
// beside FILE, checked (PRAGMA quick_check), synced and then renamed to
// FILE, which must not exist.
//
// The store is found as the server finds it: --db, else IWF_DB, else the
// db setting of the config file (--config, else IWF_CONFIG).
func runBackup(ctx context.Context, args []string, lookupEnv func(string) (string, bool), stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("iwf-server backup", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	db := fs.String("db", "", "the store to copy: sqlite://PATH (env IWF_DB)")
	config := fs.String("config", "", "the server's YAML config `file`: its db setting names the store when neither --db nor IWF_DB does (env IWF_CONFIG)")
	to := fs.String("to", "", "the `file` to write; it must not exist")
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		fs.SetOutput(stderr)
		fmt.Fprintf(stderr, "Usage: iwf-server backup [--db sqlite://PATH | --config FILE] --to FILE\n\n"+
			"Copies the SQLite store at PATH to FILE while a server may be serving it (VACUUM INTO):\n"+
			"the copy holds every transaction committed before it began. "+postgresBackupHelp+".\n"+
			"Precedence, as for the server: --db > IWF_DB > the config file's db.\n\nFlags:\n")
		fs.PrintDefaults()
		return err
	} else if err != nil {
		return fmt.Errorf("backup: %v (see iwf-server backup -help)", err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("backup: unexpected argument %q", fs.Arg(0))
	}
	if *db == "" {
		*db, _ = lookupEnv("IWF_DB")
	}
	if *db == "" {
		file := *config
		if file == "" {
			file, _ = lookupEnv("IWF_CONFIG")
		}
		if file != "" {
			v, err := configFileDB(file)
			if err != nil {
				return fmt.Errorf("backup: %w", err)
			}
			*db = v
		}
	}
	if *db == "" {
		return errors.New("backup: --db sqlite://PATH is required (or IWF_DB, or db in the file of --config or IWF_CONFIG)")
	}
	if *to == "" {
		return errors.New("backup: --to FILE is required")
	}
	target, err := server.ParseDB(*db)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	if target.Kind == server.Postgres {
		return errors.New("backup: " + postgresBackupHelp)
	}
	if target.Path == ":memory:" {
		return errors.New("backup: an in-memory store has nothing to copy")
	}
	begin := time.Now()
	size, version, err := backupSQLite(ctx, target.Path, *to)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	fmt.Fprintf(stdout, "iwf-server: backed up %s to %s (%d bytes, schema version %d) in %s\n",
		target, *to, size, version, time.Since(begin).Round(time.Millisecond))
	return nil
}

// configFileDB returns the db setting of a config file ("" when it has
// none). The file is read as the server reads it: an unknown key or a
// malformed value is an error.
func configFileDB(path string) (string, error) {
	entries, err := readConfigFile(path)
	if err != nil {
		return "", err
	}
	for _, s := range settings {
		if s.env == "IWF_DB" {
			if e := entries[fileKey(s)]; len(e) > 0 {
				return strings.TrimSpace(e[0]), nil
			}
		}
	}
	return "", nil
}

// backupSQLite copies the database at src into the new file dst and
// returns its size and schema version.
func backupSQLite(ctx context.Context, src, dst string) (int64, int, error) {
	info, err := os.Stat(src)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return 0, 0, fmt.Errorf("no database at %s", src)
		}
		return 0, 0, err
	}
	if !info.Mode().IsRegular() {
		return 0, 0, fmt.Errorf("%s is not a regular file", src)
	}
	dst, err = filepath.Abs(dst)
	if err != nil {
		return 0, 0, err
	}
	for _, own := range []string{src, src + "-wal", src + "-shm", src + ".lock"} {
		if dst == own {
			return 0, 0, fmt.Errorf("--to %s is a file of the database itself", dst)
		}
	}
	if _, err := os.Lstat(dst); err == nil {
		return 0, 0, fmt.Errorf("%s exists: choose a new name, or remove it first", dst)
	} else if !errors.Is(err, os.ErrNotExist) {
		return 0, 0, err
	}
	dir := filepath.Dir(dst)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(dst)+".partial-")
	if err != nil {
		return 0, 0, fmt.Errorf("create a file in %s: %w", dir, err)
	}
	tmpName := tmp.Name()
	tmp.Close()
	// VACUUM INTO writes only into an empty or missing file.
	if err := os.Remove(tmpName); err != nil {
		return 0, 0, err
	}
	done := false
	defer func() {
		if !done {
			os.Remove(tmpName)
		}
	}()

	// The server's own connections are in WAL mode: this reader takes a
	// snapshot of the last commit and copies it while the writer goes on.
	// busy_timeout covers the moments the WAL index is being rebuilt.
	srcDB, err := sql.Open("sqlite", src+"?_pragma=busy_timeout(10000)")
	if err != nil {
		return 0, 0, err
	}
	defer srcDB.Close()
	srcDB.SetMaxOpenConns(1)
	var tables int
	if err := srcDB.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'schema_migrations'`).Scan(&tables); err != nil {
		return 0, 0, fmt.Errorf("read %s: %w", src, err)
	}
	if tables == 0 {
		return 0, 0, fmt.Errorf("%s is not an iwf-server store (no schema_migrations table)", src)
	}
	if _, err := srcDB.ExecContext(ctx, `VACUUM INTO ?`, tmpName); err != nil {
		return 0, 0, fmt.Errorf("copy %s: %w", src, err)
	}
	if err := srcDB.Close(); err != nil {
		return 0, 0, err
	}

	version, err := checkCopy(ctx, tmpName)
	if err != nil {
		return 0, 0, err
	}
	f, err := os.OpenFile(tmpName, os.O_RDWR, 0)
	if err != nil {
		return 0, 0, err
	}
	if err := f.Chmod(info.Mode().Perm()); err != nil {
		f.Close()
		return 0, 0, err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return 0, 0, err
	}
	st, err := f.Stat()
	f.Close()
	if err != nil {
		return 0, 0, err
	}
	// A link, unlike a rename, fails when dst appeared meanwhile.
	if err := os.Link(tmpName, dst); err != nil {
		return 0, 0, fmt.Errorf("write %s: %w", dst, err)
	}
	os.Remove(tmpName)
	done = true
	if d, err := os.Open(dir); err == nil {
		err = d.Sync()
		d.Close()
		if err != nil {
			return 0, 0, err
		}
	}
	return st.Size(), version, nil
}

// checkCopy checks the copy at path and returns its schema version.
func checkCopy(ctx context.Context, path string) (int, error) {
	db, err := sql.Open("sqlite", path+"?_pragma=query_only(1)")
	if err != nil {
		return 0, err
	}
	defer db.Close()
	var result string
	if err := db.QueryRowContext(ctx, `PRAGMA quick_check`).Scan(&result); err != nil {
		return 0, fmt.Errorf("check the copy: %w", err)
	}
	if !strings.EqualFold(result, "ok") {
		return 0, fmt.Errorf("check the copy: %s", result)
	}
	var version int
	if err := db.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&version); err != nil {
		return 0, fmt.Errorf("check the copy: %w", err)
	}
	return version, db.Close()
}
