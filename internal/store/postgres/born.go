package postgres

import (
	"bytes"
	"slices"
	"strings"

	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/store/rowfmt"
	"github.com/iwf-server/iwf-server/search"
)

// A start writes everything a worker call on its first state is sent: the
// run, the state's execution and the run's first attributes (the start's
// data and search attributes, and the system search attributes). The run
// is new, so nobody else can have written to it before the commit: the
// read behind the COMMIT (ReadForCallAfterCommit) would return those rows
// as this transaction wrote them. The transaction then hands them over
// itself, after the commit, instead of reading them (one statement, and
// its part of the round trip, fewer per started workflow). A later update
// of the run or of one of its executions in the same transaction leaves
// the read to the database.

// bornRows are the rows a transaction inserted for runs it created, as
// callReadSQL would return them after its commit. Every execution insert
// is kept (a start inserts its run last), as a value: an answer's
// transaction pays a slice append for it, nothing more.
type bornRows struct {
	runs  []engine.Run
	execs []engine.Execution
	// data and search are the attributes written, in order: a later write
	// of a key replaces an earlier one. An answer's transaction records
	// its attributes too (it cannot know that no run is created after
	// them): an append each.
	data   []bornAttribute
	search []bornSearchAttribute
	// changed lists runs whose row or executions were updated.
	changed []string
}

type bornAttribute struct {
	runID string
	a     engine.Attribute
}

type bornSearchAttribute struct {
	runID string
	a     engine.SearchAttribute
}

func (b *bornRows) dataAttributes(runID string, attrs []*engine.Attribute) {
	for _, a := range attrs {
		b.data = append(b.data, bornAttribute{runID, *a})
	}
}

func (b *bornRows) searchAttributes(runID string, attrs []*engine.SearchAttribute) {
	for _, a := range attrs {
		b.search = append(b.search, bornSearchAttribute{runID, *a})
	}
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
	out := &engine.CallRead{Run: &r, Execution: &x}
	for _, d := range lastOfRun(b.data, runID, func(d bornAttribute) (string, string) { return d.runID, d.a.Key }) {
		out.DataAttributes = append(out.DataAttributes, &engine.Attribute{Key: d.a.Key, Value: bytes.Clone(d.a.Value)})
	}
	for _, sa := range lastOfRun(b.search, runID, func(s bornSearchAttribute) (string, string) { return s.runID, s.a.Key }) {
		out.SearchAttributes = append(out.SearchAttributes, readBack(sa.a))
	}
	return out
}

// lastOfRun returns the last write of each key of runID among writes, in
// key order.
func lastOfRun[T any](writes []T, runID string, id func(T) (runID, key string)) []T {
	var out []T
	for i, w := range writes {
		r, k := id(w)
		if r != runID || slices.ContainsFunc(writes[i+1:], func(later T) bool { lr, lk := id(later); return lr == r && lk == k }) {
			continue
		}
		out = append(out, w)
	}
	slices.SortFunc(out, func(x, y T) int { _, kx := id(x); _, ky := id(y); return strings.Compare(kx, ky) })
	return out
}

// readBack is a search attribute as SearchAttributeUpsert stores it and
// scanCallRead reads it back: the time in whole nanoseconds within the
// stored range, keyword array elements in a fresh slice (empty, not nil,
// when there are none), no elements on other types.
func readBack(a engine.SearchAttribute) *engine.SearchAttribute {
	out := &engine.SearchAttribute{Key: a.Key, ValueType: a.ValueType, Raw: bytes.Clone(a.Raw),
		String: clonePtr(a.String), Int: clonePtr(a.Int), Double: clonePtr(a.Double), Bool: clonePtr(a.Bool)}
	if a.Time != nil {
		t := rowfmt.FromNs(rowfmt.ToNs(*a.Time))
		out.Time = &t
	}
	if a.ValueType == search.KeywordArray {
		out.Strings = append([]string{}, a.Strings...)
	}
	return out
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}
