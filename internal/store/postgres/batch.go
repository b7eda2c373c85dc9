package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/store/rowfmt"
	"github.com/iwf-server/iwf-server/internal/store/storesql"
)

// The batch tables (migration 0008), with storesql's statements.

func scanBatch(r pgx.Rows) (*engine.Batch, error)         { return rowfmt.ScanBatch(r) }
func scanBatchItem(r pgx.Rows) (*engine.BatchItem, error) { return rowfmt.ScanBatchItem(r) }

// batchSQL are the statements of the batch tables (storesql.Batches).
var batchSQL = storesql.BatchStatements(storesql.PostgreSQL)

// BatchGet implements engine.ReadTx.
func (t *txn) BatchGet(ctx context.Context, batchID string) (*engine.Batch, error) {
	b, err := rowfmt.ScanBatch(t.tx.QueryRow(ctx, batchSQL.Get, batchID))
	return b, wrap("BatchGet", notFound(err))
}

// BatchList implements engine.ReadTx.
func (t *txn) BatchList(ctx context.Context, beforeSeq int64, limit int) ([]*engine.Batch, error) {
	rows, err := t.tx.Query(ctx, batchSQL.List, beforeSeq, storesql.PostgreSQL.Limit(limit))
	out, err := collect(rows, err, scanBatch)
	return out, wrap("BatchList", err)
}

// BatchItemList implements engine.ReadTx.
func (t *txn) BatchItemList(ctx context.Context, batchID string, status engine.BatchItemStatus, afterSeq int64, limit int) ([]*engine.BatchItem, error) {
	rows, err := t.tx.Query(ctx, batchSQL.ItemList, batchID, string(status), afterSeq, storesql.PostgreSQL.Limit(limit))
	out, err := collect(rows, err, scanBatchItem)
	return out, wrap("BatchItemList", err)
}

// BatchInsert implements engine.Tx.
func (t *txn) BatchInsert(ctx context.Context, b *engine.Batch) error {
	err := t.tx.QueryRow(ctx, batchSQL.Insert, b.ID, b.Query, b.Operation, b.Options, b.Reason, b.RPS, string(b.State), b.Message,
		b.CreatedBy, rowfmt.ToMs(b.CreatedAt), rowfmt.ToMs(b.UpdatedAt), nullString(b.LeaseOwner), rowfmt.ToMs(b.LeaseExpiresAt)).Scan(&b.Seq)
	return wrap("BatchInsert", err)
}

// BatchItemInsert implements engine.Tx: the items travel as three arrays,
// queued with the transaction's next statement or its commit.
func (t *txn) BatchItemInsert(ctx context.Context, batchID string, items []*engine.BatchItem) error {
	if len(items) == 0 {
		return nil
	}
	seqs, wfs, runs := make([]int64, len(items)), make([]string, len(items)), make([]string, len(items))
	for i, it := range items {
		seqs[i], wfs[i], runs[i] = it.Seq, it.WorkflowID, it.RunID
	}
	t.tx.later("BatchItemInsert", batchSQL.ItemInsert, nil, batchID, seqs, wfs, runs)
	t.tx.later("BatchItemInsert", batchSQL.Matched, nil, int64(len(items)), batchID)
	return nil
}

// BatchSetState implements engine.Tx.
func (t *txn) BatchSetState(ctx context.Context, batchID string, from []engine.BatchState, to engine.BatchState, message string, now time.Time) (bool, error) {
	tag, err := t.tx.Exec(ctx, batchSQL.SetState, string(to), message, rowfmt.ToMs(now), rowfmt.BatchClosing(to), batchID,
		storesql.List(storesql.PostgreSQL, rowfmt.BatchStateStrings(from)))
	return tag.RowsAffected() > 0, wrap("BatchSetState", err)
}

// BatchItemFinish implements engine.Tx: the item first (a concurrent
// finisher of the same item waits for its row lock, then finds it no longer
// pending), then the counters of a running batch.
func (t *txn) BatchItemFinish(ctx context.Context, batchID string, seq int64, status engine.BatchItemStatus, failure string, now time.Time) (bool, error) {
	tag, err := t.tx.Exec(ctx, batchSQL.ItemFinish, string(status), failure, batchID, seq)
	if err != nil || tag.RowsAffected() == 0 {
		return false, wrap("BatchItemFinish", err)
	}
	done, failed := rowfmt.BatchCounts(status)
	tag, err = t.tx.Exec(ctx, batchSQL.Count, done, failed, rowfmt.ToMs(now), batchID)
	return tag.RowsAffected() > 0, wrap("BatchItemFinish", err)
}

// BatchClaim implements engine.Tx; SKIP LOCKED keeps two claimers apart.
func (t *txn) BatchClaim(ctx context.Context, owner string, now time.Time, lease time.Duration) (*engine.Batch, error) {
	ms := rowfmt.ToMs(now)
	t.tx.later("BatchClaim", batchSQL.Abandon, nil, rowfmt.BatchAbandoned, ms)
	b, err := rowfmt.ScanBatch(t.tx.QueryRow(ctx, batchSQL.Claim, owner, rowfmt.ToMs(now.Add(lease)), ms))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	return b, wrap("BatchClaim", err)
}

// BatchRenew implements engine.Tx.
func (t *txn) BatchRenew(ctx context.Context, batchID, owner string, expires time.Time) (bool, error) {
	tag, err := t.tx.Exec(ctx, batchSQL.Renew, rowfmt.ToMs(expires), batchID, owner)
	return tag.RowsAffected() > 0, wrap("BatchRenew", err)
}

// BatchRelease implements engine.Tx.
func (t *txn) BatchRelease(ctx context.Context, owner, batchID string) (int64, error) {
	tag, err := t.tx.Exec(ctx, batchSQL.Release, owner, batchID)
	return tag.RowsAffected(), wrap("BatchRelease", err)
}
