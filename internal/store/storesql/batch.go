package storesql

import "github.com/iwf-server/iwf-server/internal/store/rowfmt"

// Batches are the statements of the batch tables (engine.Batch*), rendered
// for one dialect. Each documents its parameters; the caller binds lists
// with List and limits with Dialect.Limit.
type Batches struct {
	// Get: $1 batch id.
	Get string
	// List: $1 before this seq (<= 0: from the newest), $2 limit; newest
	// first.
	List string
	// ItemList: $1 batch id, $2 status ("" any), $3 after this seq, $4
	// limit.
	ItemList string
	// Insert: the 13 columns, in order; returns seq.
	Insert string
	// ItemInsert: $1 batch id, then the items: on a dialect with
	// ArrayParameters $2 their seqs, $3 workflow ids, $4 run ids (three
	// arrays); otherwise $2 one JSON array of [seq, workflowId, runId].
	ItemInsert string
	// Matched: $1 items added to the batch $2.
	Matched string
	// SetState: $1 state, $2 message, $3 now (ms), $4 closing (the state
	// is final: the batch closes and its lease ends), $5 batch id, $6
	// the states it may leave (List).
	SetState string
	// ItemFinish: $1 status, $2 failure, $3 batch id, $4 seq, of a
	// pending item.
	ItemFinish string
	// Count: $1 done, $2 failed, $3 now, $4 batch id, of a running batch.
	Count string
	// Abandon cancels the batches left starting by an owner whose lease
	// expired: $1 message, $2 now.
	Abandon string
	// Claim leases the oldest running batch nobody holds: $1 owner, $2
	// lease expiry, $3 now; returns the batch. Two claimers on PostgreSQL
	// skip each other's row (SkipLocked).
	Claim string
	// Renew: $1 lease expiry, $2 batch id, $3 owner.
	Renew string
	// Release ends the leases of owner $1 ("" any) on batch $2 ("" any).
	Release string
}

// BatchStatements returns the statements of the batch tables for d.
func BatchStatements(d Dialect) Batches {
	itemInsert := `INSERT INTO batch_items (batch_id, seq, workflow_id, run_id, status)
		SELECT $1, value ->> 0, value ->> 1, value ->> 2, 'pending' FROM json_each($2)`
	if d.ArrayParameters() {
		itemInsert = `INSERT INTO batch_items (batch_id, seq, workflow_id, run_id, status)
		SELECT $1, s, w, r, 'pending' FROM unnest($2::bigint[], $3::text[], $4::text[]) AS u(s, w, r)`
	}
	r := d.Render
	return Batches{
		Get: r(`SELECT ` + rowfmt.BatchColumns + ` FROM batches WHERE batch_id = $1`),
		List: r(`SELECT ` + rowfmt.BatchColumns + ` FROM batches
		WHERE (CAST($1 AS bigint) <= 0 OR seq < $1) ORDER BY seq DESC LIMIT $2`),
		ItemList: r(`SELECT ` + rowfmt.BatchItemColumns + ` FROM batch_items
		WHERE batch_id = $1 AND (CAST($2 AS text) = '' OR status = $2) AND seq > $3 ORDER BY seq LIMIT $4`),
		Insert: r(`INSERT INTO batches (batch_id, query, operation, options, reason, rps, state, message,
		created_by, created_at, updated_at, lease_owner, lease_expires_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) RETURNING seq`),
		ItemInsert: r(itemInsert),
		Matched:    r(`UPDATE batches SET matched = matched + $1 WHERE batch_id = $2`),
		SetState: r(`UPDATE batches SET state = $1, message = $2, updated_at = $3,
		closed_at = CASE WHEN $4 THEN $3 ELSE closed_at END,
		lease_owner = CASE WHEN $4 THEN NULL ELSE lease_owner END,
		lease_expires_at = CASE WHEN $4 THEN 0 ELSE lease_expires_at END
		WHERE batch_id = $5 AND state` + d.In(6, "text")),
		ItemFinish: r(`UPDATE batch_items SET status = $1, failure = $2
		WHERE batch_id = $3 AND seq = $4 AND status = 'pending'`),
		Count: r(`UPDATE batches SET done = done + $1, failed = failed + $2, updated_at = $3
		WHERE batch_id = $4 AND state = 'running'`),
		Abandon: r(`UPDATE batches SET state = 'cancelled', message = $1, updated_at = $2, closed_at = $2,
		lease_owner = NULL, lease_expires_at = 0
		WHERE state = 'starting' AND (lease_owner IS NULL OR lease_expires_at < $2)`),
		Claim: r(`UPDATE batches SET lease_owner = $1, lease_expires_at = $2
		WHERE seq = (SELECT seq FROM batches WHERE state = 'running' AND (lease_owner IS NULL OR lease_expires_at < $3)
			ORDER BY seq LIMIT 1` + d.SkipLocked() + `)
		RETURNING ` + rowfmt.BatchColumns),
		Renew: r(`UPDATE batches SET lease_expires_at = $1 WHERE batch_id = $2 AND lease_owner = $3`),
		Release: r(`UPDATE batches SET lease_owner = NULL, lease_expires_at = 0
		WHERE lease_owner IS NOT NULL AND (CAST($1 AS text) = '' OR lease_owner = $1) AND (CAST($2 AS text) = '' OR batch_id = $2)`),
	}
}
