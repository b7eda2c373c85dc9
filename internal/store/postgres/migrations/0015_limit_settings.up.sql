-- The concurrency and rate limits on worker calls, as set at run time
-- (engine.LimitSetting; POST /api/v1/limit/set and /delete, `iwf limit`).
-- A row is one limit, keyed as its permits are ("worker:HOST:PORT",
-- "rate:HOST:PORT", "type:TYPE"); value NULL records a limit that was
-- removed, so that a server flag naming it does not bring it back at the
-- next start (flags only fill keys that have no row). source is 'flag'
-- for a row a start stored from the server's flags, 'api' for one set or
-- removed through the API. Every node reads the whole table (a few rows)
-- when it starts, when the change feed says it changed, and at a short
-- interval.
CREATE TABLE limit_settings (
    limit_key  TEXT COLLATE "C" PRIMARY KEY,
    value      DOUBLE PRECISION,
    source     TEXT COLLATE "C" NOT NULL,
    updated_by TEXT COLLATE "C" NOT NULL DEFAULT '',
    updated_at BIGINT NOT NULL
);
