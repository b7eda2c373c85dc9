package sqlite

import (
	"context"

	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/store/born"
)

// A start writes everything the worker call of its first state is sent:
// the transaction hands those rows over after the commit, as qCallRead
// would read them (package born), and the call reads nothing. Any other
// call's read is made at the end of the transaction, just before its
// COMMIT, when no other Update waits for the writer (readTail): the
// writer's connection has the pages in its cache, where a read of its own
// would start a read transaction on another connection and fetch from the
// WAL every page the commit changed. When Updates wait, the read is left
// to the call, off the writer, which every write waits for.
//
// The writer runs several Update functions in one transaction (group
// commit), so what a function keeps for after the commit is its own
// (fnRecord, in its writeReq): a function that fails, rolled back to its
// savepoint, leaves nothing behind, and a function run again starts
// afresh. The reads are handed over only once the COMMIT that carried the
// function succeeded, before its Update returns.

// format is how the store's columns give back what it wrote: DOUBLE
// search attributes are kept in a REAL column.
var format = born.Format{RealDoubles: true}

// fnRecord is what one Update function keeps for after the commit.
type fnRecord struct {
	// born holds the rows the function inserted for the runs it created.
	born born.Rows
	// reads are the reads the function asked for (ReadForCallAfterCommit);
	// once it returned, those whose answer born knows, answered.
	reads []knownRead
}

// knownRead is a read asked for by ReadForCallAfterCommit.
type knownRead struct {
	runID, executionID string
	done               func(*engine.CallRead)
	// read is the answer, set when the function returned (settle) or at
	// the end of the transaction (readTail).
	read *engine.CallRead
	// tail says read was made at the end of the transaction: it holds
	// whatever any function of the batch wrote.
	tail bool
}

// begin empties r for a run of its function.
func (r *fnRecord) begin() {
	r.born.Reset()
	r.born.Format = format
	clear(r.reads)
	r.reads = r.reads[:0]
}

// settle answers the reads asked for from the rows born, once the function
// returned (a write after the request counts); the others wait for
// readTail.
func (r *fnRecord) settle() {
	for i := range r.reads {
		r.reads[i].read = r.born.Read(r.reads[i].runID, r.reads[i].executionID)
	}
}

// readTail makes, in t at the end of its transaction, the reads of the
// committed functions of batch that their rows born did not answer, or
// answered for a run another function of the batch wrote to (results are
// the functions' results, nil: ran and kept). A read that fails is left
// to the engine.
func readTail(ctx context.Context, t *txn, batch []*writeReq, results []error) {
	for i, r := range batch {
		if results[i] != nil {
			continue
		}
		for j := range r.rec.reads {
			rd := &r.rec.reads[j]
			if rd.read != nil && !wroteElsewhere(batch, results, i, rd.runID) {
				continue
			}
			rd.read = nil
			rows, err := t.query(ctx, qCallRead, rd.runID, rd.executionID)
			if err != nil {
				continue
			}
			if read, err := scanCallRead(rows); err == nil && read.Run != nil {
				rd.read, rd.tail = read, true
			}
		}
	}
}

// changed records a write of runID that the rows born cannot follow (an
// update, a failed write): its reads are left to the engine.
func (t *txn) changed(runID string) {
	if t.rec != nil {
		t.rec.born.Change(runID)
	}
}

// ReadForCallAfterCommit implements engine.CallPrefetcher for the first
// call of a run the transaction created: the answer is known from the
// rows it wrote (package born) and handed to done after the commit. Any
// other read is left to the engine, which reads when the call runs.
func (t *txn) ReadForCallAfterCommit(runID, executionID string, done func(*engine.CallRead)) {
	if t.rec == nil {
		return
	}
	t.rec.reads = append(t.rec.reads, knownRead{runID: runID, executionID: executionID, done: done})
}

// deliverReads hands the known reads of the functions of a committed batch
// to their callers; results are the functions' results (nil: committed).
// A read answered from the rows one function created, of a run that
// another function of the batch wrote to, is left to the engine: the
// commit made that write visible too, so those rows are no longer what a
// read would return. A read made at the end of the transaction holds every
// write of the batch.
func deliverReads(batch []*writeReq, results []error) {
	for i, r := range batch {
		if results[i] != nil {
			continue
		}
		for _, rd := range r.rec.reads {
			if rd.read != nil && (rd.tail || !wroteElsewhere(batch, results, i, rd.runID)) {
				rd.done(rd.read)
			}
		}
	}
}

// wroteElsewhere reports whether a committed function of batch other than
// the i-th wrote to runID.
func wroteElsewhere(batch []*writeReq, results []error, i int, runID string) bool {
	for j, r := range batch {
		if j != i && results[j] == nil && r.rec.born.Wrote(runID) {
			return true
		}
	}
	return false
}
