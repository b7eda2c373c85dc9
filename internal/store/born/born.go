// Package born keeps the rows a store transaction inserted for the runs it
// created, and returns them as the store's ReadForCall would read them
// after the commit (engine.CallRead), so that the first worker call of a
// new run is handed its inputs without a read.
//
// A start writes everything a worker call on its first state is sent: the
// run, the state's execution and the run's first attributes (the start's
// data and search attributes, and the system search attributes). The run
// is new, so nobody else can have written to it before the commit: a read
// after the commit would return those rows as the transaction wrote them,
// in the form the store's columns give them back (rowfmt's times, fresh
// byte slices, keyword arrays as stored, Format where stores differ). A
// later update of the run or of one of its executions in the same
// transaction leaves the read to the store.
//
// The package owns no SQL and no transaction: each store records what its
// Tx methods write and asks Read after its commit. It imports the engine's
// types, rowfmt's column conventions and search's value types only.
package born

import (
	"bytes"
	"math"
	"slices"
	"strings"

	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/store/rowfmt"
	"github.com/iwf-server/iwf-server/search"
)

// Format says how a store's columns give back what it wrote, where the
// stores differ. The zero Format gives back every value as written.
type Format struct {
	// RealDoubles: DOUBLE search attributes are kept in a SQLite REAL
	// column, which stores an integral value as an integer: -0 reads back
	// as 0, and NaN is stored as NULL (no value).
	RealDoubles bool
}

// double returns v as f's column reads it back; nil for NULL.
func (f Format) double(v *float64) *float64 {
	if v == nil {
		return nil
	}
	d := *v
	if f.RealDoubles {
		if math.IsNaN(d) {
			return nil
		}
		if d == 0 {
			d = 0 // -0 as 0
		}
	}
	return &d
}

// Rows are the rows a transaction inserted for runs it created. Every
// execution insert is kept (a start inserts its run last), as a value: an
// answer's transaction pays a slice append for it, nothing more. The zero
// Rows is empty and reads back with the zero Format.
type Rows struct {
	// Format is how the store reads back what it wrote.
	Format Format

	runs  []engine.Run
	execs []engine.Execution
	// data and search are the attributes written, in order: a later write
	// of a key replaces an earlier one. An answer's transaction records
	// its attributes too (it cannot know that no run is created after
	// them): an append each.
	data   []attribute
	search []searchAttribute
	// changed lists runs whose row or executions were updated, or whose
	// write failed in a way the rows cannot tell.
	changed []string
}

type attribute struct {
	runID string
	a     engine.Attribute
}

type searchAttribute struct {
	runID string
	a     engine.SearchAttribute
}

// Reset empties b, keeping its Format, for a transaction run again.
func (b *Rows) Reset() {
	b.runs, b.execs, b.data, b.search, b.changed = b.runs[:0], b.execs[:0], b.data[:0], b.search[:0], b.changed[:0]
}

// DataAttributes records a write of data attributes of runID, in order.
func (b *Rows) DataAttributes(runID string, attrs []*engine.Attribute) {
	for _, a := range attrs {
		b.data = append(b.data, attribute{runID, *a})
	}
}

// SearchAttributes records a write of search attributes of runID, in
// order.
func (b *Rows) SearchAttributes(runID string, attrs []*engine.SearchAttribute) {
	for _, a := range attrs {
		b.search = append(b.search, searchAttribute{runID, *a})
	}
}

// Run records the insert of a run.
func (b *Rows) Run(r *engine.Run) {
	b.runs = append(b.runs, *r)
}

// Executions records the insert of executions.
func (b *Rows) Executions(xs []*engine.Execution) {
	for _, x := range xs {
		b.execs = append(b.execs, *x)
	}
}

// Change records that runID, or one of its executions, was updated (or
// written otherwise than the other methods record): Read then leaves its
// reads to the store.
func (b *Rows) Change(runID string) {
	if !slices.Contains(b.changed, runID) {
		b.changed = append(b.changed, runID)
	}
}

// Wrote reports whether b recorded any write of runID: its insert, an
// insert of one of its executions, an attribute or a change.
func (b *Rows) Wrote(runID string) bool {
	return slices.Contains(b.changed, runID) ||
		slices.ContainsFunc(b.runs, func(r engine.Run) bool { return r.RunID == runID }) ||
		slices.ContainsFunc(b.execs, func(x engine.Execution) bool { return x.RunID == runID }) ||
		slices.ContainsFunc(b.data, func(d attribute) bool { return d.runID == runID }) ||
		slices.ContainsFunc(b.search, func(s searchAttribute) bool { return s.runID == runID })
}

// Read returns what the store's ReadForCall would read for runID,
// executionID after the commit, or nil when the store must be asked: the
// run was not created by the transaction, the execution not inserted by
// it, or either was updated since.
func (b *Rows) Read(runID, executionID string) *engine.CallRead {
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
	for _, d := range lastOfRun(b.data, runID, func(d attribute) (string, string) { return d.runID, d.a.Key }) {
		out.DataAttributes = append(out.DataAttributes, &engine.Attribute{Key: d.a.Key, Value: bytes.Clone(d.a.Value)})
	}
	for _, sa := range lastOfRun(b.search, runID, func(s searchAttribute) (string, string) { return s.runID, s.a.Key }) {
		out.SearchAttributes = append(out.SearchAttributes, b.Format.readBack(sa.a))
	}
	return out
}

// lastOfRun returns the last write of each key of runID among writes, in
// key order (byte order, as both stores sort keys).
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
// ReadForCall reads it back: the time in whole nanoseconds within the
// stored range, the double as f's column keeps it, keyword array elements
// in a fresh slice (empty, not nil, when there are none), no elements on
// other types.
func (f Format) readBack(a engine.SearchAttribute) *engine.SearchAttribute {
	out := &engine.SearchAttribute{Key: a.Key, ValueType: a.ValueType, Raw: bytes.Clone(a.Raw),
		String: clonePtr(a.String), Int: clonePtr(a.Int), Double: f.double(a.Double), Bool: clonePtr(a.Bool)}
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
