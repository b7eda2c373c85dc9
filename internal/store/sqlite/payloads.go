package sqlite

import (
	"context"
	"database/sql"
	"time"

	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/store/rowfmt"
	"github.com/iwf-server/iwf-server/internal/store/storesql"
)

// The external object records (migration 0009), with storesql's
// statements.
var (
	objectsSQL      = storesql.ExternalObjectStatements(storesql.SQLite)
	qObjectsAdd     = query(objectsSQL.Add)
	qObjectsKeep    = query(objectsSQL.Keep)
	qObjectsLink    = query(objectsSQL.Link)
	qObjectsCopy    = query(objectsSQL.Copy)
	qObjectsExpire  = query(objectsSQL.Expire)
	qObjectsOrphans = query(objectsSQL.Orphans)
	qObjectsForget  = query(objectsSQL.Forget)
	qObjectsList    = query(objectsSQL.List)
)

func scanPayloadRef(s rowfmt.Scanner) (*engine.PayloadRef, error) {
	var r engine.PayloadRef
	if err := s.Scan(&r.StoreID, &r.Path); err != nil {
		return nil, err
	}
	return &r, nil
}

func payloadRefs(rows *sql.Rows, err error) ([]engine.PayloadRef, error) {
	refs, err := collectRows(rows, err, scanPayloadRef)
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
	out, err := payloadRefs(t.query(ctx, qObjectsOrphans, storesql.List(storesql.SQLite, storeIDs), storesql.SQLite.Limit(limit)))
	return out, wrap("PayloadOrphans", err)
}

// PayloadList implements engine.ReadTx.
func (t *txn) PayloadList(ctx context.Context, runID string) ([]engine.PayloadRef, error) {
	out, err := payloadRefs(t.query(ctx, qObjectsList, runID))
	return out, wrap("PayloadList", err)
}

// PayloadAdd implements engine.Tx: the objects travel as one JSON array
// of [path, storeId].
func (t *txn) PayloadAdd(ctx context.Context, refs []engine.PayloadRef, now time.Time) error {
	if len(refs) == 0 {
		return nil
	}
	rows := make([][2]string, len(refs))
	for i, r := range refs {
		rows[i] = [2]string{r.Path, r.StoreID}
	}
	list, err := jsonList(rows)
	if err != nil {
		return wrap("PayloadAdd", err)
	}
	_, err = t.exec(ctx, qObjectsAdd, list, rowfmt.ToMs(now))
	return wrap("PayloadAdd", err)
}

// PayloadKeep implements engine.Tx: the writer is this transaction's
// alone, so the count it changed is checked at once.
func (t *txn) PayloadKeep(ctx context.Context, runID string, paths []string) error {
	if len(paths) == 0 {
		return nil
	}
	res, err := t.exec(ctx, qObjectsKeep, runID, storesql.List(storesql.SQLite, paths))
	if err != nil {
		return wrap("PayloadKeep", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return wrap("PayloadKeep", err)
	}
	if n != int64(len(paths)) {
		return wrap("PayloadKeep", engine.ErrPayloadGone)
	}
	return nil
}

// PayloadLink implements engine.Tx.
func (t *txn) PayloadLink(ctx context.Context, runID string, paths []string, now time.Time) error {
	if len(paths) == 0 {
		return nil
	}
	_, err := t.exec(ctx, qObjectsLink, runID, storesql.List(storesql.SQLite, paths), rowfmt.ToMs(now))
	return wrap("PayloadLink", err)
}

// PayloadCopy implements engine.Tx.
func (t *txn) PayloadCopy(ctx context.Context, fromRunID, toRunID string, now time.Time) error {
	_, err := t.exec(ctx, qObjectsCopy, fromRunID, toRunID, rowfmt.ToMs(now))
	return wrap("PayloadCopy", err)
}

// PayloadExpire implements engine.Tx.
func (t *txn) PayloadExpire(ctx context.Context, before time.Time, limit int) (int, error) {
	res, err := t.exec(ctx, qObjectsExpire, rowfmt.ToMs(before), storesql.SQLite.Limit(limit))
	if err != nil {
		return 0, wrap("PayloadExpire", err)
	}
	n, err := res.RowsAffected()
	return int(n), wrap("PayloadExpire", err)
}

// PayloadForget implements engine.Tx.
func (t *txn) PayloadForget(ctx context.Context, paths []string) error {
	if len(paths) == 0 {
		return nil
	}
	_, err := t.exec(ctx, qObjectsForget, storesql.List(storesql.SQLite, paths))
	return wrap("PayloadForget", err)
}
