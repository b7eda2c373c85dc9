package engine

import (
	"container/heap"
	"context"
	"errors"
	"maps"
	"runtime"
	"slices"
	"sync"
	"time"
)

// The dispatcher runs tasks. Tasks reach it in two ways:
//
//   - the hot path: a transaction of this process creates tasks leased to
//     this process; after the commit they are handed to schedule() directly,
//     so no poll sits between a worker answer and the next worker call;
//   - the safety net: a poller claims due tasks that nobody holds (far
//     timers, backoffs, work of a crashed process, work of other processes)
//     every PollInterval.
//
// Leased tasks wait in an in-memory heap ordered by due time and move to a
// bounded pool of goroutines when due. Only tasks due within a short horizon
// are ever in memory, so memory does not grow with sleeping workflows.
type dispatcher struct {
	e     *Engine
	mu    sync.Mutex
	queue taskHeap
	known map[int64]bool // tasks in the heap or running, to avoid duplicates
	// again holds tasks rescheduled while they were running (a retry with
	// backoff); they go back to the heap when the run ends.
	again map[int64]*Task
	// running marks the tasks being processed.
	running map[int64]bool
	// parked holds the tasks waiting for a concurrency or rate limit
	// (limiter): leased to this process, renewed, but on no goroutine.
	parked map[int64]*Task
	wake   chan struct{}
	// claimNow wakes the poller before its interval is over (another
	// process announced claimable work).
	claimNow chan struct{}
	// ready holds due tasks by priority: timers and timeouts first, then
	// execute calls, then waitUntil calls, so that work already under way
	// (a timer that fired, a state about to decide) is not queued behind
	// newly started workflows when the process is saturated.
	ready   [3][]*Task
	readyOK *sync.Cond // signalled when ready gains a task, and on stop
	// idle counts the pool goroutines waiting on readyOK.
	idle    int
	stopped bool
	// draining is set when the node shuts down: no task starts any more,
	// and tasks handed to the dispatcher go back to the store (handBack).
	draining bool
	handBack func(ids []int64)
	// changed is closed, and replaced, whenever the tasks in memory change
	// (scheduled, made ready, taken, done): what WaitIdle and start
	// backpressure wait on.
	changed chan struct{}
}

func newDispatcher(e *Engine) *dispatcher {
	d := &dispatcher{
		e:        e,
		known:    map[int64]bool{},
		again:    map[int64]*Task{},
		running:  map[int64]bool{},
		parked:   map[int64]*Task{},
		wake:     make(chan struct{}, 1),
		claimNow: make(chan struct{}, 1),
		changed:  make(chan struct{}),
	}
	d.readyOK = sync.NewCond(&d.mu)
	return d
}

// priority orders task kinds in the ready queues (0 runs first).
func priority(k TaskKind) int {
	switch k {
	case TaskTimer, TaskTimeout:
		return 0
	case TaskExecute:
		return 1
	}
	return 2
}

// backlog is the number of due tasks waiting for a free goroutine.
func (d *dispatcher) backlog() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.backlogLocked()
}

func (d *dispatcher) backlogLocked() int {
	return len(d.ready[0]) + len(d.ready[1]) + len(d.ready[2])
}

// changedLocked announces a change of the tasks in memory. d.mu is held.
func (d *dispatcher) changedLocked() {
	close(d.changed)
	d.changed = make(chan struct{})
}

// waitBacklog waits until at most limit due tasks wait for a goroutine, or
// until deadline fires or ctx ends.
func (d *dispatcher) waitBacklog(ctx context.Context, limit int, deadline <-chan time.Time) error {
	for {
		d.mu.Lock()
		n, changed := d.backlogLocked(), d.changed
		d.mu.Unlock()
		if n <= limit {
			return nil
		}
		select {
		case <-changed:
		case <-deadline:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// state reports whether any task in memory is being run or waits for a
// goroutine (busy), whether a scheduled task is due at now but not yet
// moved to the ready queues (due), and the channel of the next change. Due
// times are rounded up to the store's millisecond, so a task made due "now"
// is due at the end of now's millisecond: it counts as due.
func (d *dispatcher) state(now time.Time) (busy, due bool, changed <-chan struct{}) {
	d.mu.Lock()
	defer d.mu.Unlock()
	busy = len(d.running) > 0 || len(d.again) > 0 || d.backlogLocked() > 0
	due = d.queue.Len() > 0 && !d.queue[0].DueAt.After(ceilMillisecond(now))
	return busy, due, d.changed
}

// drain starts the hand-over of a node shutting down: no task starts any
// more, and the tasks held but not running leave memory. It returns their
// ids, for the caller to hand back; tasks scheduled from now on go to
// handBack.
func (d *dispatcher) drain(handBack func(ids []int64)) []int64 {
	d.mu.Lock()
	d.draining, d.handBack = true, handBack
	var ids []int64
	for _, t := range d.queue {
		ids = append(ids, t.ID)
	}
	d.queue = nil
	for p := range d.ready {
		for _, t := range d.ready[p] {
			ids = append(ids, t.ID)
		}
		d.ready[p] = nil
	}
	for id := range d.parked {
		ids = append(ids, id)
	}
	clear(d.parked)
	for _, id := range ids {
		delete(d.known, id)
	}
	d.changedLocked()
	d.mu.Unlock()
	d.readyOK.Broadcast()
	return ids
}

// runningIDs returns the ids of the tasks being processed.
func (d *dispatcher) runningIDs() []int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Collect(maps.Keys(d.running))
}

// waitRunning waits until no task is being processed, or ctx ends.
func (d *dispatcher) waitRunning(ctx context.Context) error {
	for {
		d.mu.Lock()
		n, changed := len(d.running), d.changed
		d.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// stop wakes the workers so that they return.
func (d *dispatcher) stop() {
	d.mu.Lock()
	d.stopped = true
	d.mu.Unlock()
	d.readyOK.Broadcast()
}

// next blocks until a task is ready and takes the most urgent one; it
// returns nil once the dispatcher stopped.
func (d *dispatcher) next() *Task {
	d.mu.Lock()
	defer d.mu.Unlock()
	for {
		if d.stopped || d.draining {
			return nil
		}
		for p := range d.ready {
			if q := d.ready[p]; len(q) > 0 {
				t := q[0]
				q[0] = nil
				d.ready[p] = q[1:]
				d.running[t.ID] = true
				d.changedLocked()
				return t
			}
		}
		d.idle++
		d.readyOK.Wait()
		d.idle--
	}
}

// schedule hands leased tasks to the dispatcher.
func (d *dispatcher) schedule(tasks ...*Task) {
	if len(tasks) == 0 {
		return
	}
	d.mu.Lock()
	if d.draining {
		back := make([]int64, len(tasks))
		for i, t := range tasks {
			back[i] = t.ID
		}
		d.mu.Unlock()
		d.handBack(back)
		return
	}
	// A task already due goes straight to its ready list: the goroutine
	// that committed it wakes a pool goroutine itself, without a round
	// through the scheduling loop (one wake-up less on every call a
	// commit makes due). Only later tasks wait in the heap.
	now := d.e.cfg.Clock.Now()
	ready, later := 0, false
	for _, t := range tasks {
		if d.running[t.ID] {
			d.again[t.ID] = t
			continue
		}
		if d.known[t.ID] {
			continue
		}
		d.known[t.ID] = true
		if runAt(t).After(now) {
			heap.Push(&d.queue, t)
			later = true
			continue
		}
		p := priority(t.Kind)
		d.ready[p] = append(d.ready[p], t)
		ready++
	}
	d.changedLocked()
	woken := min(ready, d.idle)
	d.mu.Unlock()
	for range ready {
		d.readyOK.Signal()
	}
	if later {
		d.nudge()
	}
	if woken > 0 {
		// The goroutine that committed usually has bookkeeping left (the
		// HTTP answer of a start, the metrics and spans of a call); the
		// woken pool goroutine makes the next worker call, which is what
		// the workflow waits for. Go readies it on this goroutine's
		// processor, behind this goroutine: yielding runs it at once
		// instead of after that bookkeeping or after another processor
		// wakes up to steal it (measured on W1 at one in flight: 0.1 to
		// 0.2 ms per call). Under load no pool goroutine is idle and
		// nothing yields.
		runtime.Gosched()
	}
}

// nudge wakes the scheduling loop.
func (d *dispatcher) nudge() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// done forgets a task once it has run.
func (d *dispatcher) done(t *Task) {
	d.mu.Lock()
	delete(d.running, t.ID)
	if next, ok := d.again[t.ID]; ok && d.draining {
		delete(d.again, t.ID)
		delete(d.known, t.ID)
		d.changedLocked()
		d.mu.Unlock()
		d.handBack([]int64{next.ID})
		return
	} else if ok {
		delete(d.again, t.ID)
		heap.Push(&d.queue, next)
		d.changedLocked()
		d.mu.Unlock()
		d.nudge()
		return
	}
	delete(d.known, t.ID)
	d.changedLocked()
	d.mu.Unlock()
}

// park takes a task that waits for a limit off its goroutine. It stays
// held (its lease renewed) until resume hands it back to the pool.
func (d *dispatcher) park(t *Task) {
	d.mu.Lock()
	delete(d.running, t.ID)
	if next, ok := d.again[t.ID]; ok {
		// Resumed, or rescheduled, while it was parking.
		delete(d.again, t.ID)
		if d.draining {
			delete(d.known, t.ID)
			d.changedLocked()
			d.mu.Unlock()
			d.handBack([]int64{next.ID})
			return
		}
		heap.Push(&d.queue, next)
		d.changedLocked()
		d.mu.Unlock()
		d.nudge()
		return
	}
	if d.draining {
		delete(d.known, t.ID)
		d.changedLocked()
		d.mu.Unlock()
		d.handBack([]int64{t.ID})
		return
	}
	d.parked[t.ID] = t
	d.changedLocked()
	d.mu.Unlock()
}

// resume hands a parked task back to the pool, to run now.
func (d *dispatcher) resume(t *Task) {
	d.mu.Lock()
	if d.running[t.ID] {
		// Still on its way to park.
		if _, ok := d.again[t.ID]; !ok {
			d.again[t.ID] = t
		}
		d.mu.Unlock()
		return
	}
	if _, ok := d.parked[t.ID]; !ok {
		d.mu.Unlock()
		return // handed back, or already resumed
	}
	delete(d.parked, t.ID)
	heap.Push(&d.queue, t)
	d.changedLocked()
	d.mu.Unlock()
	d.nudge()
}

// heldIDs returns the ids of the tasks this process holds: scheduled,
// waiting for a goroutine, running, or rescheduled while running.
func (d *dispatcher) heldIDs() []int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Collect(maps.Keys(d.known))
}

// inMemory is the number of tasks held by this process.
func (d *dispatcher) inMemory() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.known)
}

// run moves due tasks from the heap to the pool until ctx ends.
func (d *dispatcher) run(ctx context.Context) {
	clock := d.e.cfg.Clock
	for {
		d.mu.Lock()
		var wait time.Duration = -1
		moved := 0
		now := clock.Now()
		for d.queue.Len() > 0 {
			next := d.queue[0]
			if at := runAt(next); at.After(now) {
				wait = at.Sub(now)
				break
			}
			t := heap.Pop(&d.queue).(*Task)
			p := priority(t.Kind)
			d.ready[p] = append(d.ready[p], t)
			moved++
		}
		if moved > 0 {
			d.changedLocked()
		}
		d.mu.Unlock()
		for i := 0; i < moved; i++ {
			d.readyOK.Signal()
		}
		var timerC <-chan time.Time
		var timer Timer
		if wait >= 0 {
			timer = clock.NewTimer(wait)
			timerC = timer.C()
		}
		select {
		case <-ctx.Done():
			if timer != nil {
				timer.Stop()
			}
			return
		case <-d.wake:
		case <-timerC:
		}
		if timer != nil {
			timer.Stop()
		}
	}
}

// worker processes tasks from the pool until ctx ends.
func (d *dispatcher) worker(ctx context.Context) {
	for {
		t := d.next()
		if t == nil {
			return
		}
		err := d.e.processTask(ctx, t)
		if errors.Is(err, errLimitWait) {
			d.park(t)
			continue
		}
		if err != nil && ctx.Err() == nil {
			// Store trouble: keep the task (this process still holds its
			// lease) and try again shortly.
			retry := *t
			retry.DueAt = d.e.cfg.Clock.Now().Add(time.Second)
			d.mu.Lock()
			if _, rescheduled := d.again[t.ID]; !rescheduled {
				d.again[t.ID] = &retry
			}
			d.mu.Unlock()
		}
		d.done(t)
	}
}

// poll claims due tasks nobody holds, every PollInterval, and renews this
// process's leases every LeaseDuration/3.
func (d *dispatcher) poll(ctx context.Context) {
	e := d.e
	clock := e.cfg.Clock
	renewEvery := e.cfg.LeaseDuration / 3
	lastRenew := clock.Now()
	for {
		d.mu.Lock()
		draining := d.draining
		d.mu.Unlock()
		if !draining {
			d.claim(ctx)
		}
		if now := clock.Now(); now.Sub(lastRenew) >= renewEvery {
			if _, err := e.store.TaskRenewLeases(ctx, e.cfg.NodeID, d.heldIDs(), now, e.cfg.LeaseDuration); err != nil && ctx.Err() == nil &&
				!e.storeUnavailable(err, "lease renewals wait") {
				e.log.Error().Err(err).Msg("renewing task leases")
			}

			lastRenew = now
		}
		interval := e.cfg.PollInterval
		if renewEvery < interval {
			interval = renewEvery
		}
		t := clock.NewTimer(interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		case <-d.claimNow:
			t.Stop()
		}
	}
}

// claimSoon makes the poller claim now instead of at its next interval.
func (d *dispatcher) claimSoon() {
	select {
	case d.claimNow <- struct{}{}:
	default:
	}
}

// maxInMemory bounds the tasks one process holds at once.
const maxInMemory = 50_000

// claim leases due work that nobody holds and schedules it; it returns how
// many tasks it claimed.
func (d *dispatcher) claim(ctx context.Context) int {
	e := d.e
	const batch = 500
	total := 0
	for ctx.Err() == nil {
		room := maxInMemory - d.inMemory()
		if room <= 0 {
			return total
		}
		limit := batch
		if room < limit {
			limit = room
		}
		now := e.cfg.Clock.Now()
		tasks, err := e.store.TaskClaim(ctx, TaskClaimParams{
			Owner:         e.cfg.NodeID,
			Now:           now,
			DueBefore:     now.Add(e.horizon()),
			LeaseDuration: e.cfg.LeaseDuration,
			Limit:         limit,
		})
		if err != nil {
			if ctx.Err() == nil && !e.storeUnavailable(err, "claims wait") {
				e.log.Error().Err(err).Msg("claiming tasks")
			}
			return total
		}
		e.metrics.lastClaim.Store(time.Now().UnixMilli())
		if len(tasks) > 0 {
			e.metrics.claimed.add(int64(len(tasks)))
		}
		total += len(tasks)
		d.schedule(tasks...)
		if len(tasks) < limit {
			return total
		}
	}
	return total
}

// taskHeap orders tasks by due time.
type taskHeap []*Task

func (h taskHeap) Len() int { return len(h) }
func (h taskHeap) Less(i, j int) bool {
	if h[i].DueAt.Equal(h[j].DueAt) {
		return h[i].ID < h[j].ID
	}
	return h[i].DueAt.Before(h[j].DueAt)
}
func (h taskHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *taskHeap) Push(x any)   { *h = append(*h, x.(*Task)) }
func (h *taskHeap) Pop() any {
	old := *h
	n := len(old)
	t := old[n-1]
	old[n-1] = nil
	*h = old[:n-1]
	return t
}

// runAt is when the scheduling loop hands t to a goroutine. Due times are
// rounded up to the store's millisecond (leaseLocally), so a state call
// made due "now" is stored as due at the end of now's millisecond; waiting
// for that end would add half a millisecond on average to every step of a
// workflow. A waitUntil or execute call therefore runs as soon as its due
// millisecond has begun: it has no due time of its own to honour, only the
// moment it was created or its backoff, which is not that precise. Timers
// and timeouts run at their due time, never before it.
func runAt(t *Task) time.Time {
	if t.Kind == TaskWaitUntil || t.Kind == TaskExecute {
		return t.DueAt.Add(-time.Millisecond + time.Nanosecond)
	}
	return t.DueAt
}

// ceilMillisecond rounds t up to a whole millisecond, as task due times are.
func ceilMillisecond(t time.Time) time.Time {
	if r := t.Truncate(time.Millisecond); !r.Equal(t) {
		return r.Add(time.Millisecond)
	}
	return t
}
