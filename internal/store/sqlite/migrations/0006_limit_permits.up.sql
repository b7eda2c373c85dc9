-- Permits of the concurrency and rate limits on worker calls
-- (engine.PermitStore). A row is one waiter (the task id of a call) held
-- in, or queued for, one limit key, leased to the node (owner) that holds
-- or awaits it until expires_at (unix ms); an expired row is deleted by
-- the next acquisition of its key, so a dead node's permits come back.
-- The queue is served in (waiting_since, waiter) order.
CREATE TABLE limit_permits (
    limit_key     TEXT    NOT NULL,
    waiter        INTEGER  NOT NULL,
    owner         TEXT    NOT NULL,
    waiting_since INTEGER  NOT NULL,
    held          INTEGER NOT NULL DEFAULT 0,
    expires_at    INTEGER  NOT NULL,
    PRIMARY KEY (limit_key, waiter)
);
CREATE INDEX limit_permits_waiter ON limit_permits (waiter);
CREATE INDEX limit_permits_owner ON limit_permits (owner);

-- One row per limit key: the lock that serialises the acquisitions of the
-- key across nodes, and a rate limit's token bucket.
CREATE TABLE limit_buckets (
    limit_key  TEXT             PRIMARY KEY,
    tokens     REAL NOT NULL,
    updated_at INTEGER           NOT NULL
);
