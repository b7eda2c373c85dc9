package postgres

import (
	"bytes"
	"slices"

	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/store/rowfmt"
)

// A start writes everything a worker call on its first state is sent: the
// run, the state's execution and, when it has any, the run's first
// attributes. When nothing but the run's and the execution's inserts
// wrote what callReadSQL would read, the read behind the COMMIT
// (ReadForCallAfterCommit) would return those two rows as written: the
// run is new, so nobody else can have written to it before the commit.
// The transaction then hands them over itself, after the commit, instead
// of reading them (one statement, and its part of the round trip, fewer
// per started workflow). Anything else that changes what the read
// returns (an attribute of the run, a later update of the run or of one
// of its executions) leaves the read to the database.

// bornRows are the rows a transaction inserted for runs it created, as
// callReadSQL would return them after its commit. Every execution insert
// is kept (a start inserts its run last), as a value: an answer's
// transaction pays a slice append for it, nothing more.
type bornRows struct {
	runs  []engine.Run
	execs []engine.Execution
	// changed lists runs that a write other than those inserts touched.
	changed []string
}

func (b *bornRows) run(r *engine.Run) {
	b.runs = append(b.runs, *r)
}

func (b *bornRows) executions(xs []*engine.Execution) {
	for _, x := range xs {
		b.execs = append(b.execs, *x)
	}
}

func (b *bornRows) change(runID string) {
	if !slices.Contains(b.changed, runID) {
		b.changed = append(b.changed, runID)
	}
}

// read returns what callReadSQL would read for runID, executionID after
// the commit, or nil when the database must be asked.
func (b *bornRows) read(runID, executionID string) *engine.CallRead {
	if len(b.runs) == 0 || slices.Contains(b.changed, runID) {
		return nil
	}
	ri := slices.IndexFunc(b.runs, func(r engine.Run) bool { return r.RunID == runID })
	xi := slices.IndexFunc(b.execs, func(x engine.Execution) bool { return x.RunID == runID && x.ExecutionID == executionID })
	if ri < 0 || xi < 0 {
		return nil
	}
	// As the row reads back: times in whole milliseconds, fresh bytes (the
	// engine owns what it is handed).
	r, x := b.runs[ri], b.execs[xi]
	r.StartedAt, r.ClosedAt = rowfmt.FromMs(rowfmt.ToMs(r.StartedAt)), rowfmt.FromMs(rowfmt.ToMs(r.ClosedAt))
	x.CreatedAt = rowfmt.FromMs(rowfmt.ToMs(x.CreatedAt))
	r.Data, x.Data = bytes.Clone(r.Data), bytes.Clone(x.Data)
	return &engine.CallRead{Run: &r, Execution: &x}
}
