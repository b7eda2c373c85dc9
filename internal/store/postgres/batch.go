package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/store/rowfmt"
)

// The batch tables (migration 0008).

func scanBatch(r pgx.Rows) (*engine.Batch, error)         { return rowfmt.ScanBatch(r) }
func scanBatchItem(r pgx.Rows) (*engine.BatchItem, error) { return rowfmt.ScanBatchItem(r) }

// BatchGet implements engine.ReadTx.
func (t *txn) BatchGet(ctx context.Context, batchID string) (*engine.Batch, error) {
	b, err := rowfmt.ScanBatch(t.tx.QueryRow(ctx, `SELECT `+rowfmt.BatchColumns+` FROM batches WHERE batch_id = $1`, batchID))
	return b, wrap("BatchGet", notFound(err))
}

// BatchList implements engine.ReadTx.
func (t *txn) BatchList(ctx context.Context, beforeSeq int64, limit int) ([]*engine.Batch, error) {
	rows, err := t.tx.Query(ctx, `SELECT `+rowfmt.BatchColumns+` FROM batches
		WHERE ($1::bigint <= 0 OR seq < $1) ORDER BY seq DESC LIMIT $2`, beforeSeq, pgLimit(limit))
	out, err := collect(rows, err, scanBatch)
	return out, wrap("BatchList", err)
}

// BatchItemList implements engine.ReadTx.
func (t *txn) BatchItemList(ctx context.Context, batchID string, status engine.BatchItemStatus, afterSeq int64, limit int) ([]*engine.BatchItem, error) {
	rows, err := t.tx.Query(ctx, `SELECT `+rowfmt.BatchItemColumns+` FROM batch_items
		WHERE batch_id = $1 AND ($2::text = '' OR status = $2) AND seq > $3 ORDER BY seq LIMIT $4`,
		batchID, string(status), afterSeq, pgLimit(limit))
	out, err := collect(rows, err, scanBatchItem)
	return out, wrap("BatchItemList", err)
}

// BatchInsert implements engine.Tx.
func (t *txn) BatchInsert(ctx context.Context, b *engine.Batch) error {
	err := t.tx.QueryRow(ctx, `INSERT INTO batches (batch_id, query, operation, options, reason, rps, state, message,
		created_by, created_at, updated_at, lease_owner, lease_expires_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) RETURNING seq`,
		b.ID, b.Query, b.Operation, b.Options, b.Reason, b.RPS, string(b.State), b.Message,
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
	t.tx.later("BatchItemInsert", `INSERT INTO batch_items (batch_id, seq, workflow_id, run_id, status)
		SELECT $1, s, w, r, 'pending' FROM unnest($2::bigint[], $3::text[], $4::text[]) AS u(s, w, r)`, nil, batchID, seqs, wfs, runs)
	t.tx.later("BatchItemInsert", `UPDATE batches SET matched = matched + $1 WHERE batch_id = $2`, nil, int64(len(items)), batchID)
	return nil
}

// BatchSetState implements engine.Tx.
func (t *txn) BatchSetState(ctx context.Context, batchID string, from []engine.BatchState, to engine.BatchState, message string, now time.Time) (bool, error) {
	tag, err := t.tx.Exec(ctx, `UPDATE batches SET state = $1, message = $2, updated_at = $3,
		closed_at = CASE WHEN $4 THEN $3 ELSE closed_at END,
		lease_owner = CASE WHEN $4 THEN NULL ELSE lease_owner END,
		lease_expires_at = CASE WHEN $4 THEN 0 ELSE lease_expires_at END
		WHERE batch_id = $5 AND state = ANY($6::text[])`,
		string(to), message, rowfmt.ToMs(now), rowfmt.BatchClosing(to), batchID, rowfmt.BatchStateStrings(from))
	return tag.RowsAffected() > 0, wrap("BatchSetState", err)
}

// BatchItemFinish implements engine.Tx: the item first (a concurrent
// finisher of the same item waits for its row lock, then finds it no longer
// pending), then the counters of a running batch.
func (t *txn) BatchItemFinish(ctx context.Context, batchID string, seq int64, status engine.BatchItemStatus, failure string, now time.Time) (bool, error) {
	tag, err := t.tx.Exec(ctx, `UPDATE batch_items SET status = $1, failure = $2
		WHERE batch_id = $3 AND seq = $4 AND status = 'pending'`, string(status), failure, batchID, seq)
	if err != nil || tag.RowsAffected() == 0 {
		return false, wrap("BatchItemFinish", err)
	}
	done, failed := rowfmt.BatchCounts(status)
	tag, err = t.tx.Exec(ctx, `UPDATE batches SET done = done + $1, failed = failed + $2, updated_at = $3
		WHERE batch_id = $4 AND state = 'running'`, done, failed, rowfmt.ToMs(now), batchID)
	return tag.RowsAffected() > 0, wrap("BatchItemFinish", err)
}

// BatchClaim implements engine.Tx; SKIP LOCKED keeps two claimers apart.
func (t *txn) BatchClaim(ctx context.Context, owner string, now time.Time, lease time.Duration) (*engine.Batch, error) {
	ms := rowfmt.ToMs(now)
	t.tx.later("BatchClaim", `UPDATE batches SET state = 'cancelled', message = $1, updated_at = $2, closed_at = $2,
		lease_owner = NULL, lease_expires_at = 0
		WHERE state = 'starting' AND (lease_owner IS NULL OR lease_expires_at < $2)`, nil, rowfmt.BatchAbandoned, ms)
	b, err := rowfmt.ScanBatch(t.tx.QueryRow(ctx, `UPDATE batches SET lease_owner = $1, lease_expires_at = $2
		WHERE seq = (SELECT seq FROM batches WHERE state = 'running' AND (lease_owner IS NULL OR lease_expires_at < $3)
			ORDER BY seq LIMIT 1 FOR UPDATE SKIP LOCKED)
		RETURNING `+rowfmt.BatchColumns, owner, rowfmt.ToMs(now.Add(lease)), ms))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	return b, wrap("BatchClaim", err)
}

// BatchRenew implements engine.Tx.
func (t *txn) BatchRenew(ctx context.Context, batchID, owner string, expires time.Time) (bool, error) {
	tag, err := t.tx.Exec(ctx, `UPDATE batches SET lease_expires_at = $1 WHERE batch_id = $2 AND lease_owner = $3`,
		rowfmt.ToMs(expires), batchID, owner)
	return tag.RowsAffected() > 0, wrap("BatchRenew", err)
}

// BatchRelease implements engine.Tx.
func (t *txn) BatchRelease(ctx context.Context, owner, batchID string) (int64, error) {
	tag, err := t.tx.Exec(ctx, `UPDATE batches SET lease_owner = NULL, lease_expires_at = 0
		WHERE lease_owner IS NOT NULL AND ($1::text = '' OR lease_owner = $1) AND ($2::text = '' OR batch_id = $2)`, owner, batchID)
	return tag.RowsAffected(), wrap("BatchRelease", err)
}

// pgLimit is a LIMIT value: <= 0 means none (NULL).
func pgLimit(limit int) *int64 {
	if limit <= 0 {
		return nil
	}
	n := int64(limit)
	return &n
}
