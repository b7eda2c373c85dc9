package engine

import "context"

// Priority orders a process's store work when the store is the bottleneck.
// The engine marks each store call's context with one; a store that queues
// for its connections (PostgreSQL) serves waiting work of a more urgent
// priority first, so that timers and the answers of workers are not
// queued behind a burst of new workflows. Stores without such a queue
// ignore it.
type Priority int

// The priorities, most urgent first.
const (
	// PriorityUrgent records what has already happened: a worker's answer
	// (or failed attempt) and a timer or timeout that fired. Delaying it
	// delays the workflow without saving any work.
	PriorityUrgent Priority = iota
	// PriorityNormal is the default: API requests, and reading the inputs
	// of an execute call.
	PriorityNormal
	// PriorityLow is reading the inputs of a waitUntil call.
	PriorityLow
	// PriorityStart starts new workflows: under overload, the work of
	// workflows already under way goes first, and starts wait.
	PriorityStart
)

// NumPriorities is the number of priorities: they are 0 to NumPriorities-1.
const NumPriorities = int(PriorityStart) + 1

type priorityKey struct{}

// WithPriority returns ctx marked with priority p.
func WithPriority(ctx context.Context, p Priority) context.Context {
	return context.WithValue(ctx, priorityKey{}, p)
}

// PriorityOf returns the priority ctx is marked with, PriorityNormal when
// it has none.
func PriorityOf(ctx context.Context) Priority {
	if p, ok := ctx.Value(priorityKey{}).(Priority); ok && p >= 0 && int(p) < NumPriorities {
		return p
	}
	return PriorityNormal
}
