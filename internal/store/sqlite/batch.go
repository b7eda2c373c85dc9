package sqlite

import (
	"context"
	"database/sql"
	"time"

	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/store/rowfmt"
	"github.com/iwf-server/iwf-server/internal/store/storesql"
)

// The batch tables (migration 0005), with storesql's statements.
var (
	batchSQL         = storesql.BatchStatements(storesql.SQLite)
	qBatchGet        = query(batchSQL.Get)
	qBatchList       = query(batchSQL.List)
	qBatchItemList   = query(batchSQL.ItemList)
	qBatchInsert     = query(batchSQL.Insert)
	qBatchItemInsert = query(batchSQL.ItemInsert)
	qBatchMatched    = query(batchSQL.Matched)
	qBatchSetState   = query(batchSQL.SetState)
	qBatchItemFinish = query(batchSQL.ItemFinish)
	qBatchCount      = query(batchSQL.Count)
	qBatchAbandon    = query(batchSQL.Abandon)
	qBatchClaim      = query(batchSQL.Claim)
	qBatchRenew      = query(batchSQL.Renew)
	qBatchRelease    = query(batchSQL.Release)
)

// BatchGet implements engine.ReadTx.
func (t *txn) BatchGet(ctx context.Context, batchID string) (*engine.Batch, error) {
	b, err := rowfmt.ScanBatch(t.queryRow(ctx, qBatchGet, batchID))
	return b, wrap("BatchGet", notFound(err))
}

// BatchList implements engine.ReadTx.
func (t *txn) BatchList(ctx context.Context, beforeSeq int64, limit int) ([]*engine.Batch, error) {
	rows, err := t.query(ctx, qBatchList, beforeSeq, storesql.SQLite.Limit(limit))
	out, err := collectRows(rows, err, rowfmt.ScanBatch)
	return out, wrap("BatchList", err)
}

// BatchItemList implements engine.ReadTx.
func (t *txn) BatchItemList(ctx context.Context, batchID string, status engine.BatchItemStatus, afterSeq int64, limit int) ([]*engine.BatchItem, error) {
	rows, err := t.query(ctx, qBatchItemList, batchID, string(status), afterSeq, storesql.SQLite.Limit(limit))
	out, err := collectRows(rows, err, rowfmt.ScanBatchItem)
	return out, wrap("BatchItemList", err)
}

// BatchInsert implements engine.Tx.
func (t *txn) BatchInsert(ctx context.Context, b *engine.Batch) error {
	err := t.queryRow(ctx, qBatchInsert, b.ID, b.Query, b.Operation, text(b.Options), b.Reason, b.RPS, string(b.State), b.Message,
		b.CreatedBy, rowfmt.ToMs(b.CreatedAt), rowfmt.ToMs(b.UpdatedAt), nullString(b.LeaseOwner), rowfmt.ToMs(b.LeaseExpiresAt)).Scan(&b.Seq)
	return wrap("BatchInsert", err)
}

// BatchItemInsert implements engine.Tx: the items travel as one JSON
// array of [seq, workflowId, runId].
func (t *txn) BatchItemInsert(ctx context.Context, batchID string, items []*engine.BatchItem) error {
	if len(items) == 0 {
		return nil
	}
	rows := make([][3]any, len(items))
	for i, it := range items {
		rows[i] = [3]any{it.Seq, it.WorkflowID, it.RunID}
	}
	list, err := jsonList(rows)
	if err != nil {
		return wrap("BatchItemInsert", err)
	}
	if _, err := t.exec(ctx, qBatchItemInsert, batchID, list); err != nil {
		return wrap("BatchItemInsert", err)
	}
	_, err = t.exec(ctx, qBatchMatched, len(items), batchID)
	return wrap("BatchItemInsert", err)
}

// BatchSetState implements engine.Tx.
func (t *txn) BatchSetState(ctx context.Context, batchID string, from []engine.BatchState, to engine.BatchState, message string, now time.Time) (bool, error) {
	ok, err := affected(t.exec(ctx, qBatchSetState, string(to), message, rowfmt.ToMs(now), rowfmt.BatchClosing(to), batchID,
		storesql.List(storesql.SQLite, rowfmt.BatchStateStrings(from))))
	return ok, wrap("BatchSetState", err)
}

// BatchItemFinish implements engine.Tx: the item first, then the counters
// of a running batch.
func (t *txn) BatchItemFinish(ctx context.Context, batchID string, seq int64, status engine.BatchItemStatus, failure string, now time.Time) (bool, error) {
	ok, err := affected(t.exec(ctx, qBatchItemFinish, string(status), failure, batchID, seq))
	if err != nil || !ok {
		return false, wrap("BatchItemFinish", err)
	}
	done, failed := rowfmt.BatchCounts(status)
	ok, err = affected(t.exec(ctx, qBatchCount, done, failed, rowfmt.ToMs(now), batchID))
	return ok, wrap("BatchItemFinish", err)
}

// BatchClaim implements engine.Tx.
func (t *txn) BatchClaim(ctx context.Context, owner string, now time.Time, lease time.Duration) (*engine.Batch, error) {
	ms := rowfmt.ToMs(now)
	if _, err := t.exec(ctx, qBatchAbandon, rowfmt.BatchAbandoned, ms); err != nil {
		return nil, wrap("BatchClaim", err)
	}
	b, err := rowfmt.ScanBatch(t.queryRow(ctx, qBatchClaim, owner, rowfmt.ToMs(now.Add(lease)), ms))
	if err == sql.ErrNoRows {
		return nil, nil
	}
	return b, wrap("BatchClaim", err)
}

// BatchRenew implements engine.Tx.
func (t *txn) BatchRenew(ctx context.Context, batchID, owner string, expires time.Time) (bool, error) {
	ok, err := affected(t.exec(ctx, qBatchRenew, rowfmt.ToMs(expires), batchID, owner))
	return ok, wrap("BatchRenew", err)
}

// BatchRelease implements engine.Tx.
func (t *txn) BatchRelease(ctx context.Context, owner, batchID string) (int64, error) {
	res, err := t.exec(ctx, qBatchRelease, owner, batchID)
	if err != nil {
		return 0, wrap("BatchRelease", err)
	}
	n, err := res.RowsAffected()
	return n, wrap("BatchRelease", err)
}

// collectRows reads every row with scan.
func collectRows[T any](rows *sql.Rows, err error, scan func(rowfmt.Scanner) (*T, error)) ([]*T, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}
