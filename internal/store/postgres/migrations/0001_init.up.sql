-- Initial schema of the PostgreSQL store.
--
-- Times are BIGINT unix milliseconds (UTC); the zero time.Time is 0.
-- Opaque engine payloads (JSON) are BYTEA; a nil []byte is NULL.
-- Identifier and key columns use the "C" collation: byte order, like
-- SQLite and Go, whatever the database's default collation.
-- There are no foreign keys: rows of a run are removed by run_id explicitly,
-- and a foreign key check would take a share lock on the run row that the
-- engine holds FOR UPDATE in other transactions.

CREATE TABLE workflows (
    workflow_id    TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    current_run_id TEXT COLLATE "C" NOT NULL DEFAULT ''
);

CREATE TABLE runs (
    run_id        TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    workflow_id   TEXT COLLATE "C" NOT NULL,
    workflow_type TEXT COLLATE "C" NOT NULL,
    status        TEXT COLLATE "C" NOT NULL,
    started_at    BIGINT NOT NULL,
    closed_at     BIGINT NOT NULL DEFAULT 0,
    data          BYTEA
);
CREATE INDEX runs_workflow_id ON runs (workflow_id);
CREATE INDEX runs_workflow_type ON runs (workflow_type);
CREATE INDEX runs_status ON runs (status);
CREATE INDEX runs_started_at ON runs (started_at);
CREATE INDEX runs_closed_at ON runs (closed_at);

-- id keeps insertion order (ExecutionList).
CREATE TABLE executions (
    id           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id       TEXT COLLATE "C" NOT NULL,
    execution_id TEXT COLLATE "C" NOT NULL,
    state_id     TEXT COLLATE "C" NOT NULL,
    status       TEXT COLLATE "C" NOT NULL,
    created_at   BIGINT NOT NULL,
    data         BYTEA,
    UNIQUE (run_id, execution_id)
);

CREATE TABLE messages (
    id         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id     TEXT COLLATE "C" NOT NULL,
    kind       INTEGER NOT NULL,
    channel    TEXT COLLATE "C" NOT NULL,
    value      BYTEA,
    created_at BIGINT NOT NULL
);
CREATE INDEX messages_channel ON messages (run_id, kind, channel, id);

CREATE TABLE data_attributes (
    run_id TEXT COLLATE "C" NOT NULL,
    key    TEXT COLLATE "C" NOT NULL,
    value  BYTEA,
    PRIMARY KEY (run_id, key)
);

-- One typed column is set according to value_type; KEYWORD_ARRAY elements
-- live in search_attribute_strings.
CREATE TABLE search_attributes (
    run_id       TEXT COLLATE "C" NOT NULL,
    key          TEXT COLLATE "C" NOT NULL,
    value_type   TEXT COLLATE "C" NOT NULL,
    raw          BYTEA,
    string_value TEXT COLLATE "C",
    int_value    BIGINT,
    double_value DOUBLE PRECISION,
    bool_value   BOOLEAN,
    time_value   BIGINT,
    PRIMARY KEY (run_id, key)
);
CREATE INDEX search_attributes_string ON search_attributes (key, string_value);
CREATE INDEX search_attributes_int ON search_attributes (key, int_value);
CREATE INDEX search_attributes_double ON search_attributes (key, double_value);
CREATE INDEX search_attributes_bool ON search_attributes (key, bool_value);
CREATE INDEX search_attributes_time ON search_attributes (key, time_value);

CREATE TABLE search_attribute_strings (
    run_id TEXT COLLATE "C" NOT NULL,
    key    TEXT COLLATE "C" NOT NULL,
    pos    INTEGER NOT NULL,
    value  TEXT COLLATE "C" NOT NULL,
    PRIMARY KEY (run_id, key, pos)
);
CREATE INDEX search_attribute_strings_value ON search_attribute_strings (key, value);

CREATE TABLE tasks (
    id               BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id           TEXT COLLATE "C" NOT NULL,
    workflow_id      TEXT COLLATE "C" NOT NULL,
    execution_id     TEXT COLLATE "C" NOT NULL DEFAULT '',
    kind             TEXT COLLATE "C" NOT NULL,
    due_at           BIGINT NOT NULL,
    attempt          INTEGER NOT NULL,
    first_attempt_at BIGINT NOT NULL DEFAULT 0,
    lease_owner      TEXT COLLATE "C",
    lease_expires_at BIGINT NOT NULL DEFAULT 0,
    data             BYTEA
);
-- TaskClaim reads unleased tasks by due time and leased ones by expiry, each
-- from its own partial index, so tasks in flight (leased, not expired) cost
-- a claim nothing however many there are.
CREATE INDEX tasks_claim_unleased ON tasks (due_at, id) WHERE lease_owner IS NULL;
CREATE INDEX tasks_claim_expired ON tasks (lease_expires_at) WHERE lease_owner IS NOT NULL;
CREATE INDEX tasks_lease_owner ON tasks (lease_owner) WHERE lease_owner IS NOT NULL;
CREATE INDEX tasks_run ON tasks (run_id, execution_id);

CREATE TABLE history (
    id           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id       TEXT COLLATE "C" NOT NULL,
    at           BIGINT NOT NULL,
    type         TEXT COLLATE "C" NOT NULL,
    execution_id TEXT COLLATE "C" NOT NULL DEFAULT '',
    data         BYTEA
);
CREATE INDEX history_run ON history (run_id, id);
