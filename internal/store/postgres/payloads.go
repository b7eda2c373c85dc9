package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/store/rowfmt"
	"github.com/iwf-server/iwf-server/internal/store/storesql"
)

// The external object records (migration 0013), with storesql's
// statements.

var objectsSQL = storesql.ExternalObjectStatements(storesql.PostgreSQL)

func scanPayloadRef(r pgx.Rows) (*engine.PayloadRef, error) {
	var p engine.PayloadRef
	if err := r.Scan(&p.StoreID, &p.Path); err != nil {
		return nil, err
	}
	return &p, nil
}

func payloadRefs(rows pgx.Rows, err error) ([]engine.PayloadRef, error) {
	refs, err := collect(rows, err, scanPayloadRef)
	if err != nil {
		return nil, err
	}
	out := make([]engine.PayloadRef, len(refs))
	for i, r := range refs {
		out[i] = *r
	}
	return out, nil
}

// PayloadOrphans implements engine.ReadTx.
func (t *txn) PayloadOrphans(ctx context.Context, storeIDs []string, limit int) ([]engine.PayloadRef, error) {
	if storeIDs == nil {
		storeIDs = []string{}
	}
	out, err := payloadRefs(t.tx.Query(ctx, objectsSQL.Orphans, storeIDs, storesql.PostgreSQL.Limit(limit)))
	return out, wrap("PayloadOrphans", err)
}

// PayloadList implements engine.ReadTx.
func (t *txn) PayloadList(ctx context.Context, runID string) ([]engine.PayloadRef, error) {
	out, err := payloadRefs(t.tx.Query(ctx, objectsSQL.List, runID))
	return out, wrap("PayloadList", err)
}

// PayloadAdd implements engine.Tx: the objects travel as two arrays,
// queued with the transaction's commit.
func (t *txn) PayloadAdd(ctx context.Context, refs []engine.PayloadRef, now time.Time) error {
	if len(refs) == 0 {
		return nil
	}
	paths, stores := make([]string, len(refs)), make([]string, len(refs))
	for i, r := range refs {
		paths[i], stores[i] = r.Path, r.StoreID
	}
	t.tx.later("PayloadAdd", objectsSQL.Add, nil, paths, stores, rowfmt.ToMs(now))
	return nil
}

// PayloadKeep implements engine.Tx: queued, with its count checked in
// the database (iwf_kept, SQLSTATE IW003: engine.ErrPayloadGone) so that
// a failed check holds back the commit it travels with.
func (t *txn) PayloadKeep(ctx context.Context, runID string, paths []string) error {
	if len(paths) == 0 {
		return nil
	}
	t.tx.touch(runID)
	t.tx.later("PayloadKeep", objectsSQL.Keep, nil, runID, paths, int64(len(paths)))
	return nil
}

// PayloadLink implements engine.Tx.
func (t *txn) PayloadLink(ctx context.Context, runID string, paths []string, now time.Time) error {
	if len(paths) == 0 {
		return nil
	}
	t.tx.later("PayloadLink", objectsSQL.Link, nil, runID, paths, rowfmt.ToMs(now))
	return nil
}

// PayloadCopy implements engine.Tx.
func (t *txn) PayloadCopy(ctx context.Context, fromRunID, toRunID string, now time.Time) error {
	t.tx.later("PayloadCopy", objectsSQL.Copy, nil, fromRunID, toRunID, rowfmt.ToMs(now))
	return nil
}

// PayloadExpire implements engine.Tx.
func (t *txn) PayloadExpire(ctx context.Context, before time.Time, limit int) (int, error) {
	tag, err := t.tx.Exec(ctx, objectsSQL.Expire, rowfmt.ToMs(before), storesql.PostgreSQL.Limit(limit))
	if err != nil {
		return 0, wrap("PayloadExpire", err)
	}
	return int(tag.RowsAffected()), nil
}

// PayloadForget implements engine.Tx.
func (t *txn) PayloadForget(ctx context.Context, paths []string) error {
	if len(paths) == 0 {
		return nil
	}
	t.tx.later("PayloadForget", objectsSQL.Forget, nil, paths)
	return nil
}
