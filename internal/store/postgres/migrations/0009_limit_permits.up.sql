-- Permits of the concurrency and rate limits on worker calls
-- (engine.PermitStore). A row is one waiter (the task id of a call) held
-- in, or queued for, one limit key, leased to the node (owner) that holds
-- or awaits it until expires_at (unix ms); an expired row is deleted by
-- the next acquisition of its key, so a dead node's permits come back.
-- The queue is served in (waiting_since, waiter) order.
CREATE TABLE limit_permits (
    limit_key     text    NOT NULL,
    waiter        bigint  NOT NULL,
    owner         text    NOT NULL,
    waiting_since bigint  NOT NULL,
    held          boolean NOT NULL DEFAULT false,
    expires_at    bigint  NOT NULL,
    PRIMARY KEY (limit_key, waiter)
);
CREATE INDEX limit_permits_waiter ON limit_permits (waiter);
CREATE INDEX limit_permits_owner ON limit_permits (owner);

-- One row per limit key: the lock that serialises the acquisitions of the
-- key across nodes, and a rate limit's token bucket.
CREATE TABLE limit_buckets (
    limit_key  text             PRIMARY KEY,
    tokens     double precision NOT NULL,
    updated_at bigint           NOT NULL
);
