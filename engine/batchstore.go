package engine

import (
	"context"
	"time"
)

// BatchState is the state of a batch operation.
type BatchState string

// The batch states. A batch is starting while its matching runs are being
// stored, running until every item is done or failed (or it is
// cancelled), and then completed.
const (
	BatchStarting  BatchState = "starting"
	BatchRunning   BatchState = "running"
	BatchCancelled BatchState = "cancelled"
	BatchCompleted BatchState = "completed"
)

// BatchItemStatus is the status of one run of a batch.
type BatchItemStatus string

// The item statuses.
const (
	BatchItemPending BatchItemStatus = "pending"
	BatchItemDone    BatchItemStatus = "done"
	BatchItemFailed  BatchItemStatus = "failed"
)

// Batch is one stored batch operation. Options is engine-owned JSON (the
// operation's parameters); the store keeps it opaque.
type Batch struct {
	// Seq orders batches: a later batch has a larger Seq. The store sets
	// it on insert.
	Seq       int64
	ID        string
	Query     string
	Operation string
	Options   []byte
	Reason    string
	// RPS is the rate the runner applies the operation at, runs per second.
	RPS   float64
	State BatchState
	// Message says why a batch ended early ("" otherwise).
	Message string
	// Matched, Done and Failed count the batch's items: all of them, those
	// applied and those that failed.
	Matched   int64
	Done      int64
	Failed    int64
	CreatedBy string
	CreatedAt time.Time
	UpdatedAt time.Time
	ClosedAt  time.Time // zero until cancelled or completed
	// LeaseOwner is the node working the batch ("" when none), until
	// LeaseExpiresAt.
	LeaseOwner     string
	LeaseExpiresAt time.Time
}

// BatchItem is one run of a batch: a run the batch's query matched when
// the batch started.
type BatchItem struct {
	BatchID string
	// Seq is the item's place in the batch (match order), from 1.
	Seq        int64
	WorkflowID string
	RunID      string
	Status     BatchItemStatus
	// Failure says why the operation failed on the run ("" otherwise).
	Failure string
}

// batchReadTx is the read side of the batch tables (part of ReadTx).
type batchReadTx interface {
	// BatchGet returns a batch, or ErrNotFound.
	BatchGet(ctx context.Context, batchID string) (*Batch, error)
	// BatchList returns up to limit batches whose Seq is below beforeSeq
	// (all when beforeSeq <= 0), newest first.
	BatchList(ctx context.Context, beforeSeq int64, limit int) ([]*Batch, error)
	// BatchItemList returns up to limit items of a batch whose Seq is
	// above afterSeq and whose status is status (any when ""), in Seq
	// order.
	BatchItemList(ctx context.Context, batchID string, status BatchItemStatus, afterSeq int64, limit int) ([]*BatchItem, error)
}

// batchTx is the write side of the batch tables (part of Tx).
type batchTx interface {
	// BatchInsert stores a new batch and sets its Seq.
	BatchInsert(ctx context.Context, b *Batch) error
	// BatchItemInsert stores items of a batch (pending, with their Seq)
	// and adds their number to the batch's Matched.
	BatchItemInsert(ctx context.Context, batchID string, items []*BatchItem) error
	// BatchSetState moves a batch whose state is one of from to state to,
	// with message, and reports whether it did. Entering cancelled or
	// completed sets ClosedAt to now and clears the lease.
	BatchSetState(ctx context.Context, batchID string, from []BatchState, to BatchState, message string, now time.Time) (bool, error)
	// BatchItemFinish moves a pending item of a running batch to status
	// (done or failed) with failure, and counts it in the batch's Done or
	// Failed. It reports false, changing nothing, when the item is not
	// pending or the batch is not running; the caller then rolls the
	// transaction back. Two transactions finishing one item never both
	// succeed.
	BatchItemFinish(ctx context.Context, batchID string, seq int64, status BatchItemStatus, failure string, now time.Time) (bool, error)
	// BatchClaim leases to owner, until now+lease, the oldest running
	// batch that no one holds (unleased, or its lease expired before now)
	// and returns it; nil when there is none. Two concurrent claimers never
	// receive the same batch. It first cancels, with a message, the
	// starting batches whose lease expired: their creator stopped before
	// it stored every matching run.
	BatchClaim(ctx context.Context, owner string, now time.Time, lease time.Duration) (*Batch, error)
	// BatchRenew extends owner's lease on a batch to expires and reports
	// whether owner still held it.
	BatchRenew(ctx context.Context, batchID, owner string, expires time.Time) (bool, error)
	// BatchRelease clears the leases owner holds (on batchID only, unless
	// it is ""), so that another node may claim the batches at once. An
	// owner "" clears every lease: a single-process store (SQLite) does it
	// at start-up.
	BatchRelease(ctx context.Context, owner, batchID string) (int64, error)
}
