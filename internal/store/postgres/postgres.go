// Package postgres is the engine.Store for PostgreSQL, shared by any number
// of server processes.
//
// It owns the PostgreSQL schema (the numbered migrations embedded from
// migrations/), every SQL statement run against it, and the conversion
// between engine rows and PostgreSQL values. It imports the engine package
// for the contract and pgx; nothing else of this module.
//
// Concurrency: Update transactions run at READ COMMITTED and serialise on
// the rows they lock (WorkflowLock and RunLock are SELECT ... FOR UPDATE), so
// two processes never apply conflicting changes to one workflow. Deadlocks
// and serialization failures are retried transparently. TaskClaim leases
// tasks with FOR UPDATE SKIP LOCKED, so concurrent claimers neither block
// each other nor receive the same task. View transactions are REPEATABLE
// READ, READ ONLY: one consistent snapshot. A transaction that sends
// nothing before its commit (all writes, checked by the database), a
// start's as an answer's, is committed by the combiner, together with
// others that wait at the same time (group commit, see combine.go).
//
// Statements are prepared and cached per connection by pgx; batches are
// written with one multi-row statement each (a VALUES list of up to four
// rows, an unnest of arrays beyond, see valuesMaxRows).
package postgres

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/store/rowfmt"
)

// Store is the PostgreSQL implementation of engine.Store, on a pgx
// connection pool. It is safe for concurrent use.
type Store struct {
	pool *pgxpool.Pool
	// readTimeout bounds each statement of a View whose context has no
	// deadline, or a later one (see statementTimeout).
	readTimeout time.Duration
	gate        *gate
	schema      string
	feed        *feed
	// combiner commits blind transactions, several in one PostgreSQL
	// transaction when they wait at once.
	combiner *combiner
	// live watches that the database answers (nil when turned off).
	live *liveness
}

var (
	_ engine.Store      = (*Store)(nil)
	_ engine.ChangeFeed = (*Store)(nil)
)

// Option configures Open.
type Option func(*options)

type options struct {
	schema      string
	tracer      pgx.QueryTracer // tests count round trips with it
	readTimeout time.Duration
	liveness    time.Duration
}

// DefaultReadTimeout is the statement timeout of View transactions whose
// context carries no earlier deadline.
const DefaultReadTimeout = 30 * time.Second

// WithReadTimeout sets the statement timeout of View transactions (reads:
// searches, gets, the console) whose context has no earlier deadline;
// DefaultReadTimeout without it. d <= 0 leaves such reads without a
// timeout of the store's (the database's statement_timeout applies).
func WithReadTimeout(d time.Duration) Option {
	return func(o *options) {
		if d <= 0 {
			d = -1
		}
		o.readTimeout = d
	}
}

// cancelDelay is how long after a statement's context ends the store sends
// PostgreSQL a cancel request for it: at once, so that an abandoned query
// frees its backend and its connection. deadlineDelay is how long after
// that the connection waits for the server's answer before it gives up on
// the socket (and the pool drops the connection).
const (
	cancelDelay   = 0
	deadlineDelay = 3 * time.Second
)

// WithSchema keeps the store's tables in the given schema: every connection
// of the pool gets it as its only search_path, and Migrate creates the schema
// when absent. Without it the connection's default search_path applies
// (normally "public").
func WithSchema(name string) Option {
	return func(o *options) { o.schema = name }
}

// DefaultMaxConns is the connection pool size when the URL does not set
// pool_max_conns.
const DefaultMaxConns = 32

// Open connects to the database at url (a PostgreSQL URL or keyword/value
// connection string, as understood by pgxpool, including pool_max_conns and
// the other pool_* parameters) and checks that it answers. Open does not
// create the schema: call Migrate before using the store.
func Open(ctx context.Context, url string, opts ...Option) (*Store, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	if o.schema != "" {
		cfg.ConnConfig.RuntimeParams["search_path"] = pgx.Identifier{o.schema}.Sanitize()
	}
	// A connection that turns out to be on a read-only server is discarded
	// (readonly.go).
	cfg.ConnConfig.Tracer = roleTracer{next: o.tracer}
	cfg.PrepareConn = usable
	var live *liveness
	if o.liveness >= 0 {
		timeout := o.liveness
		if timeout == 0 {
			timeout = DefaultLivenessTimeout
		}
		live = newLiveness(timeout)
		if cfg.ConnConfig.ConnectTimeout == 0 {
			cfg.ConnConfig.ConnectTimeout = timeout
		}
		live.probeCfg = cfg.ConnConfig.Copy()
		live.probeCfg.DialFunc = live.dialer.DialContext
		live.probeCfg.Tracer = nil
		cfg.ConnConfig.DialFunc = live.dial
	}
	// The change feed's connections wait for notifications under contexts
	// that end routinely: they keep pgx's default, which only unblocks the
	// socket.
	feedCfg := cfg.ConnConfig.Copy()
	// When a statement's context ends, PostgreSQL is asked to cancel it
	// (pgx's default only sets a deadline on the socket, which closes the
	// connection while the backend goes on running the statement): the
	// backend stops, and the connection goes back to the pool usable. Should
	// the server not answer the cancel request in time, the socket's
	// deadline ends the wait.
	cfg.ConnConfig.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.CancelRequestContextWatcherHandler{Conn: c, CancelRequestDelay: cancelDelay, DeadlineDelay: deadlineDelay}
	}
	if !strings.Contains(url, "pool_max_conns") {
		// pgx's default (4 on a small machine) starves an engine that runs
		// hundreds of tasks at once; transactions are short, so more
		// connections than cores pay off.
		cfg.MaxConns = DefaultMaxConns
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	// The first query checks that the database answers, and names the
	// schema the tables live in (the change feed's channel depends on it).
	var schema *string
	if err := pool.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: connect: %w", err)
	}
	feedSchema := o.schema
	if feedSchema == "" && schema != nil {
		feedSchema = *schema
	}
	readTimeout := o.readTimeout
	switch {
	case readTimeout == 0:
		readTimeout = DefaultReadTimeout
	case readTimeout < 0:
		readTimeout = 0
	}
	s := &Store{pool: pool, readTimeout: readTimeout, gate: newGate(int(cfg.MaxConns)), schema: o.schema, feed: newFeed(feedCfg, feedSchema), live: live}
	s.combiner = newCombiner(s.pool)
	if live != nil {
		live.start()
	}
	return s, nil
}

// Ping reports whether the database answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("postgres: ping: %w", err)
	}
	return nil
}

// Close sends the change announcements still pending and closes every
// connection of the pool, waiting for the ones in use to be returned.
func (s *Store) Close() error {
	if s == nil || s.pool == nil {
		return nil
	}
	s.feed.close()
	if s.live != nil {
		s.live.close()
	}
	s.pool.Close()
	return nil
}

// maxAttempts bounds how often Update and the task statements run after a
// deadlock or serialization failure.
const maxAttempts = 5

// retryable reports whether err is a transient conflict after which the
// whole transaction may simply run again.
func retryable(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "40001", // serialization_failure
			"40P01": // deadlock_detected
			return true
		}
	}
	return false
}

// retry runs op until it succeeds, fails with a non-retryable error, or has
// run maxAttempts times, with a short randomised pause between attempts.
func retry(ctx context.Context, op func() error) error {
	for attempt := 1; ; attempt++ {
		err := op()
		if err == nil || attempt == maxAttempts || !retryable(err) {
			return err
		}
		pause := time.Duration(attempt) * time.Millisecond
		pause += rand.N(pause)
		timer := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			timer.Stop()
			return err
		case <-timer.C:
		}
	}
}

// Update runs fn in a READ COMMITTED transaction and commits it when fn
// returns nil. When ctx has a deadline, each statement runs with a
// statement_timeout of the time left until it (set with BEGIN, in the same
// round trip); when ctx ends, the statement under way is cancelled on the
// server. A transaction that only writes, committed by the combiner, is
// bounded by ctx alone. When the transaction fails with a deadlock or serialization
// failure, Update rolls it back and runs fn again, up to a few times; fn must
// therefore have no effects outside tx. A panic in fn rolls the transaction
// back and propagates.
func (s *Store) Update(ctx context.Context, fn func(ctx context.Context, tx engine.Tx) error) error {
	return classify(ctx, unexpected(retry(ctx, func() error { return s.update(ctx, fn) })))
}

// unexpected reports a failed check of TaskTakeExpecting (SQLSTATE IW001,
// raised by iwf_expect) and WorkflowCreateExpecting's insert of a taken id
// (a unique violation of workflows_pkey: every other insert into workflows
// says ON CONFLICT) as engine.ErrUnexpected, and a write that found no row
// to change (IW002, raised by iwf_found) as engine.ErrNotFound, and
// external objects the payload sweep gave up (IW003, raised by iwf_kept)
// as engine.ErrPayloadGone.
func unexpected(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "IW001":
			return fmt.Errorf("%w: %s", engine.ErrUnexpected, pgErr.Message)
		case "IW002":
			return fmt.Errorf("%w: %s", engine.ErrNotFound, pgErr.Message)
		case "IW003":
			return fmt.Errorf("%w: %s", engine.ErrPayloadGone, pgErr.Message)
		case "23505":
			if pgErr.ConstraintName == "workflows_pkey" {
				return fmt.Errorf("%w: workflow id taken", engine.ErrUnexpected)
			}
		}
	}
	return err
}

// statementTimeout is the statement_timeout of a transaction that begins
// now under ctx: the time left until ctx's deadline, for a View no more
// than the store's read timeout (also when ctx has no deadline); 0, none
// of the store's, for an Update without a deadline (the engine's own work,
// bounded by what it does, which must not fail half-way for want of
// time). A deadline already past is ctx's error.
func (s *Store) statementTimeout(ctx context.Context, view bool) (time.Duration, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	var d time.Duration
	if dl, ok := ctx.Deadline(); ok {
		if d = time.Until(dl); d <= 0 {
			return 0, context.DeadlineExceeded
		}
	}
	if view && s.readTimeout > 0 && (d == 0 || d > s.readTimeout) {
		d = s.readTimeout
	}
	return d, nil
}

func (s *Store) update(ctx context.Context, fn func(ctx context.Context, tx engine.Tx) error) error {
	timeout, err := s.statementTimeout(ctx, false)
	if err != nil {
		return err
	}
	p, err := s.beginPipe(ctx, "begin", timeout)
	if err != nil {
		return err
	}
	committed := false
	// Also when ctx is cancelled: the connection goes back to the pool
	// clean, or closed when the rollback fails.
	defer func() { p.end(context.WithoutCancel(ctx), committed) }()
	t := &txn{tx: p}
	if err := fn(ctx, t); err != nil {
		return err
	}
	t.knowReads()
	// A start's transaction goes to the combiner too, where it queues
	// behind every other priority. Starts committed alone from the
	// combiner's first day until 2026-12-07: batched, they had made the
	// fired timers of W3 late, because a timer that fired alone applied
	// its answer after reading and locking the run again, on a connection
	// and a gate slot of its own, and the call reads of the next timers
	// waited at the gate behind those. Since that answer is blind too
	// (engine.updateTaking), W3's p99 lateness measured 42–78 ms with
	// starts batched and 28–48 ms alone, and W1b @50 1.33× DBOS
	// Transact's state executions/s against 1.21×, with 2.0–2.1
	// PostgreSQL commits a workflow against 2.6–2.7, four commits at once
	// (two since: combineFlushes; docs/benchmarks.md).
	if p.blind() {
		// Nothing was sent: the combiner commits the writes, together with
		// other transactions' when several wait. The transaction keeps its
		// slot at the gate until then, so that the gate goes on bounding
		// the transactions under way, by priority.
		err := s.combiner.commit(ctx, p.queued, p.afterCommit, p.runKey)
		if !lockTimedOut(err) {
			p.queued, p.afterCommit = nil, nil
			if err != nil {
				return fmt.Errorf("postgres: commit: %w", err)
			}
			return nil
		}
		// A lock held elsewhere: it left its batch, and waits for the
		// lock alone, on a connection of its own.
	}
	if err := p.commit(ctx); err != nil {
		return fmt.Errorf("postgres: commit: %w", err)
	}
	committed = true
	return nil
}

// View runs fn in a REPEATABLE READ, READ ONLY transaction: every read sees
// the same snapshot. Each statement runs with a statement_timeout of the
// time left until ctx's deadline, and no more than the store's read
// timeout (WithReadTimeout); when ctx ends, the statement under way is
// cancelled on the server.
func (s *Store) View(ctx context.Context, fn func(ctx context.Context, tx engine.ReadTx) error) error {
	timeout, err := s.statementTimeout(ctx, true)
	if err != nil {
		return classify(ctx, err)
	}
	p, err := s.beginPipe(ctx, "begin isolation level repeatable read read only", timeout)
	if err != nil {
		return classify(ctx, err)
	}
	defer p.end(context.WithoutCancel(ctx), false)
	return classify(ctx, fn(ctx, &txn{tx: p}))
}

// $1 owner, $2 now, $3 lease duration, $4 due before, $5 limit (NULL: none).
// Expired leases first, then unleased tasks up to the limit, each oldest due
// first and each from its partial index. Each part locks exactly the rows it
// returns, skipping rows that other transactions hold. The SET expressions
// read the row as it was, so the attempt advances exactly when the claimed
// task was leased (that is, its lease expired).
const sqlTaskClaim = `WITH expired AS (
		SELECT id FROM tasks
		WHERE lease_owner IS NOT NULL AND lease_expires_at < $2::bigint AND due_at <= $4::bigint
		ORDER BY due_at, id
		LIMIT $5::bigint
		FOR UPDATE SKIP LOCKED
	), unleased AS (
		SELECT id FROM tasks
		WHERE lease_owner IS NULL AND due_at <= $4::bigint
		ORDER BY due_at, id
		LIMIT $5::bigint - (SELECT count(*) FROM expired)
		FOR UPDATE SKIP LOCKED
	)
	UPDATE tasks SET
		attempt = attempt + CASE WHEN lease_owner IS NULL THEN 0 ELSE 1 END,
		lease_owner = $1,
		lease_expires_at = GREATEST(due_at, $2::bigint) + $3::bigint
	WHERE id IN (SELECT id FROM expired UNION ALL SELECT id FROM unleased)
	RETURNING ` + taskColumns

// TaskClaim leases due tasks to params.Owner and returns them oldest due
// first. When more tasks are claimable than params.Limit (<= 0: no limit),
// tasks whose lease expired are taken before unleased ones. Tasks locked by
// a concurrent claim or transaction are skipped, not waited for.
func (s *Store) TaskClaim(ctx context.Context, p engine.TaskClaimParams) ([]*engine.Task, error) {
	if p.Owner == "" {
		return nil, errors.New("postgres: TaskClaim: empty owner")
	}
	var limit *int64
	if p.Limit > 0 {
		l := int64(p.Limit)
		limit = &l
	}
	var tasks []*engine.Task
	err := retry(ctx, func() error {
		rows, err := s.pool.Query(ctx, sqlTaskClaim, p.Owner, rowfmt.ToMs(p.Now), p.LeaseDuration.Milliseconds(), rowfmt.ToMs(p.DueBefore), limit)
		if err != nil {
			return err
		}
		tasks, err = scanTasks(rows)
		return err
	})
	if err != nil {
		return nil, classify(ctx, fmt.Errorf("postgres: TaskClaim: %w", err))
	}
	rowfmt.SortTasks(tasks)
	return tasks, nil
}

// TaskRenewLeases extends the leases owner holds on ids to
// max(DueAt, now) + duration. Only the leases that move are written: a
// task due in the future (a sleeping timer) keeps the lease it got, which
// already runs to its due time plus the lease duration, so thousands of
// sleeping timers cost nothing here. Rows locked by a transaction under
// way (the task being completed or rescheduled) are skipped, not waited
// for: the lease of a task still there is renewed at the next round, a
// third of the lease duration later.
func (s *Store) TaskRenewLeases(ctx context.Context, owner string, ids []int64, now time.Time, duration time.Duration) (int64, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	var n int64
	err := retry(ctx, func() error {
		tag, err := s.pool.Exec(ctx, `UPDATE tasks SET lease_expires_at = GREATEST(due_at, $1::bigint) + $2::bigint
			WHERE id IN (
				SELECT id FROM tasks
				WHERE id = ANY($4::bigint[]) AND lease_owner = $3
					AND lease_expires_at < GREATEST(due_at, $1::bigint) + $2::bigint
				FOR UPDATE SKIP LOCKED)`, rowfmt.ToMs(now), duration.Milliseconds(), owner, ids)
		n = tag.RowsAffected()
		return err
	})
	if err != nil {
		return 0, classify(ctx, fmt.Errorf("postgres: TaskRenewLeases: %w", err))
	}
	return n, nil
}

// TaskReleaseLeases clears every lease not held by keepOwner (all leases
// when keepOwner is ""). Like the expiry of a lease, releasing it advances
// the task's Attempt: the previous owner may have called the worker already.
func (s *Store) TaskReleaseLeases(ctx context.Context, keepOwner string) (int64, error) {
	var n int64
	err := retry(ctx, func() error {
		tag, err := s.pool.Exec(ctx, `UPDATE tasks SET lease_owner = NULL, lease_expires_at = 0, attempt = attempt + 1
			WHERE lease_owner IS NOT NULL AND lease_owner <> $1`, keepOwner)
		n = tag.RowsAffected()
		return err
	})
	if err != nil {
		return 0, classify(ctx, fmt.Errorf("postgres: TaskReleaseLeases: %w", err))
	}
	return n, nil
}

// TaskRelease clears owner's leases on ids (all of owner's leases when ids
// is nil), advancing the attempt when bumpAttempt is set.
func (s *Store) TaskRelease(ctx context.Context, owner string, ids []int64, bumpAttempt bool) (int64, error) {
	if owner == "" {
		return 0, errors.New("postgres: TaskRelease: empty owner")
	}
	if ids != nil && len(ids) == 0 {
		return 0, nil
	}
	bump := 0
	if bumpAttempt {
		bump = 1
	}
	var n int64
	err := retry(ctx, func() error {
		tag, err := s.pool.Exec(ctx, `UPDATE tasks SET lease_owner = NULL, lease_expires_at = 0, attempt = attempt + $3
			WHERE lease_owner = $1 AND ($2::bigint[] IS NULL OR id = ANY($2::bigint[]))`, owner, ids, bump)
		n = tag.RowsAffected()
		return err
	})
	if err != nil {
		return 0, classify(ctx, fmt.Errorf("postgres: TaskRelease: %w", err))
	}
	return n, nil
}

// nullString binds "" as NULL.
func nullString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// DurabilityWarnings names the server settings under which a commit that
// PostgreSQL acknowledged can be lost to a crash of the database server or
// its machine, as this store's sessions see them: fsync or
// full_page_writes off (the server's), synchronous_commit off (also per
// database, role or connection). Empty means the server keeps what it
// acknowledges (docs/reliability.md).
func (s *Store) DurabilityWarnings(ctx context.Context) ([]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT name, setting FROM pg_settings
		WHERE name IN ('fsync', 'full_page_writes', 'synchronous_commit') ORDER BY name`)
	if err != nil {
		return nil, classify(ctx, fmt.Errorf("postgres: DurabilityWarnings: %w", err))
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var name, setting string
		if err := rows.Scan(&name, &setting); err != nil {
			return nil, err
		}
		if setting == "off" {
			out = append(out, name+"=off: a commit the database acknowledged can be lost if its server or machine crashes")
		}
	}
	return out, rows.Err()
}
