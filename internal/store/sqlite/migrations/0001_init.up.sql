-- Initial schema of the SQLite store.
--
-- Times are INTEGER unix milliseconds (UTC); the zero time.Time is 0.
-- Opaque engine payloads (JSON) are TEXT; a nil []byte is NULL, an empty one ''.
-- There are no foreign keys: rows of a run are removed by run_id explicitly,
-- and the engine writes a run and its children in one transaction.

CREATE TABLE workflows (
    workflow_id    TEXT NOT NULL PRIMARY KEY,
    current_run_id TEXT NOT NULL DEFAULT ''
) WITHOUT ROWID;

CREATE TABLE runs (
    run_id        TEXT    NOT NULL PRIMARY KEY,
    workflow_id   TEXT    NOT NULL,
    workflow_type TEXT    NOT NULL,
    status        TEXT    NOT NULL,
    started_at    INTEGER NOT NULL,
    closed_at     INTEGER NOT NULL DEFAULT 0,
    data          TEXT
) WITHOUT ROWID;
CREATE INDEX runs_workflow_id ON runs (workflow_id);
CREATE INDEX runs_workflow_type ON runs (workflow_type);
CREATE INDEX runs_status ON runs (status);
CREATE INDEX runs_started_at ON runs (started_at);
CREATE INDEX runs_closed_at ON runs (closed_at);

-- id keeps insertion order (ExecutionList).
CREATE TABLE executions (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id       TEXT    NOT NULL,
    execution_id TEXT    NOT NULL,
    state_id     TEXT    NOT NULL,
    status       TEXT    NOT NULL,
    created_at   INTEGER NOT NULL,
    data         TEXT,
    UNIQUE (run_id, execution_id)
);

-- AUTOINCREMENT: ids are never reused, so a stale id never names a new row.
CREATE TABLE messages (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id     TEXT    NOT NULL,
    kind       INTEGER NOT NULL,
    channel    TEXT    NOT NULL,
    value      TEXT,
    created_at INTEGER NOT NULL
);
CREATE INDEX messages_channel ON messages (run_id, kind, channel, id);

CREATE TABLE data_attributes (
    run_id TEXT NOT NULL,
    key    TEXT NOT NULL,
    value  TEXT,
    PRIMARY KEY (run_id, key)
) WITHOUT ROWID;

-- One typed column is set according to value_type; KEYWORD_ARRAY elements
-- live in search_attribute_strings.
CREATE TABLE search_attributes (
    run_id       TEXT NOT NULL,
    key          TEXT NOT NULL,
    value_type   TEXT NOT NULL,
    raw          TEXT,
    string_value TEXT,
    int_value    INTEGER,
    double_value REAL,
    bool_value   INTEGER,
    time_value   INTEGER,
    PRIMARY KEY (run_id, key)
) WITHOUT ROWID;
CREATE INDEX search_attributes_string ON search_attributes (key, string_value);
CREATE INDEX search_attributes_int ON search_attributes (key, int_value);
CREATE INDEX search_attributes_double ON search_attributes (key, double_value);
CREATE INDEX search_attributes_bool ON search_attributes (key, bool_value);
CREATE INDEX search_attributes_time ON search_attributes (key, time_value);

CREATE TABLE search_attribute_strings (
    run_id TEXT    NOT NULL,
    key    TEXT    NOT NULL,
    pos    INTEGER NOT NULL,
    value  TEXT    NOT NULL,
    PRIMARY KEY (run_id, key, pos)
) WITHOUT ROWID;
CREATE INDEX search_attribute_strings_value ON search_attribute_strings (key, value);

CREATE TABLE tasks (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id           TEXT    NOT NULL,
    workflow_id      TEXT    NOT NULL,
    execution_id     TEXT    NOT NULL DEFAULT '',
    kind             TEXT    NOT NULL,
    due_at           INTEGER NOT NULL,
    attempt          INTEGER NOT NULL,
    first_attempt_at INTEGER NOT NULL DEFAULT 0,
    lease_owner      TEXT,
    lease_expires_at INTEGER NOT NULL DEFAULT 0,
    data             TEXT
);
-- TaskClaim reads unleased tasks by due time and leased ones by expiry, each
-- from its own partial index, so tasks in flight (leased, not expired) cost
-- a claim nothing however many there are.
CREATE INDEX tasks_claim_unleased ON tasks (due_at, id) WHERE lease_owner IS NULL;
CREATE INDEX tasks_claim_expired ON tasks (lease_expires_at) WHERE lease_owner IS NOT NULL;
CREATE INDEX tasks_lease_owner ON tasks (lease_owner) WHERE lease_owner IS NOT NULL;
CREATE INDEX tasks_run ON tasks (run_id, execution_id);

CREATE TABLE history (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id       TEXT    NOT NULL,
    at           INTEGER NOT NULL,
    type         TEXT    NOT NULL,
    execution_id TEXT    NOT NULL DEFAULT '',
    data         TEXT
);
CREATE INDEX history_run ON history (run_id, id);
