package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/iwf-server/iwf-server/engine"
)

// Group commit of blind transactions.
//
// Most of the engine's transactions on a busy server apply a worker's
// answer without reading anything first (engine.TaskTakeExpecter): every
// statement they make is a queued write, checked by the database
// (iwf_expect), and nothing goes out before the commit. Such a transaction
// is blind, and it does not care which PostgreSQL transaction carries it,
// so the combiner commits several of them in one: BEGIN, the statements
// of each in turn, COMMIT. A PostgreSQL transaction has a fixed cost (its
// start, its commit record, the flush of the WAL, the backend's round
// trips) that several workflows then share; with W1's statements, eight
// workflows per transaction gave the database about 1.4× the workflows of
// one per transaction (docs/benchmarks.md).
//
// At most maxFlushes commits run at once (per store, that is per server
// process). A transaction that finds one of them free commits at once, by
// itself, in the one round trip a pipe's commit takes: a lone transaction
// waits for nobody. When all are busy, transactions queue by
// engine.Priority, as they do at the gate; the next commit to finish hands
// its slot to the most urgent queued transaction, which commits itself
// together with up to maxBatch-1 others, most urgent first. So batches
// form only under load, grow with it, and a burst of starts waits behind
// the answers and fired timers of workflows under way.
//
// A batch of several is one round trip too: BEGIN, every statement,
// COMMIT and the worker-call reads (engine.CallPrefetcher) behind it. A
// blind transaction's checks are all made by the database (iwf_expect,
// iwf_found), so a failed one stops the COMMIT. When a statement fails,
// only the transaction it belongs to fails with that error: the batch is
// rolled back and sent again without it, so a failed check of one workflow
// costs the others a round trip and nothing else. No lock of a batch is
// held across a round trip: a process paused or killed mid-batch leaves
// nothing locked behind it, as for a transaction alone. A transaction later in a batch sees the
// writes of those before it, exactly as if it had committed after them.
// When the connection fails, every transaction of the batch fails with
// its error, as a lone transaction would.
//
// A statement of a batch waits at most 200 ms for a row lock: a
// transaction whose lock is held elsewhere for longer (by a process that
// was paused, or cut off with its transaction open) leaves its batch, so
// that it holds up neither the others nor, through the few commit slots,
// the whole process; it then commits alone, waiting as long as it takes.
//
// Within a batch, transactions go in the order of the run they change
// first, so that two batches that both change runs A and B lock them in
// the same order. Transactions that lock outside that order can still
// deadlock; PostgreSQL detects it, the transaction chosen fails with
// SQLSTATE 40P01 and Update runs it again, as it does for any
// transaction.
type combiner struct {
	pool       *pgxpool.Pool
	maxFlushes int
	maxBatch   int

	mu sync.Mutex
	// queue holds the transactions waiting for a slot, by
	// engine.Priority, oldest first within one; queued counts them.
	queue    [engine.NumPriorities][]*member
	queued   int
	flushing int // commits under way, each holding a slot
	// onQueue, when set, is called with the queue's length after a
	// transaction joined it (tests wait on it).
	onQueue func(n int)
	// onFlush, when set, is called by each commit before it sends anything
	// (tests hold a commit there to keep its slot taken).
	onFlush func()

	// batches counts the commits of more than one transaction, combined
	// the transactions they carried.
	batches, combined atomic.Int64
}

// setBatchLockTimeout bounds how long a statement of a batch of several
// transactions waits for a row lock. A transaction that waits for a lock
// held elsewhere (by a process paused, or cut off from the database with
// its transaction open) would otherwise hold up every transaction of its
// batch, and with a few such batches every blind commit of the process.
// The one whose statement times out (SQLSTATE 55P03) leaves the batch, and
// commits alone, waiting as long as it takes (Store.update).
const setBatchLockTimeout = `set local lock_timeout = '200ms'`

// lockTimedOut reports whether err is a statement's lock timeout.
func lockTimedOut(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "55P03"
}

// Defaults of the combiner: 2 commits at once, of up to 16 transactions
// each. Measured with W1 @64 on 2 cores (docs/benchmarks.md): 2, 3 or 4
// commits at once did about the same, 8 fewer workflows (larger batches
// save more than the commits running side by side gain), 16 fewer still;
// 32 transactions a commit did no better than 16. Once starts and fired
// timers' answers came to the combiner too, 2 did better than 4
// (2026-12-07, pairs on one VM): W1 @64 +7 %, W2 +7 %, W1b +2 %, with a
// tenth less CPU in the database; W1b 1.5 PostgreSQL commits a workflow
// against 2.0; W3's p99 lateness 38–59 ms against 40–66.
const (
	combineFlushes = 2
	combineBatch   = 16
)

func newCombiner(pool *pgxpool.Pool) *combiner {
	return &combiner{pool: pool, maxFlushes: combineFlushes, maxBatch: combineBatch}
}

// member is one blind transaction waiting to be committed.
type member struct {
	ctx   context.Context
	prio  engine.Priority
	stmts []queuedStmt
	after []afterCommitRead
	key   string
	err   error
	// res receives the outcome, or lead the turn to commit, for a queued
	// member.
	res  chan error
	lead chan struct{}
}

// commit commits the writes stmts of a blind transaction, with the reads
// after behind the commit, and returns the outcome. key orders it within
// a batch. A transaction cancelled while it waits in the queue is dropped
// from it and commits nothing; once taken, its outcome is the commit's.
// A transaction whose context has a deadline (a client's request, such as
// a start) does not wait for that outcome past the end of its context: it
// returns the context's error, and the commit goes on for the others it
// carries, with its writes, as a commit whose answer is lost would.
func (c *combiner) commit(ctx context.Context, stmts []queuedStmt, after []afterCommitRead, key string) error {
	m := &member{ctx: ctx, prio: engine.PriorityOf(ctx), stmts: stmts, after: after, key: key}
	c.mu.Lock()
	if c.flushing < c.maxFlushes {
		c.flushing++
		c.mu.Unlock()
		return c.lead(m)
	}
	m.res, m.lead = make(chan error, 1), make(chan struct{}, 1)
	c.queue[m.prio] = append(c.queue[m.prio], m)
	c.queued++
	n, hook := c.queued, c.onQueue
	c.mu.Unlock()
	if hook != nil {
		hook(n)
	}
	select {
	case err := <-m.res:
		return err
	case <-m.lead:
		return c.lead(m)
	case <-ctx.Done():
	}
	c.mu.Lock()
	if i := slices.Index(c.queue[m.prio], m); i >= 0 {
		c.queue[m.prio] = slices.Delete(c.queue[m.prio], i, i+1)
		c.queued--
		c.mu.Unlock()
		return ctx.Err()
	}
	c.mu.Unlock()
	// Taken: by a batch under way, or to lead one. The turn to lead is
	// handed over under c.mu as m leaves the queue, so it is in m.lead by
	// now, and must be taken: the slot came with it.
	if _, bounded := ctx.Deadline(); bounded {
		select {
		case err := <-m.res:
			return err
		default:
		}
		select {
		case <-m.lead:
			return c.lead(m)
		default:
			return ctx.Err()
		}
	}
	select {
	case err := <-m.res:
		return err
	case <-m.lead:
		return c.lead(m)
	}
}

// lead commits m, holding a slot, with as many queued transactions as a
// batch takes, and returns m's outcome. When m's context has a deadline,
// the batch is committed on a goroutine of its own, and lead returns the
// context's error once it ends first (see commit).
func (c *combiner) lead(m *member) error {
	if _, bounded := m.ctx.Deadline(); !bounded {
		c.leadBatch(m)
		return m.err
	}
	done := make(chan struct{})
	go func() {
		c.leadBatch(m)
		close(done)
	}()
	select {
	case <-done:
		return m.err
	case <-m.ctx.Done():
	}
	select {
	case <-done:
		return m.err
	default:
		return m.ctx.Err()
	}
}

// leadBatch commits m, holding a slot, with as many queued transactions as
// a batch takes, most urgent first; then it hands the slot to the most
// urgent transaction still queued, or gives it back, and tells the batch
// its outcomes.
func (c *combiner) leadBatch(m *member) {
	c.mu.Lock()
	batch := append(make([]*member, 0, min(c.queued+1, c.maxBatch)), m)
	batch = c.takeLocked(batch, c.maxBatch)
	c.mu.Unlock()

	c.flush(batch)

	c.mu.Lock()
	if next := c.takeLocked(nil, 1); len(next) > 0 {
		next[0].lead <- struct{}{}
	} else {
		c.flushing--
	}
	c.mu.Unlock()
	for _, o := range batch {
		if o != m {
			o.res <- o.err
		}
	}
}

// takeLocked moves queued transactions to batch, most urgent first and
// oldest first within a priority, until batch holds max; c.mu is held.
func (c *combiner) takeLocked(batch []*member, max int) []*member {
	for p := range c.queue {
		if len(batch) >= max || c.queued == 0 {
			break
		}
		q := c.queue[p]
		k := min(len(q), max-len(batch))
		batch = append(batch, q[:k]...)
		clear(q[:k])
		c.queue[p] = q[k:]
		if len(c.queue[p]) == 0 {
			c.queue[p] = nil // let the backing array go
		}
		c.queued -= k
	}
	return batch
}

// flush commits batch on a connection of its own, setting every member's
// err. The commit stops only when every member's context has ended: no
// member's cancellation stops a commit that carries the others.
func (c *combiner) flush(batch []*member) {
	if c.onFlush != nil {
		c.onFlush()
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(batch[0].ctx))
	defer cancel()
	var left atomic.Int32
	left.Store(int32(len(batch)))
	for _, m := range batch {
		stop := context.AfterFunc(m.ctx, func() {
			if left.Add(-1) == 0 {
				cancel()
			}
		})
		defer stop()
	}
	// The transactions passed the gate when they began, and hold their
	// slots: the commit takes its connection from the pool directly.
	conn, err := c.pool.Acquire(ctx)
	if err != nil {
		for _, m := range batch {
			m.err = fmt.Errorf("postgres: begin: %w", err)
		}
		return
	}
	p := &pipe{pool: c.pool, begin: "begin", conn: conn}
	if len(batch) == 1 {
		m := batch[0]
		p.queued, p.afterCommit = m.stmts, m.after
		m.err = p.commit(ctx)
		p.end(context.WithoutCancel(ctx), m.err == nil)
		return
	}
	// The batch's transactions are ended here; the pipe only hands the
	// connection back.
	defer p.end(ctx, true)
	live := slices.Clone(batch)
	slices.SortStableFunc(live, func(a, b *member) int { return strings.Compare(a.key, b.key) })
	for len(live) > 0 {
		failed, err := c.try(ctx, p.conn, live)
		if failed < 0 {
			for _, m := range live {
				m.err = err
			}
			if err == nil && len(live) > 1 {
				c.batches.Add(1)
				c.combined.Add(int64(len(live)))
			}
			return
		}
		live[failed].err = err
		live = slices.Delete(live, failed, failed+1)
	}
}

// try runs live's statements in one transaction on conn and commits it,
// all in one round trip with the worker-call reads behind the COMMIT.
// Every check of the statements is made in the database (iwf_expect,
// iwf_found), so a failed one keeps the COMMIT from running. When a
// statement of one transaction fails, the transaction is rolled back and
// try returns that transaction's index and error; otherwise it returns -1
// and the outcome of the whole, nil when committed. A connection whose
// state is unknown afterwards is closed, so the pool drops it.
func (c *combiner) try(ctx context.Context, conn *pgxpool.Conn, live []*member) (int, error) {
	b := &pgx.Batch{}
	b.Queue("begin")
	b.Queue(setBatchLockTimeout)
	for _, m := range live {
		for _, q := range m.stmts {
			b.Queue(q.sql, q.args...)
		}
	}
	b.Queue("commit")
	for _, m := range live {
		for _, q := range callReadStmts(m.after) {
			b.Queue(q.sql, q.args...)
		}
	}
	br := conn.SendBatch(ctx, b)
	for range 2 { // begin, set lock_timeout
		if _, err := br.Exec(); err != nil {
			br.Close()
			conn.Conn().Close(ctx)
			return -1, err
		}
	}
	for i, m := range live {
		for _, q := range m.stmts {
			if err := runQueued(br, q); err != nil {
				br.Close()
				if _, rerr := conn.Exec(ctx, "rollback"); rerr != nil {
					// The connection is gone, and with it every transaction.
					conn.Conn().Close(ctx)
					return -1, err
				}
				return i, wrap(q.op, err)
			}
		}
	}
	if _, err := br.Exec(); err != nil { // commit
		br.Close()
		conn.Conn().Close(ctx)
		return -1, err
	}
	// Committed: a failed read only means that its call, and the ones
	// after it, read by themselves.
	defer br.Close()
	for _, m := range live {
		if !deliverCallReads(br, m.after) {
			break
		}
	}
	return -1, nil
}
