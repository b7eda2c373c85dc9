package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
)

// Engine runs workflows: it serves the API calls of package httpapi and
// drives state executions by calling the user's worker.
type Engine struct {
	store  Store
	cfg    Config
	worker WorkerClient
	log    zerolog.Logger
	disp   *dispatcher
	waits  *notifier
	// feed is the store's ChangeFeed, nil when it has none (SQLite).
	feed    ChangeFeed
	metrics *metrics
	// sweepChunk is the size of the next deletion transaction of a sweep
	// under Config.SweepHold (0: none timed yet).
	sweepChunk atomic.Int64
	// starting holds a token per start transaction in flight (startSlots).
	starting chan struct{}
	// searching holds a token per search in flight (Config.MaxSearches).
	searching chan struct{}
	// batchNudge wakes the batch runner (a batch started here).
	batchNudge chan struct{}
	// failureLogs rate-limits the warn lines of failed worker calls.
	failureLogs logLimiter
	// limiter keeps the permits of the limits in force; nil when the store
	// keeps none.
	limiter *limiter
	// limitsAtStart is what Start did with the flags' limits.
	limitsAtStart LimitsAtStart
	// stateMetrics is the last reading of iwf_state_executions.
	stateMetrics stateMetrics
	// payloadMetrics count the external store's operations (payloads.go).
	payloadMetrics *payloadMetrics
	// pauses caches the paused scopes (pause.go).
	pauses *pauses

	mu      sync.Mutex
	cancel  context.CancelFunc
	running sync.WaitGroup
	started bool
}

// New builds an engine on a store. Start begins processing.
func New(store Store, cfg Config) (*Engine, error) {
	if store == nil {
		return nil, errors.New("engine: store is required")
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if cfg.WorkerClient == nil {
		return nil, errors.New("engine: WorkerClient is required")
	}
	e := &Engine{
		store:     store,
		cfg:       cfg,
		worker:    cfg.WorkerClient,
		log:       cfg.Logger.With().Str("node", cfg.NodeID).Logger(),
		waits:     newNotifier(),
		metrics:   newMetrics(),
		starting:  make(chan struct{}, startSlots),
		searching: make(chan struct{}, cfg.MaxSearches),

		batchNudge: make(chan struct{}, 1),

		payloadMetrics: newPayloadMetrics(),
		pauses:         newPauses(),
	}
	e.feed, _ = store.(ChangeFeed)
	e.disp = newDispatcher(e)
	if e.limiter, err = newLimiter(e, cfg.Limits); err != nil {
		return nil, err
	}
	return e, nil
}

// startSlots is how many start transactions one process runs at once; more
// start calls wait for a slot. A start is one store write: beyond a few in
// flight they only lengthen the store's queue (SQLite's single writer,
// PostgreSQL's connections), and by Little's law the latency of every
// write behind them, including the commits of the workflows already under
// way. make bench W3 (10,000 starts from 64 callers while timers fire), one
// run each on the same 2-core machine: p99 timer lateness 539 ms without
// the limit, 105 ms with 8 slots (SQLite); start throughput 853 and 777/s;
// W1 @64 unchanged.
const startSlots = 8

// Start begins background processing: the task pool, the in-memory timer
// schedule, and the poller that claims due work and renews leases.
func (e *Engine) Start(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.started {
		return errors.New("engine: already started")
	}
	if e.cfg.ReleaseLeasesOnStart {
		n, err := e.store.TaskReleaseLeases(ctx, e.cfg.NodeID)
		if err != nil {
			return err
		}
		if n > 0 {
			e.log.Info().Int64("tasks", n).Msg("released leases of a previous process")
		}
		err = e.storeUpdate(ctx, func(ctx context.Context, tx Tx) error {
			n, err = tx.BatchRelease(ctx, "", "")
			return err
		})
		if err != nil {
			return err
		}
		if n > 0 {
			e.log.Info().Int64("batches", n).Msg("released batch leases of a previous process")
		}
		if e.limiter != nil {
			if _, err := e.limiter.ps.PermitReleaseOthers(ctx, e.cfg.NodeID); err != nil {
				return err
			}
		}
	}
	// The limits in force before the first claim: the flags fill the keys
	// the store's limit table never held, and the table decides.
	if e.limiter != nil {
		at, err := e.limiter.seedAndLoad(ctx)
		if err != nil {
			return err
		}
		e.limitsAtStart = at
		if s := at.String(); s != "" {
			e.log.Info().Str("flags", s).Msg("the stored limits decide; flags only fill keys never stored")
		}
		if sum := at.InForce.Summary(); sum != "" {
			e.log.Info().Str("limits", sum).Msg("limits on worker calls in force")
		}
	}
	// The paused scopes before the first claim: a call of a paused
	// scope is then held from the start. A node that cannot read them
	// does not start (as when it cannot read its limits): claiming work
	// without them could call a worker that an operator has paused.
	if err := e.reloadPauses(ctx); err != nil {
		return fmt.Errorf("reading the paused scopes: %w", err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	e.cancel = cancel
	e.started = true
	e.goRun(func() { e.pauseLoop(runCtx) })
	e.goRun(func() { e.disp.run(runCtx) })
	e.goRun(func() { e.disp.poll(runCtx) })
	if e.limiter != nil {
		e.goRun(func() { e.limiter.renewLoop(runCtx) })
		if e.feed != nil {
			// Other nodes change the limits too.
			e.goRun(func() { e.limiter.refreshLoop(runCtx) })
		}
	}
	if e.feed != nil {
		e.goRun(func() { e.feed.ListenChanges(runCtx, e.changedElsewhere) })
	}
	for i := 0; i < e.cfg.Concurrency; i++ {
		e.goRun(func() { e.disp.worker(runCtx) })
	}
	if e.cfg.retentionOn() {
		e.goRun(func() { e.sweeper(runCtx) })
	}
	if e.payloadsOn() {
		e.goRun(func() { e.payloadSweeper(runCtx) })
	}
	e.goRun(func() { e.batchRunner(runCtx) })
	return nil
}

func (e *Engine) goRun(f func()) {
	e.running.Add(1)
	go func() {
		defer e.running.Done()
		f()
	}()
}

// Close hands the node's work back and stops. It stops claiming work,
// hands back at once the leases of the tasks it holds but has not started,
// and lets the tasks running (worker calls in flight) finish until ctx ends
// — the shutdown grace. Tasks those create are handed back as they appear.
// When ctx ends first, the calls still running are cancelled and their
// tasks handed back too, with the attempt counted as made (the worker may
// have received it). Another node claims handed-back tasks at its next
// poll, without waiting for a lease to expire; a SQLite store's next
// process takes them at start. Close returns ctx's error when the grace
// ran out.
func (e *Engine) Close(ctx context.Context) error {
	e.mu.Lock()
	if !e.started {
		e.mu.Unlock()
		return nil
	}
	e.started = false
	e.mu.Unlock()

	release := func(ids []int64, bump bool) {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		n, err := e.store.TaskRelease(rctx, e.cfg.NodeID, ids, bump)
		if err != nil {
			e.log.Warn().Err(err).Int("tasks", len(ids)).Msg("handing back leases failed; they expire instead")
			return
		}
		if n > 0 {
			e.log.Debug().Int64("tasks", n).Bool("attemptCounted", bump).Msg("handed back leases")
		}
	}
	waiting := e.disp.drain(func(ids []int64) { release(ids, false) })
	if e.limiter != nil {
		e.limiter.forget(waiting)
	}
	if len(waiting) > 0 {
		release(waiting, false)
	}
	graceErr := e.disp.waitRunning(ctx)
	var cancelled []int64
	if graceErr != nil {
		cancelled = e.disp.runningIDs()
		e.log.Warn().Int("tasks", len(cancelled)).Msg("shutdown grace over: cancelling the worker calls still running")
	}
	e.cancel()
	e.disp.stop()
	done := make(chan struct{})
	go func() {
		e.running.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		e.log.Warn().Msg("tasks did not stop within 10s of cancellation")
	}
	if len(cancelled) > 0 {
		release(cancelled, true)
	}
	release(nil, false) // anything else still leased to this node
	if e.limiter != nil {
		e.limiter.releaseAll(context.WithoutCancel(ctx))
	}
	if e.feed != nil {
		e.feed.PublishChanges(Changes{Tasks: true}) // the other nodes claim the handed-back work now
	}
	return graceErr
}

// changedElsewhere applies what another process announced: long polls on
// the changed runs re-check, and claimable work is claimed at once.
func (e *Engine) changedElsewhere(c Changes) {
	switch {
	case c.Missed:
		e.metrics.notices.inc("missed")
	case c.Tasks:
		e.metrics.notices.inc("tasks")
	default:
		e.metrics.notices.inc("runs")
	}
	if c.Missed {
		if e.limiter != nil {
			e.limiter.refreshSoon()
			for _, k := range e.limiter.allKeys() {
				e.limiter.woke(k)
			}
		}
		e.pauseHeard(pauseHintScopes)
		e.waits.notifyAll()
		e.disp.claimSoon()
		return
	}
	for _, k := range c.Keys {
		if e.limiter != nil && k == limitSettingsHint {
			e.limiter.refreshSoon()
			continue
		}
		if e.limiter != nil && strings.HasPrefix(k, limitHintPrefix) {
			e.limiter.woke(strings.TrimPrefix(k, limitHintPrefix))
			continue
		}
		if k == pauseHintRun || k == pauseHintScopes {
			e.pauseHeard(k)
			continue
		}
		e.waits.notify(k)
	}
	if c.Tasks {
		e.disp.claimSoon()
	}
}

// Healthy reports whether the store answers.
func (e *Engine) Healthy(ctx context.Context) error {
	err := e.store.Ping(ctx)
	if err != nil && ctx.Err() == nil {
		e.metrics.storeUnavailable.inc()
	}
	return err
}

// SchemaVersion returns the highest migration applied to the store
// (Store.SchemaVersion); GET /info/version reports it.
func (e *Engine) SchemaVersion(ctx context.Context) (int, error) {
	return e.store.SchemaVersion(ctx)
}

// horizon is how far ahead the poller claims tasks, so that timers found by
// the poller still fire on time from the in-memory schedule.
func (e *Engine) horizon() time.Duration {
	return 2 * e.cfg.PollInterval
}

// localHorizon is how far ahead a task this process creates is leased to it
// at creation (and kept in memory) instead of being left to the poller.
func (e *Engine) localHorizon() time.Duration {
	return e.cfg.LeaseDuration / 2
}

// notifier wakes long polls (getWithWait, waitForStateCompletion) of this
// process when a run changes. Changes made by other processes arrive
// through the store's ChangeFeed when it has one; the waiters' periodic
// re-check is the safety net.
//
// A commit of this process that closes a run hands the run, as committed,
// to the waiters it wakes (waiter.closed): a getWithWait that waited for
// that run answers from it without reading the store again. Such a
// waiter waits for closes only (subscribeCloses): the other commits of
// this process, which leave the run open, do not wake it. A change told by
// the change feed, whose kind is not known, wakes every waiter of its key.
//
// The notifier also keeps what this process's own commits say of the open
// run of a workflow (knownOpen), so that a getWithWait that follows a start
// or an answer of this process can wait without reading the run first.
type notifier struct {
	mu      sync.Mutex
	waiters map[string]map[*waiter]struct{}
	// marks holds, by workflow key, the open run that this process's
	// latest commit of the workflow left, and the transactions of the
	// workflow under way (openMark). At most maxOpenMarks.
	marks map[string]*openMark
}

// openMark is what this process knows of a workflow's open run.
//
// A transaction that saves a run of the workflow counts itself in pending
// before its commit (notifier.pend) and settles after it (settle, or
// abandon when it failed). When the last one settles, the mark holds the
// run its commit left open, or goes when that commit closed it. A
// transaction that settles while another is pending cannot know which of
// the two committed last (the goroutines that commit run on after their
// commits in any order), so the mark becomes stale and goes when the last
// pending one settles: the next getWithWait reads the run. A change told by
// the change feed (another process's commit) does the same.
//
// So a mark that is not stale names a run that was open at the latest
// commit by this process that settled, with no change by another process
// told since. A getWithWait subscribes before it looks at the mark, and a
// transaction settles before it wakes the waiters: a transaction pending
// at the look, and any close committed after it, wakes the long poll when
// it closes the run, by this process (notifyCommit) or through the feed,
// as a close after a read would. So the mark answers while a transaction
// of the workflow is pending too: under load, the answer to a workflow's
// first state is often on its way when the client's getWithWait, sent
// after the start, arrives (W1b @50 on PostgreSQL: half the long polls
// read the run when the mark answered only with nothing pending).
type openMark struct {
	runID   string // the open run; "" once stale
	pending int    // transactions of the workflow between pend and settle
	stale   bool
}

// maxOpenMarks bounds the marks kept: a process that holds more workflows
// in flight marks only some of them, and long polls of the others read the
// run first, as they did before marks existed.
const maxOpenMarks = 1 << 16

// waiter is one subscription of a notifier.
type waiter struct {
	// C is signalled at the next change of the key.
	C chan struct{}
	// closesOnly: this process's commits wake the waiter only when they
	// close a run of the key.
	closesOnly bool
	// closed is the run a commit of this process closed with the latest
	// change it signalled, nil when that change closed none (or came from
	// another process); guarded by the notifier's mu, read with take.
	closed *Run
}

func newNotifier() *notifier {
	return &notifier{waiters: map[string]map[*waiter]struct{}{}, marks: map[string]*openMark{}}
}

// pend counts a transaction that saves runs of the workflow keys as
// pending, before its commit, and returns the keys it counted it for
// (those marked already, or while there is room): the caller settles or
// abandons each of them exactly once.
func (n *notifier) pend(keys []string) []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	counted := keys[:0:0]
	for _, k := range keys {
		m := n.marks[k]
		if m == nil {
			if len(n.marks) >= maxOpenMarks {
				continue
			}
			m = &openMark{}
			n.marks[k] = m
		}
		m.pending++
		counted = append(counted, k)
	}
	return counted
}

// settle ends a pending transaction of key that committed, leaving open
// the run openRunID ("" when it left none open).
func (n *notifier) settle(key, openRunID string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	m := n.marks[key]
	if m == nil {
		return
	}
	m.pending--
	if m.pending > 0 || m.stale || openRunID == "" {
		n.forgetLocked(key, m)
		return
	}
	m.runID = openRunID
}

// abandon ends pending transactions of keys that failed. A failed commit
// may still have committed (the connection was lost on the way), so what
// the marks held is not known any more.
func (n *notifier) abandon(keys []string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, k := range keys {
		if m := n.marks[k]; m != nil {
			m.pending--
			n.forgetLocked(k, m)
		}
	}
}

// forgetLocked makes m, the mark of key, unknown: it goes, or, while
// transactions of key are pending, becomes stale.
func (n *notifier) forgetLocked(key string, m *openMark) {
	if m.pending > 0 {
		m.stale, m.runID = true, ""
		return
	}
	delete(n.marks, key)
}

// knownOpen returns the run of the workflow key that this process's
// commits know open (openMark), or "" when they do not know.
func (n *notifier) knownOpen(key string) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if m := n.marks[key]; m != nil && !m.stale {
		return m.runID
	}
	return ""
}

// subscribe returns a waiter signalled at the next change of key (a run
// id or a workflowKey), and a function to unsubscribe.
func (n *notifier) subscribe(key string) (*waiter, func()) {
	return n.add(key, &waiter{C: make(chan struct{}, 1)})
}

// subscribeCloses is subscribe for a waiter that waits for a run of key
// to close: a commit of this process wakes it only when it closes one.
func (n *notifier) subscribeCloses(key string) (*waiter, func()) {
	return n.add(key, &waiter{C: make(chan struct{}, 1), closesOnly: true})
}

func (n *notifier) add(key string, w *waiter) (*waiter, func()) {
	n.mu.Lock()
	m := n.waiters[key]
	if m == nil {
		m = map[*waiter]struct{}{}
		n.waiters[key] = m
	}
	m[w] = struct{}{}
	n.mu.Unlock()
	return w, func() {
		n.mu.Lock()
		delete(n.waiters[key], w)
		if len(n.waiters[key]) == 0 {
			delete(n.waiters, key)
		}
		n.mu.Unlock()
	}
}

// take returns the closed run handed to w with its latest signal, if any,
// and forgets it.
func (n *notifier) take(w *waiter) *Run {
	n.mu.Lock()
	defer n.mu.Unlock()
	r := w.closed
	w.closed = nil
	return r
}

// count is the number of waiters.
func (n *notifier) count() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	c := 0
	for _, m := range n.waiters {
		c += len(m)
	}
	return c
}

// notifyAll wakes every waiter and forgets every open mark. It hands over
// no run: a waiter woken so reads what changed.
func (n *notifier) notifyAll() {
	n.mu.Lock()
	for k, m := range n.marks {
		n.forgetLocked(k, m)
	}
	for _, m := range n.waiters {
		for w := range m {
			w.closed = nil
			signal(w.C)
		}
	}
	n.mu.Unlock()
}

// notify wakes the waiters of key for a change made elsewhere (the change
// feed): what changed is not known, so it hands over no run, and forgets
// the open mark of key.
func (n *notifier) notify(key string) {
	n.mu.Lock()
	if m := n.marks[key]; m != nil {
		n.forgetLocked(key, m)
	}
	for w := range n.waiters[key] {
		w.closed = nil
		signal(w.C)
	}
	n.mu.Unlock()
}

// notifyCommit wakes the waiters of key for a commit of this process.
// closed, when not nil, is a run of key that the commit closed, as
// committed: the waiters may answer from it. When it is nil, the waiters
// for closes only stay asleep.
func (n *notifier) notifyCommit(key string, closed *Run) {
	n.mu.Lock()
	for w := range n.waiters[key] {
		if closed == nil && w.closesOnly {
			continue
		}
		w.closed = closed
		signal(w.C)
	}
	n.mu.Unlock()
}

// signal sends on a channel of one slot unless a signal already waits.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// WaitIdle waits until this process has nothing to do at the clock's
// current time: no task is running or waiting for a goroutine, no task in
// memory is due, and the store holds no due task that nobody has leased
// (WaitIdle claims such tasks itself rather than waiting for the poller).
// Everything the engine does next then waits for time to pass or for an
// input. It is meant for tests (iwftest's Advance and WaitIdle are built on
// it); it returns ctx's error when ctx ends first.
func (e *Engine) WaitIdle(ctx context.Context) error {
	for {
		busy, due, changed := e.disp.state(e.cfg.Clock.Now())
		if due {
			e.disp.nudge() // its scheduling loop may be asleep on a stale reading
		}
		if !busy && !due {
			if e.disp.claim(ctx) == 0 {
				return ctx.Err()
			}
			continue
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
