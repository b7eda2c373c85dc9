package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// A connection that finds itself on a server that does not take writes
// (SQLSTATE 25006, read_only_sql_transaction, outside the store's own READ
// ONLY transactions) is on a standby: a URL with several hosts reached one
// that was demoted, or target_session_attrs was not set. Such a connection
// is marked when the error comes back, and the pool destroys it instead of
// handing it out again (the check runs on acquire, so that releasing a
// connection costs nothing more): the next connection is made anew and —
// with target_session_attrs=read-write — reaches the current primary.
// The error itself is classified as the store being unavailable (503, the
// engine retries later).
//
// PostgreSQL cannot demote a running primary: a former primary comes back
// as a standby only after a restart, which ends its connections anyway. The
// mark covers servers behind a proxy or a DNS name that moved, where the
// socket stays open while the server behind it changed its role.

// sqlReadOnly is SQLSTATE read_only_sql_transaction.
const sqlReadOnly = "25006"

// readOnlyMark is the key of the mark in a connection's CustomData.
const readOnlyMark = "iwf.read_only_server"

// isReadOnly reports whether err is read_only_sql_transaction.
func isReadOnly(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == sqlReadOnly
}

// markIfReadOnly marks c for discarding when err says its server refuses
// writes.
func markIfReadOnly(c *pgx.Conn, err error) {
	if c != nil && err != nil && isReadOnly(err) {
		c.PgConn().CustomData()[readOnlyMark] = true
	}
}

// usable is the pool's PrepareConn hook: a marked connection is destroyed,
// and the acquisition goes on with another.
func usable(_ context.Context, c *pgx.Conn) (bool, error) {
	marked, _ := c.PgConn().CustomData()[readOnlyMark].(bool)
	return !marked, nil
}

// roleTracer is the pgx tracer of the pool's connections: it marks a
// connection whose statement or batch failed with read_only_sql_transaction,
// and forwards queries and batches to next (a test's tracer) when set.
type roleTracer struct {
	next pgx.QueryTracer
}

var (
	_ pgx.QueryTracer = roleTracer{}
	_ pgx.BatchTracer = roleTracer{}
)

// TraceQueryStart implements pgx.QueryTracer.
func (r roleTracer) TraceQueryStart(ctx context.Context, c *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if r.next != nil {
		return r.next.TraceQueryStart(ctx, c, d)
	}
	return ctx
}

// TraceQueryEnd implements pgx.QueryTracer.
func (r roleTracer) TraceQueryEnd(ctx context.Context, c *pgx.Conn, d pgx.TraceQueryEndData) {
	markIfReadOnly(c, d.Err)
	if r.next != nil {
		r.next.TraceQueryEnd(ctx, c, d)
	}
}

// TraceBatchStart implements pgx.BatchTracer.
func (r roleTracer) TraceBatchStart(ctx context.Context, c *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	if b, ok := r.next.(pgx.BatchTracer); ok {
		return b.TraceBatchStart(ctx, c, d)
	}
	return ctx
}

// TraceBatchQuery implements pgx.BatchTracer.
func (r roleTracer) TraceBatchQuery(ctx context.Context, c *pgx.Conn, d pgx.TraceBatchQueryData) {
	markIfReadOnly(c, d.Err)
	if b, ok := r.next.(pgx.BatchTracer); ok {
		b.TraceBatchQuery(ctx, c, d)
	}
}

// TraceBatchEnd implements pgx.BatchTracer.
func (r roleTracer) TraceBatchEnd(ctx context.Context, c *pgx.Conn, d pgx.TraceBatchEndData) {
	markIfReadOnly(c, d.Err)
	if b, ok := r.next.(pgx.BatchTracer); ok {
		b.TraceBatchEnd(ctx, c, d)
	}
}
