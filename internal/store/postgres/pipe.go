package postgres

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/iwf-server/iwf-server/engine"
)

// pipe is a transaction on one pooled connection that saves round trips by
// pipelining (one pgx batch per round trip):
//
//   - BEGIN is not sent on its own: it goes out with the transaction's
//     first statement;
//   - writes whose outcome the engine does not need at once (inserts,
//     updates, deletes that return nothing the caller reads) are queued,
//     not sent: they go out ahead of the next statement whose answer is
//     needed (a read, or a write that reports whether it changed a row),
//     or with COMMIT. Statements still run in the order the engine issued
//     them, so every read sees the transaction's earlier writes.
//
// A queued write that fails makes the statement it travels with fail (or
// the commit): the engine aborts the transaction on any error, so the
// outcome is the same as if the write had failed when issued, reported a
// little later. A typical engine transaction (lock the run, remove the
// task, read the execution, write five rows, commit) takes four round
// trips instead of ten.
type pipe struct {
	// conn is the transaction's connection, taken from the pool when the
	// first statement goes out; nil until then. A transaction that only
	// writes (a blind one) never takes one of its own: its writes are
	// committed by the store's combiner.
	conn *pgxpool.Conn
	pool *pgxpool.Pool
	// gate admits the transaction, by priority, before it begins (so that
	// the time the engine reads at its start is not spent waiting); the
	// transaction holds its slot until it ends, a blind one also while the
	// combiner commits it. gated is set while it holds one.
	gate  *gate
	gated bool
	// begin is the BEGIN statement still to send; "" once sent.
	begin string
	// timeout, when not 0, is the transaction's statement_timeout, set
	// right after BEGIN in the same round trip.
	timeout time.Duration
	// queued are the writes not sent yet, in issue order.
	queued []queuedStmt
	// sends counts the times the queue went out (and was emptied), so that
	// an index into queued can be told valid (see txn.fold).
	sends int
	// started is set once BEGIN went out: from then on the transaction
	// must end with COMMIT or ROLLBACK.
	started bool
	// afterCommit are the worker-call reads that travel behind COMMIT
	// (engine.CallPrefetcher).
	afterCommit []afterCommitRead
	// runKey is the first run the transaction locks or changes; the
	// combiner orders a batch's transactions by it (see combiner).
	runKey string
}

// afterCommitRead is a ReadForCall queued behind a transaction's COMMIT.
type afterCommitRead struct {
	runID, executionID string
	done               func(*engine.CallRead)
	// known, when set, is the read's result, known to the transaction
	// (package born): nothing is sent for it.
	known *engine.CallRead
}

// callReadStmts returns the statements of the reads of after that must be
// sent (those not known), in order, to travel behind a COMMIT.
func callReadStmts(after []afterCommitRead) []queuedStmt {
	stmts := make([]queuedStmt, 0, len(after))
	for _, a := range after {
		if a.known == nil {
			stmts = append(stmts, queuedStmt{sql: callReadSQL, args: []any{a.runID, a.executionID}})
		}
	}
	return stmts
}

// deliverCallReads hands the results of after's reads, sent behind a
// COMMIT that succeeded (or known without a read), to their done
// functions, in order. It stops at the first read that fails and reports
// false: that call, and the ones after it, then read by themselves; the
// commit stands.
func deliverCallReads(br pgx.BatchResults, after []afterCommitRead) bool {
	for _, a := range after {
		if a.known != nil {
			a.done(a.known)
			continue
		}
		rows, err := br.Query()
		if err != nil {
			return false
		}
		cr, err := scanCallRead(rows)
		if err != nil {
			return false
		}
		a.done(cr)
	}
	return true
}

// queuedStmt is a write waiting in a pipe.
type queuedStmt struct {
	op   string
	sql  string
	args []any
	// check, when set, judges the command tag (e.g. "no row changed").
	check func(pgconn.CommandTag) error
	// read, when set, consumes the rows the statement returns (RETURNING).
	read func(pgx.Rows) error
}

// earlierWriteError reports the failure of a queued write at the statement
// it travelled with. It does not match engine.ErrNotFound: the caller of a
// read must not take a write's "no such row" for its own.
type earlierWriteError struct{ err error }

func (e *earlierWriteError) Error() string {
	return "an earlier write of this transaction failed: " + e.err.Error()
}

func (e *earlierWriteError) Unwrap() error {
	if errors.Is(e.err, engine.ErrNotFound) {
		return nil
	}
	return e.err
}

// beginPipe starts a transaction that begins with the statement begin,
// with a statement_timeout of timeout when that is not 0, once the gate
// admits it at ctx's priority. Its connection is taken when
// its first statement goes out (acquire).
func (s *Store) beginPipe(ctx context.Context, begin string, timeout time.Duration) (*pipe, error) {
	p := &pipe{pool: s.pool, gate: s.gate, begin: begin, timeout: timeout}
	if err := p.enterGate(ctx); err != nil {
		return nil, err
	}
	return p, nil
}

// enterGate takes a slot at the gate unless the pipe holds one.
func (p *pipe) enterGate(ctx context.Context) error {
	if p.gated {
		return nil
	}
	if err := p.gate.enter(ctx); err != nil {
		return fmt.Errorf("postgres: begin: %w", err)
	}
	p.gated = true
	return nil
}

// leaveGate gives the pipe's slot at the gate back, if it holds one.
func (p *pipe) leaveGate() {
	if p.gated {
		p.gated = false
		p.gate.leave()
	}
}

// acquire takes the transaction's connection from the pool, unless it has
// one, after a slot at the gate when it holds none.
func (p *pipe) acquire(ctx context.Context) error {
	if p.conn != nil {
		return nil
	}
	if err := p.enterGate(ctx); err != nil {
		return err
	}
	conn, err := p.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("postgres: begin: %w", err)
	}
	p.conn = conn
	return nil
}

// blind reports whether nothing of the transaction went out yet and
// everything it does is queued: its writes can then be committed together
// with other transactions' (combiner).
func (p *pipe) blind() bool { return p.conn == nil && len(p.queued) > 0 }

// later queues a write; check, when set, judges its command tag when it
// has run.
func (p *pipe) later(op, sql string, check func(pgconn.CommandTag) error, args ...any) {
	p.queued = append(p.queued, queuedStmt{op: op, sql: sql, args: args, check: check})
}

// laterRows queues a write that returns rows, read by read when it has run.
func (p *pipe) laterRows(op, sql string, read func(pgx.Rows) error, args ...any) {
	p.queued = append(p.queued, queuedStmt{op: op, sql: sql, args: args, read: read})
}

// touch records runID as the transaction's run key unless it has one.
func (p *pipe) touch(runID string) {
	if p.runKey == "" {
		p.runKey = runID
	}
}

// pending reports whether anything waits to be sent.
func (p *pipe) pending() bool { return p.begin != "" || len(p.queued) > 0 }

// send sends BEGIN (when not sent yet), the queued writes and the
// statement last with args, in one round trip. It consumes the results of
// all but last and returns the batch positioned at last's result; the
// caller closes it. A failed queued write is reported as such, as an
// earlierWriteError, except at the commit, where it is the transaction's
// outcome.
func (p *pipe) send(ctx context.Context, last string, args ...any) (pgx.BatchResults, error) {
	return p.sendWithTail(ctx, nil, last, args...)
}

// sendWithTail is send with the statements of tail behind last, in the
// same round trip. The caller reads their results after last's.
func (p *pipe) sendWithTail(ctx context.Context, tail []queuedStmt, last string, args ...any) (pgx.BatchResults, error) {
	if err := p.acquire(ctx); err != nil {
		return nil, err
	}
	if err := checkParams(args); err != nil {
		return nil, err
	}
	b := &pgx.Batch{}
	begin := p.begin
	if begin != "" {
		b.Queue(begin)
		if p.timeout > 0 {
			b.Queue(sqlSetTimeout, timeoutSetting(p.timeout))
		}
	}
	queued := p.queued
	for _, q := range queued {
		b.Queue(q.sql, q.args...)
	}
	b.Queue(last, args...)
	for _, q := range tail {
		b.Queue(q.sql, q.args...)
	}
	p.begin, p.queued = "", nil
	p.sends++
	br := p.conn.SendBatch(ctx, b)
	if begin != "" {
		p.started = true
		if _, err := br.Exec(); err != nil {
			br.Close()
			return nil, err
		}
		if p.timeout > 0 {
			if _, err := br.Exec(); err != nil {
				br.Close()
				return nil, err
			}
		}
	}
	for _, q := range queued {
		if err := runQueued(br, q); err != nil {
			br.Close()
			if last == "commit" {
				return nil, wrap(q.op, err)
			}
			return nil, &earlierWriteError{err: wrap(q.op, err)}
		}
	}
	return br, nil
}

// runQueued reads the result of one queued write from br.
func runQueued(br pgx.BatchResults, q queuedStmt) error {
	if q.read != nil {
		rows, err := br.Query()
		if err != nil {
			return err
		}
		err = q.read(rows)
		rows.Close()
		if err == nil {
			err = rows.Err()
		}
		return err
	}
	tag, err := br.Exec()
	if err == nil && q.check != nil {
		err = q.check(tag)
	}
	return err
}

// sqlSetTimeout sets the statement_timeout of the transaction (is_local):
// a statement of its own, which travels with BEGIN.
const sqlSetTimeout = `SELECT set_config('statement_timeout', $1, true)`

// timeoutSetting is d as a statement_timeout value: whole milliseconds,
// rounded up, at least 1 (0 would mean none).
func timeoutSetting(d time.Duration) string {
	ms := (d + time.Millisecond - 1) / time.Millisecond
	return strconv.FormatInt(max(int64(ms), 1), 10)
}

// Query runs a statement that returns rows, after whatever is pending.
func (p *pipe) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if err := checkParams(args); err != nil {
		return nil, err
	}
	if !p.pending() && p.conn != nil {
		return p.conn.Query(ctx, sql, args...)
	}
	br, err := p.send(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	rows, err := br.Query()
	if err != nil {
		br.Close()
		return nil, err
	}
	return &batchRows{Rows: rows, br: br}, nil
}

// QueryRow is Query for at most one row, as pgx's QueryRow.
func (p *pipe) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	rows, err := p.Query(ctx, sql, args...)
	return &pipeRow{rows: rows, err: err}
}

// Exec runs a statement whose command tag the caller needs now, after
// whatever is pending.
func (p *pipe) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if err := checkParams(args); err != nil {
		return pgconn.CommandTag{}, err
	}
	if !p.pending() && p.conn != nil {
		return p.conn.Exec(ctx, sql, args...)
	}
	br, err := p.send(ctx, sql, args...)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return tag, err
}

// commit sends what is queued and COMMIT in one round trip, followed by
// the reads queued to run after the commit (each its own snapshot, which
// sees the commit). A transaction that never sent anything has nothing to
// commit.
func (p *pipe) commit(ctx context.Context) error {
	if !p.started && len(p.queued) == 0 {
		p.begin = ""
		return nil
	}
	after := p.afterCommit
	p.afterCommit = nil
	// COMMIT is the last statement whose outcome counts; the reads travel
	// behind it in the same round trip.
	br, err := p.sendWithTail(ctx, callReadStmts(after), "commit")
	if err != nil {
		return err
	}
	if _, err := br.Exec(); err != nil {
		br.Close()
		return err
	}
	// Committed: a failed read only means that its call reads by itself,
	// and the batch then reports that read's error, which is not the
	// commit's.
	if !deliverCallReads(br, after) {
		br.Close()
		return nil
	}
	return br.Close()
}

// end rolls the transaction back when it started and did not commit, and
// returns the connection to the pool, closing it first when its state is
// unknown (the rollback failed).
func (p *pipe) end(ctx context.Context, committed bool) {
	p.queued, p.afterCommit = nil, nil
	if p.conn != nil {
		if p.started && !committed {
			if _, err := p.conn.Exec(ctx, "rollback"); err != nil {
				p.conn.Conn().Close(ctx)
			}
		}
		p.conn.Release()
		p.conn = nil
	}
	p.leaveGate()
}

// batchRows are the rows of the last statement of a batch; closing them
// closes the batch.
type batchRows struct {
	pgx.Rows
	br     pgx.BatchResults
	closed bool
	err    error
}

// Close closes the rows and the batch.
func (r *batchRows) Close() {
	if r.closed {
		return
	}
	r.closed = true
	r.Rows.Close()
	if err := r.br.Close(); err != nil && r.Rows.Err() == nil {
		r.err = err
	}
}

// Err is the rows' error, or the batch's.
func (r *batchRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return err
	}
	return r.err
}

// pipeRow is the pgx.Row of pipe.QueryRow.
type pipeRow struct {
	rows pgx.Rows
	err  error
}

// Scan reads the first row into dest, or returns pgx.ErrNoRows.
func (r *pipeRow) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	defer r.rows.Close()
	if !r.rows.Next() {
		if err := r.rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := r.rows.Scan(dest...); err != nil {
		return err
	}
	r.rows.Close()
	return r.rows.Err()
}

// readIDs returns a read function for a queued multi-row INSERT ...
// RETURNING id of n rows: it hands the new IDs, in insertion order, to
// assign. Identity values are drawn row by row, in order, so sorting them
// ascending restores that order whatever order RETURNING uses.
func readIDs(n int, assign func(ids []int64)) func(pgx.Rows) error {
	return func(rows pgx.Rows) error {
		ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return err
		}
		if len(ids) != n {
			return fmt.Errorf("inserted %d rows, want %d", len(ids), n)
		}
		sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
		assign(ids)
		return nil
	}
}
