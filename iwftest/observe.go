package iwftest

import (
	"context"
	"sync"
	"time"

	"github.com/iwf-server/iwf-server/engine"
)

// observedStore is the engine's store with one addition: it remembers the
// runs that have tasks, so that Env can list the engine's pending work (the
// store itself only lists the tasks of a given run).
//
// The engine deletes a task in the same transaction that applies its
// outcome and inserts the follow-up tasks, so "no task is due" is exactly
// "the engine has nothing left to do at this time".
//
// With alignDueAt it also rounds the due time of every task it stores up
// to a whole millisecond, the store's precision. The engine keeps the very
// Task values it stores in its in-memory schedule, so both then agree on
// when a task is due; otherwise a retry backoff of a fractional number of
// milliseconds would be due in the store a moment before it is due in the
// engine, and Advance could stop in that gap.
type observedStore struct {
	engine.Store
	alignDueAt bool

	mu   sync.Mutex
	runs map[string]uint64 // run id -> generation of its last task insert
	gen  uint64
}

func newObservedStore(s engine.Store, alignDueAt bool) *observedStore {
	return &observedStore{Store: s, alignDueAt: alignDueAt, runs: map[string]uint64{}}
}

// Update runs fn on a transaction that records the runs of inserted tasks.
func (s *observedStore) Update(ctx context.Context, fn func(ctx context.Context, tx engine.Tx) error) error {
	return s.Store.Update(ctx, func(ctx context.Context, tx engine.Tx) error {
		return fn(ctx, observedTx{Tx: tx, s: s})
	})
}

// noteRuns records runs that got tasks. A rolled-back insert leaves a run
// that has no task; tasks() forgets it.
func (s *observedStore) noteRuns(tasks []*engine.Task) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range tasks {
		s.gen++
		s.runs[t.RunID] = s.gen
	}
}

// tasks returns every task in the store, in one consistent snapshot.
func (s *observedStore) tasks(ctx context.Context) ([]*engine.Task, error) {
	s.mu.Lock()
	seen := make(map[string]uint64, len(s.runs))
	for id, g := range s.runs {
		seen[id] = g
	}
	s.mu.Unlock()

	var all []*engine.Task
	var empty []string
	err := s.View(ctx, func(ctx context.Context, tx engine.ReadTx) error {
		all, empty = all[:0], empty[:0]
		for id := range seen {
			ts, err := tx.TaskList(ctx, id)
			if err != nil {
				return err
			}
			if len(ts) == 0 {
				empty = append(empty, id)
			}
			all = append(all, ts...)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	// Forget runs without tasks, unless a task was inserted for them since
	// the snapshot began (its transaction may not have committed yet).
	s.mu.Lock()
	for _, id := range empty {
		if s.runs[id] == seen[id] {
			delete(s.runs, id)
		}
	}
	s.mu.Unlock()
	return all, nil
}

// observedTx is a transaction of observedStore.
type observedTx struct {
	engine.Tx
	s *observedStore
}

func (t observedTx) TaskInsert(ctx context.Context, tasks []*engine.Task) error {
	t.s.noteRuns(tasks)
	if t.s.alignDueAt {
		for _, task := range tasks {
			task.DueAt = ceilMillis(task.DueAt)
		}
	}
	return t.Tx.TaskInsert(ctx, tasks)
}

func (t observedTx) TaskReschedule(ctx context.Context, task *engine.Task, owner string) (bool, error) {
	if t.s.alignDueAt {
		task.DueAt = ceilMillis(task.DueAt)
	}
	return t.Tx.TaskReschedule(ctx, task, owner)
}

// ceilMillis rounds t up to a whole millisecond.
func ceilMillis(t time.Time) time.Time {
	if r := t.Truncate(time.Millisecond); !r.Equal(t) {
		return r.Add(time.Millisecond)
	}
	return t
}
