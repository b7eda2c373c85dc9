-- Permits of the concurrency and rate limits on worker calls
-- (engine.PermitStore). A row is one waiter (the task id of a call) held
-- in, or queued for, one limit key, leased to the node (owner) that holds
-- or awaits it until expires_at (unix ms); an expired row is deleted by
-- the next acquisition of its key, so a dead node's permits come back.
-- The queue is served in (waiting_since, waiter) order.
CREATE TABLE limit_permits (
    limit_key     text    COLLATE "C" NOT NULL,
    waiter        bigint  NOT NULL,
    owner         text    COLLATE "C" NOT NULL,
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
    limit_key  text COLLATE "C" PRIMARY KEY,
    tokens     double precision NOT NULL,
    updated_at bigint           NOT NULL
);

-- iwf_permit_acquire is engine.PermitStore.PermitAcquire in one statement
-- (engine.PermitRequest.Decide is the rule): it locks the key's bucket
-- row, deletes the key's expired rows, queues the waiter (keeping its
-- first waiting_since), counts the held permits and the waiters ahead, and
-- grants a concurrency permit (held until released) or a rate token
-- (consumed; the waiter leaves the queue). A live row of the same waiter
-- owned by another node is not taken over. One round trip keeps the key's
-- lock, which serialises its acquisitions across nodes, as short as can be.
CREATE FUNCTION iwf_permit_acquire(p_key text, p_waiter bigint, p_owner text, p_since bigint, p_now bigint,
        p_lease bigint, p_concurrency integer, p_rate double precision, p_burst double precision,
        OUT granted boolean, OUT free integer, OUT ahead integer, OUT retry_ms bigint)
LANGUAGE plpgsql AS $$
DECLARE
    b_tokens  double precision;
    b_updated bigint;
    my_since  bigint;
    mine      boolean;
    n_held    integer;
    burst     double precision := greatest(p_burst, 1);
BEGIN
    granted := false; free := 0; ahead := 0; retry_ms := 0;
    INSERT INTO limit_buckets AS b (limit_key, tokens, updated_at) VALUES (p_key, burst, p_now)
        ON CONFLICT (limit_key) DO UPDATE SET limit_key = EXCLUDED.limit_key
        RETURNING b.tokens, b.updated_at INTO b_tokens, b_updated;
    DELETE FROM limit_permits WHERE limit_key = p_key AND expires_at <= p_now AND waiter <> p_waiter;
    INSERT INTO limit_permits AS p (limit_key, waiter, owner, waiting_since, held, expires_at)
        VALUES (p_key, p_waiter, p_owner, p_since, false, p_now + p_lease)
        ON CONFLICT (limit_key, waiter) DO UPDATE SET owner = EXCLUDED.owner, expires_at = EXCLUDED.expires_at,
            held = p.held AND p.owner = EXCLUDED.owner AND p.expires_at > p_now
            WHERE p.owner = EXCLUDED.owner OR p.expires_at <= p_now
        RETURNING p.waiting_since, p.held INTO my_since, mine;
    IF NOT FOUND THEN
        -- Another node holds or awaits this permit for the same waiter (it
        -- held the task before its lease expired): wait until that row is
        -- released or expires, never count the permit twice.
        RETURN;
    END IF;
    IF mine THEN
        granted := true;
        RETURN;
    END IF;
    SELECT count(*) FILTER (WHERE q.held),
           count(*) FILTER (WHERE NOT q.held AND (q.waiting_since, q.waiter) < (my_since, p_waiter))
        INTO n_held, ahead
        FROM limit_permits q WHERE q.limit_key = p_key AND q.waiter <> p_waiter AND q.expires_at > p_now;
    IF p_concurrency > 0 THEN
        IF n_held + ahead < p_concurrency THEN
            granted := true;
            free := p_concurrency - n_held - ahead - 1;
            UPDATE limit_permits SET held = true WHERE limit_key = p_key AND waiter = p_waiter;
        END IF;
        RETURN;
    END IF;
    IF p_now > b_updated THEN
        b_tokens := least(burst, b_tokens + (p_now - b_updated) / 1000.0 * p_rate);
        b_updated := p_now;
    END IF;
    IF ahead < floor(b_tokens + 1e-9) THEN
        granted := true;
        b_tokens := b_tokens - 1;
        DELETE FROM limit_permits WHERE limit_key = p_key AND waiter = p_waiter;
    ELSE
        retry_ms := ceil(((ahead + 1) - b_tokens) / p_rate * 1000);
    END IF;
    UPDATE limit_buckets SET tokens = b_tokens, updated_at = b_updated WHERE limit_key = p_key;
END
$$;
