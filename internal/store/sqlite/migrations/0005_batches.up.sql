-- Batch operations (POST /api/v1/batch/start): a batch applies one
-- operation to every run a search matched when it started. seq orders
-- batches (newest first in lists) and, in batch_items, the runs of a batch
-- in match order. The runner of a batch holds its lease; an item's status
-- changes from pending in the same transaction as the operation's effect
-- on its run, together with the batch's counters.
CREATE TABLE batches (
    seq              INTEGER PRIMARY KEY AUTOINCREMENT,
    batch_id         TEXT    NOT NULL UNIQUE,
    query            TEXT    NOT NULL,
    operation        TEXT    NOT NULL,
    options          TEXT,
    reason           TEXT    NOT NULL DEFAULT '',
    rps              REAL    NOT NULL,
    state            TEXT    NOT NULL,
    message          TEXT    NOT NULL DEFAULT '',
    matched          INTEGER NOT NULL DEFAULT 0,
    done             INTEGER NOT NULL DEFAULT 0,
    failed           INTEGER NOT NULL DEFAULT 0,
    created_by       TEXT    NOT NULL DEFAULT '',
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    closed_at        INTEGER NOT NULL DEFAULT 0,
    lease_owner      TEXT,
    lease_expires_at INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX batches_state ON batches (state, seq);

CREATE TABLE batch_items (
    batch_id    TEXT    NOT NULL,
    seq         INTEGER NOT NULL,
    workflow_id TEXT    NOT NULL,
    run_id      TEXT    NOT NULL,
    status      TEXT    NOT NULL,
    failure     TEXT    NOT NULL DEFAULT '',
    PRIMARY KEY (batch_id, seq)
) WITHOUT ROWID;
CREATE INDEX batch_items_status ON batch_items (batch_id, status, seq);
