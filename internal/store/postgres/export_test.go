package postgres

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/iwf-server/iwf-server/engine"
)

// FlushChanges waits until the change announcements s published so far
// were sent (or given up), so that a test can order them.
func FlushChanges(s *Store) { s.feed.flush() }

// ChannelName is the notification channel of s's change feed.
func ChannelName(s *Store) string { return s.feed.channel }

// WithRoundTripCounter counts in n the round trips of every connection of
// the store: each statement sent alone and each batch (pipeline) is one.
func WithRoundTripCounter(n *atomic.Int64) Option {
	return func(o *options) { o.tracer = roundTrips{n} }
}

// roundTrips is a pgx tracer that counts queries and batches.
type roundTrips struct{ n *atomic.Int64 }

func (r roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	r.n.Add(1)
	return ctx
}

func (r roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (r roundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	r.n.Add(1)
	return ctx
}

func (r roundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

func (r roundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// WithCallReadCounter counts in n the statements sent that are callReadSQL
// (ReadForCall and the reads behind a COMMIT), alone or in a pipeline.
func WithCallReadCounter(n *atomic.Int64) Option {
	return func(o *options) { o.tracer = callReads{n} }
}

// callReads is a pgx tracer that counts the statements that are callReadSQL.
type callReads struct{ n *atomic.Int64 }

func (r callReads) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if d.SQL == callReadSQL {
		r.n.Add(1)
	}
	return ctx
}

func (r callReads) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (r callReads) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

func (r callReads) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	if d.SQL == callReadSQL {
		r.n.Add(1)
	}
}

func (r callReads) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// SetFeedClock replaces the clock of s's change feed.
func SetFeedClock(s *Store, now func() time.Time) { s.feed.now = now }

// ChangesSent is the number of change notifications s's feed has sent.
func ChangesSent(s *Store) int64 { return s.feed.sent.Load() }

// PublisherWakes is the number of times s's feed publisher woke up.
func PublisherWakes(s *Store) int64 { return s.feed.wakes.Load() }

// PresenceTTL is how long a feed publishes after it last heard another
// process.
const PresenceTTL = presenceTTL

// CallReadSQL is the statement of ReadForCall.
const CallReadSQL = callReadSQL

// SetCombiner sets how many commits of blind transactions s runs at once
// and how many transactions one of them carries at most.
func SetCombiner(s *Store, flushes, batch int) {
	s.combiner.maxFlushes, s.combiner.maxBatch = flushes, batch
}

// OnCombinerQueue has fn called with the length of the queue of blind
// transactions each time one joins it.
func OnCombinerQueue(s *Store, fn func(n int)) {
	s.combiner.mu.Lock()
	s.combiner.onQueue = fn
	s.combiner.mu.Unlock()
}

// CombinerStats returns how many commits carried more than one blind
// transaction, and how many transactions those carried.
func CombinerStats(s *Store) (batches, combined int64) {
	return s.combiner.batches.Load(), s.combiner.combined.Load()
}

// OnCombinerFlush has fn called by each commit of blind transactions
// before it sends anything. Set it before the store is used.
func OnCombinerFlush(s *Store, fn func()) { s.combiner.onFlush = fn }

// ViewQuery runs sql in a View of s, in the transaction's pipe, and
// returns the first column of its first row.
func ViewQuery(ctx context.Context, s *Store, sql string, args ...any) (string, error) {
	var out string
	err := s.View(ctx, func(ctx context.Context, tx engine.ReadTx) error {
		return tx.(*txn).tx.QueryRow(ctx, sql, args...).Scan(&out)
	})
	return out, err
}

// UpdateQuery is ViewQuery in an Update.
func UpdateQuery(ctx context.Context, s *Store, sql string, args ...any) (string, error) {
	var out string
	err := s.Update(ctx, func(ctx context.Context, tx engine.Tx) error {
		return tx.(*txn).tx.QueryRow(ctx, sql, args...).Scan(&out)
	})
	return out, err
}

// NewConns is the number of connections s's pool has opened.
func NewConns(s *Store) int64 { return s.pool.Stat().NewConnsCount() }

// SQLRunsDelete is the statement of RunsDelete.
var SQLRunsDelete = sqlRunsDelete
