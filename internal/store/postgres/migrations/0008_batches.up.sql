-- Batch operations (POST /api/v1/batch/start): a batch applies one
-- operation to every run a search matched when it started. seq orders
-- batches (newest first in lists) and, in batch_items, the runs of a batch
-- in match order. The runner of a batch holds its lease; an item's status
-- changes from pending in the same transaction as the operation's effect
-- on its run, together with the batch's counters.
CREATE TABLE batches (
    seq              BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    batch_id         TEXT COLLATE "C" NOT NULL UNIQUE,
    query            TEXT COLLATE "C" NOT NULL,
    operation        TEXT COLLATE "C" NOT NULL,
    options          BYTEA,
    reason           TEXT COLLATE "C" NOT NULL DEFAULT '',
    rps              DOUBLE PRECISION NOT NULL,
    state            TEXT COLLATE "C" NOT NULL,
    message          TEXT COLLATE "C" NOT NULL DEFAULT '',
    matched          BIGINT NOT NULL DEFAULT 0,
    done             BIGINT NOT NULL DEFAULT 0,
    failed           BIGINT NOT NULL DEFAULT 0,
    created_by       TEXT COLLATE "C" NOT NULL DEFAULT '',
    created_at       BIGINT NOT NULL,
    updated_at       BIGINT NOT NULL,
    closed_at        BIGINT NOT NULL DEFAULT 0,
    lease_owner      TEXT COLLATE "C",
    lease_expires_at BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX batches_state ON batches (state, seq);

CREATE TABLE batch_items (
    batch_id    TEXT COLLATE "C" NOT NULL,
    seq         BIGINT NOT NULL,
    workflow_id TEXT COLLATE "C" NOT NULL,
    run_id      TEXT COLLATE "C" NOT NULL,
    status      TEXT COLLATE "C" NOT NULL,
    failure     TEXT COLLATE "C" NOT NULL DEFAULT '',
    PRIMARY KEY (batch_id, seq)
);
CREATE INDEX batch_items_status ON batch_items (batch_id, status, seq);
