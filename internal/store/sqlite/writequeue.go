package sqlite

import (
	"errors"
	"sync"

	"github.com/iwf-server/iwf-server/engine"
)

// errClosed is the error of an Update on a closed store.
var errClosed = errors.New("sqlite: store closed")

// writeQueue holds the Update calls waiting for the writer goroutine, by
// engine.Priority: the writer fills each group-commit batch with the most
// urgent calls first, oldest first within a priority. Under overload a
// burst of starts then waits behind the fired timers and worker answers of
// the workflows already under way, instead of filling the batches in front
// of them. The queue is bounded by the callers: each waits for its answer.
type writeQueue struct {
	mu      sync.Mutex
	waiting [engine.NumPriorities][]*writeReq
	n       int
	closed  bool
	// wake holds a token while calls wait that the writer has not seen.
	wake chan struct{}
	// changed is broadcast whenever n changes (tests wait on it).
	changed *sync.Cond
}

func newWriteQueue() *writeQueue {
	q := &writeQueue{wake: make(chan struct{}, 1)}
	q.changed = sync.NewCond(&q.mu)
	return q
}

// push queues r at the priority of its context; it fails once the queue
// is closed.
func (q *writeQueue) push(r *writeReq) error {
	p := engine.PriorityOf(r.ctx)
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return errClosed
	}
	q.waiting[p] = append(q.waiting[p], r)
	q.n++
	q.changed.Broadcast()
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
	return nil
}

// take removes up to max calls, most urgent first, and returns them in
// that order; nil when none waits.
func (q *writeQueue) take(max int) []*writeReq {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.n == 0 {
		return nil
	}
	batch := make([]*writeReq, 0, min(q.n, max))
	for p := range q.waiting {
		w := q.waiting[p]
		k := min(len(w), max-len(batch))
		batch = append(batch, w[:k]...)
		clear(w[:k])
		q.waiting[p] = w[k:]
		if len(q.waiting[p]) == 0 {
			q.waiting[p] = nil // let the backing array go
		}
		if len(batch) == max {
			break
		}
	}
	q.n -= len(batch)
	q.changed.Broadcast()
	return batch
}

// empty reports whether no call waits.
func (q *writeQueue) empty() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.n == 0
}

// isClosed reports whether close was called.
func (q *writeQueue) isClosed() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.closed
}

// close refuses further calls and returns those still waiting.
func (q *writeQueue) close() []*writeReq {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	var left []*writeReq
	for p := range q.waiting {
		left = append(left, q.waiting[p]...)
		q.waiting[p] = nil
	}
	q.n = 0
	q.changed.Broadcast()
	return left
}

// waitLen waits until at least n calls are queued.
func (q *writeQueue) waitLen(n int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.n < n {
		q.changed.Wait()
	}
}
