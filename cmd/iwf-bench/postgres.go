package main

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// defaultPostgresURL is used when IWF_TEST_POSTGRES_URL is not set.
const defaultPostgresURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// pgAdmin creates and drops one throw-away database per workload on the
// PostgreSQL server of baseURL, and reads its transaction counters.
type pgAdmin struct {
	base    *url.URL
	conn    *pgx.Conn
	version string
}

// connectPostgres connects to baseURL, failing fast when nothing answers.
func connectPostgres(ctx context.Context, baseURL string) (*pgAdmin, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, fmt.Errorf("cannot parse the PostgreSQL URL")
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(cctx, withoutPoolParams(baseURL))
	if err != nil {
		return nil, err
	}
	a := &pgAdmin{base: u, conn: conn}
	if err := conn.QueryRow(cctx, "SHOW server_version").Scan(&a.version); err != nil {
		conn.Close(ctx)
		return nil, err
	}
	return a, nil
}

// withoutPoolParams drops the pool_* parameters (pool_max_conns, ...) of a
// PostgreSQL URL: they are for the server's pgxpool, and a plain connection
// rejects them.
func withoutPoolParams(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return s
	}
	q := u.Query()
	for k := range q {
		if strings.HasPrefix(k, "pool_") {
			q.Del(k)
		}
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// close drops the admin connection.
func (a *pgAdmin) close(ctx context.Context) { _ = a.conn.Close(ctx) }

// host describes the server without credentials.
func (a *pgAdmin) host() string { return a.base.Host }

// createDatabase creates an empty database and returns its name and URL.
func (a *pgAdmin) createDatabase(ctx context.Context, name string) (string, error) {
	if _, err := a.conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", fmt.Errorf("create database %s: %w", name, err)
	}
	u := *a.base
	u.Path = "/" + name
	u.RawPath = ""
	return u.String(), nil
}

// checkpoint writes out every dirty buffer (CHECKPOINT), so that the next
// run starts with none of the one before it: a checkpoint that wrote them
// during its window would slow it for the previous run's sake (runs that
// are compared, such as W1 and W1x, would pay for their order).
func (a *pgAdmin) checkpoint(ctx context.Context) error {
	_, err := a.conn.Exec(ctx, "CHECKPOINT")
	return err
}

// dropDatabase drops a database the benchmark created.
func (a *pgAdmin) dropDatabase(ctx context.Context, name string) error {
	_, err := a.conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
	return err
}

// commits returns the committed and rolled-back transactions counted for a
// database. The counters are flushed by each backend at least once a second
// and when it exits; call it after the server has stopped.
func (a *pgAdmin) commits(ctx context.Context, name string) (commits, rollbacks int64, err error) {
	if _, err := a.conn.Exec(ctx, "SELECT pg_stat_clear_snapshot()"); err != nil {
		return 0, 0, err
	}
	err = a.conn.QueryRow(ctx,
		"SELECT xact_commit, xact_rollback FROM pg_stat_database WHERE datname = $1", name).
		Scan(&commits, &rollbacks)
	return commits, rollbacks, err
}

// backendPIDs returns the process ids of the backends connected to a
// database (the server's connection pool).
func (a *pgAdmin) backendPIDs(ctx context.Context, name string) []int {
	rows, err := a.conn.Query(ctx, "SELECT pid FROM pg_stat_activity WHERE datname = $1", name)
	if err != nil {
		return nil
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return nil
	}
	out := make([]int, len(pids))
	for i, p := range pids {
		out[i] = int(p)
	}
	return out
}
