// Package sqlite is the embedded engine.Store: one SQLite database file,
// accessed through the pure-Go driver modernc.org/sqlite (no cgo).
//
// It owns the SQLite schema (the numbered migrations embedded from
// migrations/), every SQL statement run against it, and the conversion
// between engine rows and SQLite values. It imports the engine package for
// the contract and nothing else of this module.
//
// The database runs in WAL mode with synchronous=NORMAL by default: a
// committed transaction survives a crash of the process (kill -9); after a
// power loss or an OS crash the last transactions before it may be lost.
// With synchronous=FULL (WithSynchronous) every commit is on disk before
// Update returns (docs/reliability.md). All writes go through
// one connection whose transactions begin IMMEDIATE, so writers queue in Go
// instead of failing with SQLITE_BUSY; View transactions use a separate pool
// of read-only connections and see a consistent snapshot without blocking the
// writer. A third connection checkpoints the WAL in the background, so that
// the writer's commits do not (checkpoint.go). Every statement is prepared
// once per connection.
//
// A Store is for one process: SQLite has no row locks across processes, and
// TaskReleaseLeases is meant to be called at start-up.
package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/store/rowfmt"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver
)

// Synchronous is how far a commit goes before Update returns: SQLite's
// PRAGMA synchronous, in WAL mode.
type Synchronous string

const (
	// SyncNormal: a commit is in the WAL file, in the operating system's
	// cache; it reaches the disk at the next checkpoint, which the
	// checkpointer runs at most checkpointPause after a commit. A process
	// crash loses nothing committed; an OS crash or a power loss may lose
	// the commits since the last checkpoint, normally the last fraction of
	// a second.
	SyncNormal Synchronous = "normal"
	// SyncFull: each commit's WAL frames are fsynced before it returns;
	// nothing committed is lost to an OS crash or a power loss.
	SyncFull Synchronous = "full"
)

func (s Synchronous) valid() bool { return s == SyncNormal || s == SyncFull }

// ParseSynchronous reads "normal" or "full" (any case).
func ParseSynchronous(s string) (Synchronous, error) {
	v := Synchronous(strings.ToLower(strings.TrimSpace(s)))
	if !v.valid() {
		return "", fmt.Errorf("invalid synchronous level %q: want normal or full", s)
	}
	return v, nil
}

// Option configures Open.
type Option func(*options)

type options struct {
	sync Synchronous
}

// WithSynchronous sets the durability of commits (default SyncNormal).
func WithSynchronous(s Synchronous) Option { return func(o *options) { o.sync = s } }

// MemoryDSN is the dsn of a private in-memory database, for tests only:
// nothing survives Close, and reads and writes share a single connection.
const MemoryDSN = ":memory:"

// Store is the SQLite implementation of engine.Store. It is safe for
// concurrent use.
type Store struct {
	w *sql.DB // the single write connection
	r *sql.DB // read-only connections (the same as w for MemoryDSN)

	// writerStatements counts the statements the writer ran (txn.stmt,
	// WriterStatements).
	writerStatements atomic.Int64

	mu       sync.Mutex
	prepared bool
	wst, rst []*sql.Stmt // prepared statements of w and r, indexed by query

	// Group commit: Update hands its function to the writer goroutine,
	// which runs queued functions in one transaction, each inside its own
	// savepoint, and commits once for all of them.
	//
	// writing is held by whoever runs a transaction on the write
	// connection: the writer goroutine, or an Update that found no call
	// waiting and the writer idle, which then runs its function on its own
	// goroutine instead of handing it over and waiting to be woken (two
	// goroutine switches fewer per write when the store is not busy).
	writing   sync.Mutex
	writes    *writeQueue
	closing   chan struct{}
	lock      *ownerLock // held while the store is open (nil in memory)
	writerEnd chan struct{}
	closeOnce sync.Once
	ckpt      *checkpointer // background checkpoints (nil in memory)
	sweep     sync.Mutex    // held by a retention sweep (RetentionLock)
	// readTimeout (a time.Duration) bounds the statements of a View whose
	// context has no earlier deadline; 0: no bound.
	readTimeout atomic.Int64
}

// maxBatch bounds how many Update calls share one transaction.
const maxBatch = 128

// writeReq is one Update call waiting for the writer.
type writeReq struct {
	ctx  context.Context
	fn   func(ctx context.Context, tx engine.Tx) error
	done chan error
	// rec is what fn's last run keeps for after the commit (prefetch.go).
	rec fnRecord
}

// panicError carries a panic of an Update function back to its caller.
type panicError struct{ v any }

func (p *panicError) Error() string { return fmt.Sprint("panic in Update: ", p.v) }

func newStore(w, r *sql.DB) *Store {
	s := &Store{w: w, r: r, writes: newWriteQueue(), closing: make(chan struct{}), writerEnd: make(chan struct{})}
	s.readTimeout.Store(int64(DefaultReadTimeout))
	go s.writer()
	return s
}

var _ engine.Store = (*Store)(nil)

// Open opens (creating if needed) the SQLite database file at dsn, a file
// path, and makes this process its only owner: while the store is open, an
// Open of the same file (by this or another process) fails at once with an
// error wrapping ErrInUse that names the owner's pid. MemoryDSN opens a
// private in-memory database, for tests only. Open does not create the
// schema: call Migrate before using the store.
func Open(ctx context.Context, dsn string, opts ...Option) (*Store, error) {
	o := options{sync: SyncNormal}
	for _, opt := range opts {
		opt(&o)
	}
	if !o.sync.valid() {
		return nil, fmt.Errorf("sqlite: synchronous %q: want normal or full", o.sync)
	}
	if dsn == "" {
		return nil, errors.New("sqlite: empty database path")
	}
	if strings.ContainsRune(dsn, '?') {
		return nil, fmt.Errorf("sqlite: %q: the dsn is a file path and may not carry parameters", dsn)
	}
	if dsn == MemoryDSN {
		// One connection, one database: a second connection to ":memory:"
		// would open another, empty, database.
		db, err := sql.Open("sqlite", dsn+"?_txlock=immediate&_foreign_keys=0")
		if err != nil {
			return nil, fmt.Errorf("sqlite: open %s: %w", dsn, err)
		}
		db.SetMaxOpenConns(1)
		db.SetMaxIdleConns(1)
		db.SetConnMaxLifetime(0)
		db.SetConnMaxIdleTime(0)
		if err := db.PingContext(ctx); err != nil {
			db.Close()
			return nil, fmt.Errorf("sqlite: open %s: %w", dsn, err)
		}
		return newStore(db, db), nil
	}

	// One process owns the file: a second one would release the first
	// one's leases and run its work again. The lock comes before anything
	// touches the database.
	lock, err := lockOwner(dsn)
	if err != nil {
		return nil, err
	}
	s, err := openFile(ctx, dsn, o)
	if err != nil {
		lock.release()
		return nil, err
	}
	s.lock = lock
	return s, nil
}

// openFile opens the database file at dsn: one write connection in WAL
// mode and a pool of read-only connections.
func openFile(ctx context.Context, dsn string, o options) (*Store, error) {
	// Every connection gets the synchronous level: the writer's commits
	// follow it, and so do the checkpoints of the checkpointer's.
	sync := "&_synchronous=" + strings.ToUpper(string(o.sync))
	// The writer opens the file first and switches it to WAL, which is a
	// property of the file that the readers then share.
	w, err := sql.Open("sqlite", dsn+"?_busy_timeout=10000&_journal_mode=WAL&_foreign_keys=0&_txlock=immediate"+sync+
		fmt.Sprintf("&_pragma=wal_autocheckpoint(%d)", walSafetyPages))
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", dsn, err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	if err := checkWAL(ctx, w); err != nil {
		w.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", dsn, err)
	}
	r, err := sql.Open("sqlite", dsn+"?_busy_timeout=10000&_query_only=1"+sync)
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", dsn, err)
	}
	n := max(4, runtime.GOMAXPROCS(0))
	r.SetMaxOpenConns(n)
	r.SetMaxIdleConns(n)
	if err := r.PingContext(ctx); err != nil {
		w.Close()
		r.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", dsn, err)
	}
	c, err := sql.Open("sqlite", dsn+"?_busy_timeout=10000"+sync)
	if err == nil {
		c.SetMaxOpenConns(1)
		c.SetMaxIdleConns(1)
		c.SetConnMaxLifetime(0)
		c.SetConnMaxIdleTime(0)
		if err = c.PingContext(ctx); err != nil {
			c.Close()
		}
	}
	if err != nil {
		w.Close()
		r.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", dsn, err)
	}
	s := newStore(w, r)
	s.ckpt = newCheckpointer(c)
	return s, nil
}

func checkWAL(ctx context.Context, db *sql.DB) error {
	var mode string
	if err := db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return err
	}
	if !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("journal_mode is %q, not WAL", mode)
	}
	return nil
}

// Ping reports whether the database answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.w.PingContext(ctx); err != nil {
		return fmt.Errorf("sqlite: ping: %w", err)
	}
	if err := s.r.PingContext(ctx); err != nil {
		return fmt.Errorf("sqlite: ping: %w", err)
	}
	return nil
}

// Close closes the database. Transactions in progress fail.
func (s *Store) Close() error {
	var err error
	s.closeOnce.Do(func() {
		close(s.closing)
		<-s.writerEnd
		err = s.ckpt.close()
	})
	s.mu.Lock()
	for _, st := range append(s.wst, s.rst...) {
		if st != nil {
			st.Close()
		}
	}
	s.wst, s.rst, s.prepared = nil, nil, false
	s.mu.Unlock()
	if werr := s.w.Close(); err == nil {
		err = werr
	}
	if s.r != s.w {
		if rerr := s.r.Close(); err == nil {
			err = rerr
		}
	}
	s.lock.release()
	return err
}

// prepare prepares every statement on both pools, once. It must run outside
// any transaction: preparing needs a free connection, and the write pool has
// only one. It fails while the schema is missing.
func (s *Store) prepare(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.prepared {
		return nil
	}
	wst := make([]*sql.Stmt, len(queries))
	rst := wst
	if s.r != s.w {
		rst = make([]*sql.Stmt, len(queries))
	}
	closeAll := func() {
		for i := range queries {
			if wst[i] != nil {
				wst[i].Close()
			}
			if s.r != s.w && rst[i] != nil {
				rst[i].Close()
			}
		}
	}
	for i, q := range queries {
		st, err := s.w.PrepareContext(ctx, q)
		if err != nil {
			closeAll()
			return fmt.Errorf("sqlite: preparing statements (was the store migrated?): %w", err)
		}
		wst[i] = st
		if s.r != s.w {
			if rst[i], err = s.r.PrepareContext(ctx, q); err != nil {
				closeAll()
				return fmt.Errorf("sqlite: preparing statements (was the store migrated?): %w", err)
			}
		}
	}
	s.wst, s.rst, s.prepared = wst, rst, true
	return nil
}

// statements returns the prepared statements of w and r.
func (s *Store) statements(ctx context.Context) (wst, rst []*sql.Stmt, err error) {
	s.mu.Lock()
	ok := s.prepared
	wst, rst = s.wst, s.rst
	s.mu.Unlock()
	if ok {
		return wst, rst, nil
	}
	if err := s.prepare(ctx); err != nil {
		return nil, nil, err
	}
	return s.statements(ctx)
}

// Update runs fn in a read-write (IMMEDIATE) transaction and commits it when
// fn returns nil. Concurrent calls are committed together (group commit):
// each fn runs inside its own savepoint of a shared transaction, so an fn
// that fails rolls back alone, and one commit makes all the others durable.
// A call that finds the writer idle and no call waiting runs on its
// caller's goroutine. Update returns only after the commit, and after the
// reads fn asked for that its writes answer (engine.CallPrefetcher,
// prefetch.go) were handed over. A panic in fn rolls its savepoint back
// and propagates to the caller.
func (s *Store) Update(ctx context.Context, fn func(ctx context.Context, tx engine.Tx) error) error {
	if _, _, err := s.statements(ctx); err != nil {
		return classify(ctx, err)
	}
	if err := ctx.Err(); err != nil {
		return classify(ctx, err)
	}
	req := &writeReq{ctx: ctx, fn: fn, done: make(chan error, 1)}
	if s.writes.empty() && s.writing.TryLock() {
		// The writer is idle and nothing waits: run the function here.
		// The writer closes the queue holding writing, so a call that
		// gets here after Close is refused.
		if s.writes.isClosed() {
			s.writing.Unlock()
			return errClosed
		}
		s.commitBatch([]*writeReq{req})
		s.writing.Unlock()
	} else if err := s.writes.push(req); err != nil {
		return err
	}
	err := <-req.done
	if p, ok := err.(*panicError); ok {
		panic(p.v)
	}
	return classify(ctx, err)
}

// writer runs the queued Update functions, in batches of the most urgent
// first, until Close. An Update that runs on its caller holds writing; the
// writer, woken by a call queued meanwhile, waits for it.
func (s *Store) writer() {
	defer close(s.writerEnd)
	for {
		select {
		case <-s.writes.wake:
		case <-s.closing:
			// After an Update running on its caller (Close waits for it).
			s.writing.Lock()
			for _, r := range s.writes.close() {
				r.done <- errClosed
			}
			s.writing.Unlock()
			return
		}
		s.writing.Lock()
		for {
			batch := s.writes.take(maxBatch)
			if batch == nil {
				break
			}
			s.commitBatch(batch)
		}
		s.writing.Unlock()
	}
}

// commitBatch runs a batch of Update functions in one transaction. It first
// runs them back to back and commits once; only when one of them fails does
// it roll back and run the batch again with a savepoint around each
// function, so that the failure undoes that function alone. Functions are
// safe to run again: they only act through the transaction.
func (s *Store) commitBatch(batch []*writeReq) {
	if len(batch) > 1 && s.runBatch(batch, false) {
		return
	}
	s.runBatch(batch, true)
}

// runBatch runs the batch in one transaction and reports whether it
// delivered the results. Without savepoints it gives up (rolls back,
// delivers nothing) at the first failing function. After the COMMIT, and
// before the results, the functions that committed are handed the reads
// they knew (deliverReads).
func (s *Store) runBatch(batch []*writeReq, savepoints bool) bool {
	results := make([]error, len(batch))
	finish := func() bool {
		for i, r := range batch {
			r.done <- results[i]
		}
		return true
	}
	failAll := func(err error) bool {
		for i := range results {
			if results[i] == nil {
				results[i] = err
			}
		}
		return finish()
	}
	s.mu.Lock()
	wst := s.wst
	s.mu.Unlock()
	sqlTx, err := s.w.BeginTx(context.Background(), nil)
	if err != nil {
		return failAll(fmt.Errorf("sqlite: begin: %w", err))
	}
	t := &txn{tx: sqlTx, st: wst, counter: &s.writerStatements}
	savepoints = savepoints && len(batch) > 1
	ok := 0
	for i, r := range batch {
		if err := r.ctx.Err(); err != nil {
			results[i] = err
			continue
		}
		if savepoints {
			if _, err := sqlTx.Exec("SAVEPOINT batch"); err != nil {
				sqlTx.Rollback()
				return failAll(fmt.Errorf("sqlite: savepoint: %w", err))
			}
		}
		r.rec.begin()
		t.rec = &r.rec
		results[i] = runFn(r, t)
		t.rec = nil
		if results[i] == nil {
			r.rec.settle()
			ok++
		}
		if !savepoints {
			if results[i] != nil && len(batch) > 1 {
				sqlTx.Rollback()
				return false
			}
			continue
		}
		if results[i] != nil {
			if _, err := sqlTx.Exec("ROLLBACK TO batch"); err != nil {
				sqlTx.Rollback()
				return failAll(fmt.Errorf("sqlite: rollback to savepoint: %w", err))
			}
		}
		if _, err := sqlTx.Exec("RELEASE batch"); err != nil {
			sqlTx.Rollback()
			return failAll(fmt.Errorf("sqlite: release savepoint: %w", err))
		}
	}
	if ok == 0 {
		sqlTx.Rollback()
		return finish()
	}
	if s.writes.empty() {
		readTail(context.Background(), t, batch, results)
	}
	if err := sqlTx.Commit(); err != nil {
		return failAll(fmt.Errorf("sqlite: commit: %w", err))
	}
	s.ckpt.poke()
	deliverReads(batch, results)
	return finish()
}

// WriterStatements returns how many statements the writer has run since
// the store was opened (BEGIN, COMMIT and savepoints not counted): tests
// count the statements of a workflow with it.
func (s *Store) WriterStatements() int64 { return s.writerStatements.Load() }

// runFn runs one Update function, turning a panic into a panicError, and
// then the checks of TaskTakeExpecting it left (txn.checkExpected).
//
// The function's statements run with a context that carries the caller's
// values but not its cancellation. For a cancellable context the driver
// starts a goroutine per statement to interrupt it on cancellation (W1 @64
// ran tens of thousands of them a second on the single writer); and
// interrupting a statement of a shared transaction would only fail the
// batch and run it again. The writer checks the caller's context before it
// runs the function; a statement, once started, finishes.
func runFn(r *writeReq, t *txn) (err error) {
	t.expectRun, t.expectExec = nil, nil
	defer func() {
		t.expectRun, t.expectExec = nil, nil
		if p := recover(); p != nil {
			err = &panicError{v: p}
		}
	}()
	ctx := context.WithoutCancel(r.ctx)
	err = r.fn(ctx, t)
	// The checks of TaskTakeExpecting that no update made: a failed one
	// is the function's error, as it would have been had the check been
	// made at once, even when the function failed after it (on a run or
	// an execution it read as they no longer are).
	if cerr := t.checkExpected(ctx); cerr != nil && (err == nil || errors.Is(cerr, engine.ErrUnexpected)) {
		return cerr
	}
	return err
}

// View runs fn in a read-only transaction on its own snapshot of the
// database, which concurrent writers do not change. Its statements run
// until ctx's deadline, and no longer than the store's read timeout
// (SetReadTimeout): when ctx ends, the driver interrupts the statement
// under way (sqlite3_interrupt), and the connection goes back to the pool.
func (s *Store) View(ctx context.Context, fn func(ctx context.Context, tx engine.ReadTx) error) error {
	_, rst, err := s.statements(ctx)
	if err != nil {
		return classify(ctx, err)
	}
	if d := time.Duration(s.readTimeout.Load()); d > 0 {
		if dl, ok := ctx.Deadline(); !ok || time.Until(dl) > d {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, d)
			defer cancel()
		}
	}
	sqlTx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return classify(ctx, fmt.Errorf("sqlite: begin: %w", err))
	}
	defer sqlTx.Rollback()
	return classify(ctx, fn(ctx, &txn{tx: sqlTx, st: rst}))
}

// DefaultReadTimeout bounds the statements of a View whose context has no
// earlier deadline.
const DefaultReadTimeout = 30 * time.Second

// SetReadTimeout sets how long the statements of a View whose context has
// no earlier deadline may run (DefaultReadTimeout until set); d <= 0: as
// long as they take.
func (s *Store) SetReadTimeout(d time.Duration) { s.readTimeout.Store(int64(max(d, 0))) }

// TaskClaim leases due tasks to params.Owner and returns them oldest due
// first. When more tasks are claimable than params.Limit (<= 0: no limit),
// tasks whose lease expired are taken before unleased ones.
func (s *Store) TaskClaim(ctx context.Context, p engine.TaskClaimParams) ([]*engine.Task, error) {
	wst, _, err := s.statements(ctx)
	if err != nil {
		return nil, err
	}
	if p.Owner == "" {
		return nil, errors.New("sqlite: TaskClaim: empty owner")
	}
	limit := int64(p.Limit)
	if limit <= 0 {
		limit = -1 // SQLite: no limit
	}
	now := rowfmt.ToMs(p.Now)
	rows, err := wst[qTaskClaim].QueryContext(ctx, p.Owner, now, p.LeaseDuration.Milliseconds(), rowfmt.ToMs(p.DueBefore), limit)
	if err != nil {
		return nil, classify(ctx, fmt.Errorf("sqlite: TaskClaim: %w", err))
	}
	tasks, err := scanTasks(rows)
	if err != nil {
		return nil, classify(ctx, fmt.Errorf("sqlite: TaskClaim: %w", err))
	}
	rowfmt.SortTasks(tasks)
	return tasks, nil
}

// TaskRenewLeases extends the leases owner holds on ids to
// max(DueAt, now) + duration, writing only the leases that move.
func (s *Store) TaskRenewLeases(ctx context.Context, owner string, ids []int64, now time.Time, duration time.Duration) (int64, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	wst, _, err := s.statements(ctx)
	if err != nil {
		return 0, err
	}
	list, _ := json.Marshal(ids)
	res, err := wst[qTaskRenew].ExecContext(ctx, rowfmt.ToMs(now), duration.Milliseconds(), owner, string(list))
	if err != nil {
		return 0, classify(ctx, fmt.Errorf("sqlite: TaskRenewLeases: %w", err))
	}
	return res.RowsAffected()
}

// TaskReleaseLeases clears every lease not held by keepOwner (all leases
// when keepOwner is ""). Like the expiry of a lease, releasing it advances
// the task's Attempt: the previous owner may have called the worker already.
func (s *Store) TaskReleaseLeases(ctx context.Context, keepOwner string) (int64, error) {
	wst, _, err := s.statements(ctx)
	if err != nil {
		return 0, err
	}
	res, err := wst[qTaskRelease].ExecContext(ctx, keepOwner)
	if err != nil {
		return 0, classify(ctx, fmt.Errorf("sqlite: TaskReleaseLeases: %w", err))
	}
	return res.RowsAffected()
}

// TaskRelease clears owner's leases on ids (all of owner's leases when ids
// is nil), advancing the attempt when bumpAttempt is set.
func (s *Store) TaskRelease(ctx context.Context, owner string, ids []int64, bumpAttempt bool) (int64, error) {
	if owner == "" {
		return 0, errors.New("sqlite: TaskRelease: empty owner")
	}
	if ids != nil && len(ids) == 0 {
		return 0, nil
	}
	wst, _, err := s.statements(ctx)
	if err != nil {
		return 0, err
	}
	var list any // NULL: every lease of owner
	if ids != nil {
		b, _ := json.Marshal(ids)
		list = string(b)
	}
	bump := 0
	if bumpAttempt {
		bump = 1
	}
	res, err := wst[qTaskReleaseOwned].ExecContext(ctx, owner, list, bump)
	if err != nil {
		return 0, classify(ctx, fmt.Errorf("sqlite: TaskRelease: %w", err))
	}
	return res.RowsAffected()
}

// text binds an opaque payload: nil is NULL, anything else TEXT (also when
// empty, so that nil and empty stay distinct).
func text(b []byte) any {
	if b == nil {
		return nil
	}
	return string(b)
}

// nullString binds "" as NULL.
func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}
