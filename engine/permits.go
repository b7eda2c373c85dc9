package engine

// Concurrency and rate limits on worker calls (docs/operations.md,
// "Concurrency and rate limits"; docs/architecture.md).
//
// A waitUntil or execute call whose run matches a configured limit takes a
// permit of each such limit before the call, in a fixed order: its workflow
// type's concurrency, its worker host's concurrency, then a token of its
// worker host's rate. The permits are rows of the store (PermitStore), so
// that the limits hold across the nodes that share a PostgreSQL database;
// each row is leased to the node that holds it, renewed with the task
// leases, and expires when that node dies. A call that cannot take a
// permit waits in the store's queue of that limit (FIFO by the time the
// call began to wait) and, in this process, parks: it leaves its goroutine
// and holds no connection until it is woken — by a permit released here,
// by another node's announcement of a release (ChangeFeed), by the time a
// rate limit's next token is due, or by a bounded back-off re-check, the
// safety net for lost announcements and for the permits of a dead node.
//
// The limits in force are those of the store's limit table (limitset.go):
// set, changed and removed at run time, on every node within seconds. A
// limit of 0 pauses the calls it applies to: they wait in its queue, as
// for any limit, until it is raised or removed. With no limit in force
// the hot path does nothing more than look at an empty set
// (TestStatementCounts).

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Limits are the concurrency and rate limits on worker calls. Keys of the
// worker maps are HOST:PORT as the worker URL names them (lower case, the
// scheme's port when the URL has none). A value of 0 (possible in the
// limits in force, set at run time; the server's flags are positive)
// pauses the calls the limit applies to.
type Limits struct {
	// WorkerConcurrency bounds the waitUntil and execute calls in flight
	// to one worker host, across all nodes.
	WorkerConcurrency map[string]int
	// WorkerRate bounds the waitUntil and execute calls started per second
	// to one worker host, across all nodes (a token bucket of burst
	// PermitBurst).
	WorkerRate map[string]float64
	// TypeConcurrency bounds the state executions of one workflow type in
	// waitUntil or execute (calls in flight), across all nodes.
	TypeConcurrency map[string]int
}

// Empty reports whether no limit is set.
func (l Limits) Empty() bool {
	return len(l.WorkerConcurrency) == 0 && len(l.WorkerRate) == 0 && len(l.TypeConcurrency) == 0
}

// Validate checks every limit: hosts as HOST:PORT, positive values.
func (l Limits) Validate() error {
	for h, n := range l.WorkerConcurrency {
		if err := checkHostPort(h); err != nil {
			return fmt.Errorf("worker-concurrency %s=%d: %w", h, n, err)
		}
		if n <= 0 {
			return fmt.Errorf("worker-concurrency %s=%d: want a positive number of calls", h, n)
		}
	}
	for h, r := range l.WorkerRate {
		if err := checkHostPort(h); err != nil {
			return fmt.Errorf("worker-rate %s=%g: %w", h, r, err)
		}
		if !(r > 0) || math.IsInf(r, 0) {
			return fmt.Errorf("worker-rate %s=%g: want a positive number of calls per second", h, r)
		}
	}
	for typ, n := range l.TypeConcurrency {
		if typ == "" {
			return errors.New("type-concurrency: empty workflow type")
		}
		if n <= 0 {
			return fmt.Errorf("type-concurrency %s=%d: want a positive number of state executions", typ, n)
		}
	}
	return nil
}

// Summary lists the limits one per line, sorted, as the server prints
// them at start-up; "" when there are none.
func (l Limits) Summary() string {
	var lines []string
	for h, n := range l.WorkerConcurrency {
		lines = append(lines, fmt.Sprintf("worker %s: %s", h, pausedOr(n == 0, fmt.Sprintf("at most %d calls in flight", n))))
	}
	for h, r := range l.WorkerRate {
		lines = append(lines, fmt.Sprintf("worker %s: %s", h, pausedOr(r == 0, fmt.Sprintf("at most %s calls per second", strconv.FormatFloat(r, 'g', -1, 64)))))
	}
	for typ, n := range l.TypeConcurrency {
		lines = append(lines, fmt.Sprintf("workflow type %s: %s", typ, pausedOr(n == 0, fmt.Sprintf("at most %d state executions in waitUntil/execute", n))))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// pausedOr is what Summary says of a limit: paused when its value is 0.
func pausedOr(paused bool, text string) string {
	if paused {
		return "paused (limit 0: no waitUntil/execute calls until it is raised or removed)"
	}
	return text
}

// checkHostPort accepts HOST:PORT with a port number.
func checkHostPort(hp string) error {
	host, port, err := net.SplitHostPort(hp)
	if err != nil || host == "" {
		return errors.New("want HOST:PORT")
	}
	if p, err := strconv.Atoi(port); err != nil || p <= 0 || p > 65535 {
		return errors.New("want HOST:PORT with a port number")
	}
	return nil
}

// NormalizeHostPort returns the form limits are keyed by: lower case.
func NormalizeHostPort(hp string) string { return strings.ToLower(hp) }

// workerHostPort returns HOST:PORT of a worker URL, with the scheme's
// port when it names none; "" when it cannot be parsed.
func workerHostPort(workerURL string) string {
	u, err := url.Parse(workerURL)
	if err != nil || u.Host == "" {
		return ""
	}
	port := u.Port()
	if port == "" {
		port = "80"
		if strings.EqualFold(u.Scheme, "https") {
			port = "443"
		}
	}
	return strings.ToLower(net.JoinHostPort(u.Hostname(), port))
}

// PermitBurst is the burst of a rate limit's token bucket: one call, so
// that calls are spread evenly (a window of a second sees at most R+1).
const PermitBurst = 1

// PermitStore is implemented by a store that keeps the permits of
// concurrency and rate limits (both stores do). Each permit row names a
// limit key and a waiter (the task id of the call), the owner (node) that
// holds or awaits it, when the waiter began to wait, and a lease expiry;
// a row whose lease expired is deleted by the next acquisition of its key.
type PermitStore interface {
	// PermitAcquire tries to take a permit of r.Key for r.Waiter (see
	// PermitRequest.Decide for the rule, applied under a lock of the key):
	// it records the waiter in the key's queue when absent (keeping its
	// first WaitingSince; a live row of the waiter owned by another owner
	// is left alone and the answer is not granted), grants it when the rule allows — a concurrency
	// permit then stays held until released, a rate token is consumed and
	// the waiter leaves the queue — and otherwise leaves it waiting.
	PermitAcquire(ctx context.Context, r PermitRequest) (PermitGrant, error)
	// PermitRenew extends to now+duration the leases of owner's rows of
	// the waiters listed whose lease has not expired, and returns the
	// waiters whose held permits it renewed, once per permit.
	PermitRenew(ctx context.Context, owner string, waiters []int64, now time.Time, duration time.Duration) ([]int64, error)
	// PermitRelease deletes owner's rows of the waiters listed (all of
	// owner's rows when waiters is nil), held or waiting, and returns the
	// keys they were of, sorted, without duplicates.
	PermitRelease(ctx context.Context, owner string, waiters []int64) ([]string, error)
	// PermitReleaseOthers deletes every row not owned by keepOwner: a
	// single-process store (SQLite) calls it at start-up.
	PermitReleaseOthers(ctx context.Context, keepOwner string) (int64, error)
	// PermitWaiting returns, for each waiter listed that waits (not holds)
	// in some key's queue, that key and since when, with its place in
	// the queue.
	PermitWaiting(ctx context.Context, waiters []int64) (map[int64]PermitWait, error)
}

// PermitRequest asks for one permit of one limit.
type PermitRequest struct {
	Key    string
	Waiter int64
	Owner  string
	// WaitingSince orders the queue (FIFO); a waiter already queued keeps
	// its first one.
	WaitingSince  time.Time
	Now           time.Time
	LeaseDuration time.Duration
	// Concurrency > 0 makes Key a concurrency limit of that many held
	// permits; otherwise Rate > 0 makes it a token bucket of Rate tokens
	// per second and burst Burst.
	Concurrency int
	Rate        float64
	Burst       float64
	// Paused: the limit is 0. The waiter is queued as for any limit and
	// never granted; a rate limit's bucket is left as it is.
	Paused bool
}

// PermitGrant is PermitAcquire's answer.
type PermitGrant struct {
	Granted bool
	// Free is, when granted, how many more permits of a concurrency
	// limit are free (the next waiter may be served at once).
	Free int
	// RetryAfter is, for a rate limit not granted, when the waiter's token
	// is due if the waiters ahead take theirs.
	RetryAfter time.Duration
	// Ahead is the number of waiters ahead in the queue.
	Ahead int
}

// PermitWait is a waiter's place in a queue (PermitWaiting).
type PermitWait struct {
	Key   string
	Since time.Time
}

// Decide is the rule of PermitAcquire, the one place it is written: every
// store reads what it needs under the key's lock and applies it
// (internal/store/storesql). held is the number of held permits of the key
// (its rows not expired), ahead the waiters queued before this one (by
// WaitingSince, then waiter id), and tokens and updated the bucket of a
// rate limit as stored. It returns the answer and the bucket to store.
//
// Times are whole milliseconds, as the store keeps them: a refill counts
// from the millisecond it was stored at, so that no part of a millisecond
// is counted twice, and RetryAfter is rounded up to a millisecond.
func (r PermitRequest) Decide(held, ahead int, tokens float64, updated time.Time) (PermitGrant, float64, time.Time) {
	if r.Paused {
		return PermitGrant{Ahead: ahead}, tokens, updated
	}
	if r.Concurrency > 0 {
		if held+ahead < r.Concurrency {
			return PermitGrant{Granted: true, Free: r.Concurrency - held - ahead - 1, Ahead: ahead}, tokens, updated
		}
		return PermitGrant{Ahead: ahead}, tokens, updated
	}
	burst := r.Burst
	if burst < 1 {
		burst = 1
	}
	now := time.UnixMilli(r.Now.UnixMilli()).UTC()
	if el := now.Sub(updated).Milliseconds(); el > 0 {
		tokens = math.Min(burst, tokens+float64(el)/1000*r.Rate)
		updated = now
	}
	if float64(ahead) < math.Floor(tokens+1e-9) {
		return PermitGrant{Granted: true, Ahead: ahead}, tokens - 1, updated
	}
	need := float64(ahead+1) - tokens
	return PermitGrant{Ahead: ahead, RetryAfter: time.Duration(math.Ceil(need/r.Rate*1000)) * time.Millisecond}, tokens, updated
}

// errLimitWait reports that a task parked to wait for a limit; the
// dispatcher keeps it, leased, until the limiter resumes it.
var errLimitWait = errors.New("waiting for a concurrency or rate limit")

// permitKey is one limit a call is subject to.
type permitKey struct {
	key         string
	concurrency int
	rate        float64
	paused      bool // the limit is 0
}

// Limit keys, as the store and the metrics' limit label name them.
func typeLimitKey(t string) string    { return "type:" + t }
func workerLimitKey(hp string) string { return "worker:" + hp }
func rateLimitKey(hp string) string   { return "rate:" + hp }

// limitHintPrefix marks a ChangeFeed key that announces a released
// permit of a limit.
const limitHintPrefix = "limit:"

// limiter takes, holds and releases the permits of this process's calls,
// and parks the calls that wait.
type limiter struct {
	e  *Engine
	ps PermitStore
	// seed is the server's flags: the limits a start stores for the keys
	// the store has no row of (limitset.go).
	seed Limits
	// cur is the limits in force (normalised), as the store's limit table
	// last read held them (the flags until Start reads it); never nil.
	cur atomic.Pointer[Limits]
	// refreshNow asks refreshLoop to read the limit table at once.
	refreshNow chan struct{}
	// refreshMu serialises reads of the limit table and their application.
	refreshMu sync.Mutex
	// used: this process took or awaited a permit (it releases them all
	// when it stops).
	used atomic.Bool

	mu sync.Mutex
	// queues holds the parked tasks per key, oldest waiter first.
	queues map[string]*permitQueue
	// held is the permits each task of this process holds, by task id.
	held map[int64]*heldPermits
	// waitSince is when each task waiting here began to wait, per key.
	waitSince map[int64]map[string]time.Time
	// lastRenew is when the last renewal that succeeded began.
	lastRenew time.Time
	stats     map[string]*limitStats
}

type permitQueue struct {
	tasks   []*Task
	timer   Timer
	stop    chan struct{} // closed when timer is stopped
	timerAt time.Time
	backoff time.Duration
}

// stopTimerLocked stops the queue's re-check.
func (q *permitQueue) stopTimerLocked() {
	if q.timer != nil {
		q.timer.Stop()
		close(q.stop)
		q.timer, q.stop = nil, nil
	}
}

type heldPermits struct {
	keys   []string
	cancel context.CancelCauseFunc // the fence of the call, nil before it
	// fenced: the call was cancelled because its permits could not be
	// renewed. They are not released but left to expire with their
	// lease: the worker may still be running the request cut off, and a
	// permit given back at once would let another call in beside it.
	fenced bool
}

// limitStats are a limit's metrics.
type limitStats struct {
	held int
}

// permitRecheckMin and permitRecheckMax bound the back-off with which
// the oldest parked call of a key re-checks its queue without being woken.
const (
	permitRecheckMin = 100 * time.Millisecond
	permitRecheckMax = 2 * time.Second
)

// errPermitLost is the cause of a call cancelled by its fence: its permit
// lease could not be renewed.
var errPermitLost = errors.New("the call's concurrency permit could not be renewed; cancelled so that the limit holds")

// newLimiter returns the limiter of e, with the server's flags as the
// seed of the limit table; nil when the store keeps no permits (and no
// flag sets a limit: then it is an error).
func newLimiter(e *Engine, seed Limits) (*limiter, error) {
	if err := seed.Validate(); err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	ps, ok := e.store.(PermitStore)
	if !ok {
		if !seed.Empty() {
			return nil, errors.New("engine: limits are configured but the store keeps no permits")
		}
		return nil, nil
	}
	l := &limiter{e: e, ps: ps, seed: seed.normalized(), refreshNow: make(chan struct{}, 1), queues: map[string]*permitQueue{},
		held: map[int64]*heldPermits{}, waitSince: map[int64]map[string]time.Time{}, stats: map[string]*limitStats{},
		lastRenew: e.cfg.Clock.Now()}
	// Until Start reads the store's limit table, the flags are the limits
	// (what the metrics show of a server opened but not started).
	l.cur.Store(&l.seed)
	return l, nil
}

// normalized is l with its worker hosts in the form limits are keyed by,
// and no nil map.
func (l Limits) normalized() Limits {
	n := Limits{WorkerConcurrency: map[string]int{}, WorkerRate: map[string]float64{}, TypeConcurrency: map[string]int{}}
	for h, v := range l.WorkerConcurrency {
		n.WorkerConcurrency[NormalizeHostPort(h)] = v
	}
	for h, v := range l.WorkerRate {
		n.WorkerRate[NormalizeHostPort(h)] = v
	}
	for t, v := range l.TypeConcurrency {
		n.TypeConcurrency[t] = v
	}
	return n
}

// limits returns the limits in force.
func (l *limiter) limits() *Limits { return l.cur.Load() }

// active reports whether a limit is in force (nil-safe).
func (l *limiter) active() bool { return l != nil && !l.limits().Empty() }

// allKeys lists the keys of the limits in force, sorted.
func (l *limiter) allKeys() []string { return l.limits().keys() }

// keys lists the limit keys of l, sorted.
func (l *Limits) keys() []string {
	var keys []string
	for t := range l.TypeConcurrency {
		keys = append(keys, typeLimitKey(t))
	}
	for h := range l.WorkerConcurrency {
		keys = append(keys, workerLimitKey(h))
	}
	for h := range l.WorkerRate {
		keys = append(keys, rateLimitKey(h))
	}
	sort.Strings(keys)
	return keys
}

// keysFor lists the limits a call of a run is subject to, in the order
// they are taken.
func (l *limiter) keysFor(workflowType, workerURL string) []permitKey {
	cur := l.limits()
	var keys []permitKey
	if n, ok := cur.TypeConcurrency[workflowType]; ok {
		keys = append(keys, permitKey{key: typeLimitKey(workflowType), concurrency: n, paused: n == 0})
	}
	if len(cur.WorkerConcurrency) == 0 && len(cur.WorkerRate) == 0 {
		return keys
	}
	hp := workerHostPort(workerURL)
	if n, ok := cur.WorkerConcurrency[hp]; ok {
		keys = append(keys, permitKey{key: workerLimitKey(hp), concurrency: n, paused: n == 0})
	}
	if r, ok := cur.WorkerRate[hp]; ok {
		keys = append(keys, permitKey{key: rateLimitKey(hp), rate: r, paused: r == 0})
	}
	return keys
}

// applies reports whether a call of the run in s is subject to a limit.
func (l *limiter) applies(s *apiSnapshot) bool {
	return l != nil && len(l.keysFor(s.run.WorkflowType, s.rd.WorkerURL)) > 0
}

// acquire takes the permits a call of task t needs. It returns
// errLimitWait when t parked: the caller returns it to the dispatcher.
// Otherwise the call may go ahead: fence wraps its context (cancelled
// should a permit's lease be lost), and release gives the permits back
// (safe to call more than once).
func (l *limiter) acquire(ctx context.Context, t *Task, s *apiSnapshot) (fence func(context.Context) (context.Context, context.CancelFunc), release func(), err error) {
	keys := l.keysFor(s.run.WorkflowType, s.rd.WorkerURL)
	release = func() { l.release(t.ID) }
	if len(keys) == 0 {
		return nil, release, nil
	}
	l.used.Store(true)
	now := l.e.cfg.Clock.Now()
	for _, k := range keys {
		l.mu.Lock()
		hp := l.held[t.ID]
		already := hp != nil && contains(hp.keys, k.key)
		since, waited := l.waitSince[t.ID][k.key]
		if !waited {
			since = permitSince(now)
		}
		l.mu.Unlock()
		if already {
			continue
		}
		g, err := l.ps.PermitAcquire(ctx, PermitRequest{Key: k.key, Waiter: t.ID, Owner: l.e.cfg.NodeID, WaitingSince: since,
			Now: now, LeaseDuration: l.e.cfg.LeaseDuration, Concurrency: k.concurrency, Rate: k.rate, Burst: PermitBurst, Paused: k.paused})
		if err != nil {
			return nil, release, err
		}
		if !g.Granted {
			l.park(t, k.key, since, g.RetryAfter)
			return nil, release, errLimitWait
		}
		l.granted(t, k, since, now, g)
	}
	fence = func(ctx context.Context) (context.Context, context.CancelFunc) {
		c, cancel := context.WithCancelCause(ctx)
		l.mu.Lock()
		if hp := l.held[t.ID]; hp != nil {
			hp.cancel = cancel
		}
		l.mu.Unlock()
		return c, func() { cancel(context.Canceled) }
	}
	return fence, release, nil
}

// permitSince is the moment a call begins to wait, as the store keeps it:
// whole milliseconds, without the monotonic clock reading. The parked
// calls of a key are queued here in the store's FIFO order (that moment,
// then the task id); with a finer time here, calls that began to wait in
// one millisecond were queued in another order than the store's, and the
// call at the head of this process's queue could be refused (waiters
// ahead of it in the store) for ever while the waiters ahead, behind it
// here, were never woken.
func permitSince(now time.Time) time.Time { return now.Truncate(time.Millisecond) }

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// granted records a permit taken by t and wakes the next parked call of
// the key when more permits are free.
func (l *limiter) granted(t *Task, k permitKey, since, now time.Time, g PermitGrant) {
	l.e.metrics.limitWait.observe(now.Sub(since), k.key)
	l.mu.Lock()
	if m := l.waitSince[t.ID]; m != nil {
		delete(m, k.key)
		if len(m) == 0 {
			delete(l.waitSince, t.ID)
		}
	}
	if k.concurrency > 0 {
		hp := l.held[t.ID]
		if hp == nil {
			hp = &heldPermits{}
			l.held[t.ID] = hp
		}
		hp.keys = append(hp.keys, k.key)
		st := l.stats[k.key]
		if st == nil {
			st = &limitStats{}
			l.stats[k.key] = st
		}
		st.held++
	}
	l.mu.Unlock()
	if (k.concurrency > 0 && g.Free > 0) || k.rate > 0 {
		// The next call may be served at once, or learn when its token
		// is due.
		l.wake(k.key, 1)
	}
}

// park keeps t waiting for key until it is woken; retryAfter > 0 is when
// a rate limit's token is due.
func (l *limiter) park(t *Task, key string, since time.Time, retryAfter time.Duration) {
	l.mu.Lock()
	m := l.waitSince[t.ID]
	if m == nil {
		m = map[string]time.Time{}
		l.waitSince[t.ID] = m
	}
	m[key] = since
	q := l.queues[key]
	if q == nil {
		q = &permitQueue{backoff: permitRecheckMin}
		l.queues[key] = q
	}
	i := sort.Search(len(q.tasks), func(i int) bool {
		s := l.waitSince[q.tasks[i].ID][key]
		return s.After(since) || (s.Equal(since) && q.tasks[i].ID > t.ID)
	})
	q.tasks = append(q.tasks, nil)
	copy(q.tasks[i+1:], q.tasks[i:])
	q.tasks[i] = t
	wait := q.backoff
	if retryAfter > 0 && retryAfter < wait {
		wait = retryAfter
	}
	if i == 0 {
		l.armLocked(key, q, wait)
		q.backoff = min(2*q.backoff, permitRecheckMax)
	}
	l.mu.Unlock()
	// The dispatcher parks t when processTask returns errLimitWait; a wake
	// before then finds t still running and runs it again after.
}

// armLocked sets the re-check of the oldest parked call of key to d from
// now, unless one is due sooner.
func (l *limiter) armLocked(key string, q *permitQueue, d time.Duration) {
	at := l.e.cfg.Clock.Now().Add(d)
	if q.timer != nil && !q.timerAt.After(at) {
		return
	}
	q.stopTimerLocked()
	timer, stop := l.e.cfg.Clock.NewTimer(d), make(chan struct{})
	q.timer, q.stop, q.timerAt = timer, stop, at
	go func() {
		select {
		case <-timer.C():
		case <-stop:
			return
		}
		l.mu.Lock()
		if q.timer == timer {
			q.timer, q.stop = nil, nil
		}
		l.mu.Unlock()
		l.wake(key, 1)
	}()
}

// wake resumes the n oldest calls parked for key.
func (l *limiter) wake(key string, n int) {
	l.mu.Lock()
	q := l.queues[key]
	if q == nil || len(q.tasks) == 0 {
		l.mu.Unlock()
		return
	}
	n = min(n, len(q.tasks))
	woken := make([]*Task, n)
	copy(woken, q.tasks[:n])
	q.tasks = q.tasks[n:]
	if len(q.tasks) == 0 {
		q.stopTimerLocked()
		delete(l.queues, key)
	} else if q.timer == nil {
		// The calls left re-check by themselves should no release wake them.
		l.armLocked(key, q, q.backoff)
	}
	l.mu.Unlock()
	for _, t := range woken {
		l.e.disp.resume(t)
	}
}

// woke is a release announced elsewhere, or here: the oldest call parked
// for key tries again, and the back-off of its re-checks starts over.
func (l *limiter) woke(key string) {
	l.mu.Lock()
	if q := l.queues[key]; q != nil {
		q.backoff = permitRecheckMin
	}
	l.mu.Unlock()
	l.wake(key, 1)
}

// release gives back every permit task id holds or awaits, and wakes the
// calls waiting for them here and on the other nodes.
func (l *limiter) release(id int64) {
	l.mu.Lock()
	hp := l.held[id]
	delete(l.held, id)
	_, waiting := l.waitSince[id]
	delete(l.waitSince, id)
	if hp != nil {
		for _, k := range hp.keys {
			if st := l.stats[k]; st != nil {
				st.held--
			}
		}
	}
	l.mu.Unlock()
	if hp == nil && !waiting {
		return
	}
	if hp != nil && hp.fenced {
		// No longer renewed, the rows expire with their lease, by which
		// time the worker has most likely finished the request cut off.
		l.e.log.Warn().Int64("task", id).Strs("keys", hp.keys).
			Msg("a call cancelled by its fence keeps its limit permits until their lease runs out")
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	keys, err := l.ps.PermitRelease(ctx, l.e.cfg.NodeID, []int64{id})
	if err != nil {
		// The rows are no longer renewed: they expire with their lease.
		l.e.log.Warn().Err(err).Int64("task", id).Msg("releasing limit permits failed; they expire instead")
		if hp != nil {
			keys = hp.keys
		}
	}
	l.announce(keys)
}

// announce wakes the calls waiting for keys, here and elsewhere.
func (l *limiter) announce(keys []string) {
	if len(keys) == 0 {
		return
	}
	for _, k := range keys {
		l.woke(k)
	}
	if l.e.feed != nil {
		hints := make([]string, len(keys))
		for i, k := range keys {
			hints[i] = limitHintPrefix + k
		}
		l.e.feed.PublishChanges(Changes{Keys: hints})
	}
}

// drop gives back the permits of a task whose run or execution moved on
// while it waited (a no-op without a limiter, or for a task that holds
// and awaits none).
func (l *limiter) drop(id int64) {
	if l != nil {
		l.release(id)
	}
}

// forget drops what the limiter knows of a task handed back (shutdown).
func (l *limiter) forget(ids []int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, id := range ids {
		delete(l.waitSince, id)
		if hp := l.held[id]; hp != nil {
			for _, k := range hp.keys {
				if st := l.stats[k]; st != nil {
					st.held--
				}
			}
			delete(l.held, id)
		}
	}
	for k, q := range l.queues {
		q.stopTimerLocked()
		delete(l.queues, k)
	}
}

// renewLoop renews the permits every LeaseDuration/4 until ctx ends, on a
// goroutine of its own so that a slow claim does not delay it.
func (l *limiter) renewLoop(ctx context.Context) {
	every := l.e.cfg.LeaseDuration / 4
	for {
		t := l.e.cfg.Clock.NewTimer(every)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
		l.renew(ctx, l.e.cfg.Clock.Now(), every)
	}
}

// renew extends the leases of the permits this process holds or awaits,
// and fences the calls whose permits it could not renew: they are
// cancelled before their lease can expire, so that another node taking
// the permit never makes the count exceed the limit. Their permits are
// then left to expire, not released (heldPermits.fenced).
func (l *limiter) renew(ctx context.Context, now time.Time, renewEvery time.Duration) {
	l.mu.Lock()
	var ids []int64
	want := map[int64]int{}
	for id, hp := range l.held {
		ids = append(ids, id)
		want[id] = len(hp.keys)
	}
	for id := range l.waitSince {
		if _, ok := want[id]; !ok {
			ids = append(ids, id)
		}
	}
	l.mu.Unlock()
	if len(ids) == 0 {
		l.mu.Lock()
		l.lastRenew = now
		l.mu.Unlock()
		return
	}
	renewed, err := l.ps.PermitRenew(ctx, l.e.cfg.NodeID, ids, now, l.e.cfg.LeaseDuration)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		if ctx.Err() == nil && !l.e.storeUnavailable(err, "permit renewals wait") {
			l.e.log.Error().Err(err).Msg("renewing limit permits")
		}
		if !now.Add(renewEvery).Before(l.lastRenew.Add(l.e.cfg.LeaseDuration)) {
			for id, hp := range l.held {
				if hp.cancel != nil && want[id] > 0 {
					hp.fenced = true
					hp.cancel(errPermitLost)
				}
			}
		}
		return
	}
	l.lastRenew = now
	got := map[int64]int{}
	for _, id := range renewed {
		got[id]++
	}
	for id, n := range want {
		if hp := l.held[id]; hp != nil && hp.cancel != nil && got[id] < n {
			l.e.log.Warn().Int64("task", id).Msg("a limit permit was lost: cancelling its call")
			hp.fenced = true
			hp.cancel(errPermitLost)
		}
	}
}

// waiting is the number of calls parked here per key.
func (l *limiter) waiting() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]int{}
	for k, q := range l.queues {
		out[k] = len(q.tasks)
	}
	return out
}

// heldCounts is the number of permits held here per key.
func (l *limiter) heldCounts() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]int{}
	for k, st := range l.stats {
		out[k] = st.held
	}
	return out
}

// releaseAll gives back every permit of this process (shutdown) and tells
// the other nodes; nothing when it never took or awaited one.
func (l *limiter) releaseAll(ctx context.Context) {
	if !l.used.Load() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	keys, err := l.ps.PermitRelease(ctx, l.e.cfg.NodeID, nil)
	if err != nil {
		l.e.log.Warn().Err(err).Msg("handing back limit permits failed; they expire instead")
		return
	}
	if l.e.feed != nil && len(keys) > 0 {
		hints := make([]string, len(keys))
		for i, k := range keys {
			hints[i] = limitHintPrefix + k
		}
		l.e.feed.PublishChanges(Changes{Keys: hints})
	}
}
