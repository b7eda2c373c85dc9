-- The concurrency and rate limits on worker calls, as set at run time
-- (engine.LimitSetting; POST /api/v1/limit/set and /delete, `iwf limit`).
-- A row is one limit, keyed as its permits are ("worker:HOST:PORT",
-- "rate:HOST:PORT", "type:TYPE"); value NULL records a limit that was
-- removed, so that a server flag naming it does not bring it back at the
-- next start (flags only fill keys that have no row). source is 'flag'
-- for a row a start stored from the server's flags, 'api' for one set or
-- removed through the API.
CREATE TABLE limit_settings (
    limit_key  TEXT    PRIMARY KEY,
    value      REAL,
    source     TEXT    NOT NULL,
    updated_by TEXT    NOT NULL DEFAULT '',
    updated_at INTEGER NOT NULL
);
