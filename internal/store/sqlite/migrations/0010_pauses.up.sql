-- Incident controls (engine/pause.go). A paused scope is one row: every
-- run of a workflow type ("type:NAME") or every run whose worker URL names
-- a host ("host:HOST:PORT") makes no worker call while its row exists.
-- Runs paused by themselves keep their pause in their own record.
CREATE TABLE pauses (
    scope     TEXT    PRIMARY KEY,
    reason    TEXT    NOT NULL DEFAULT '',
    paused_by TEXT    NOT NULL DEFAULT '',
    paused_at INTEGER NOT NULL
) WITHOUT ROWID;

-- A worker call held by a pause (Tx.TaskPark): its task is unleased and
-- due far beyond any claim, and parked names what holds it, the scope or
-- "run". NULL for every other task; the index holds the parked ones only,
-- which a resume makes due again (Tx.TaskUnpark).
ALTER TABLE tasks ADD COLUMN parked TEXT;
CREATE INDEX tasks_parked ON tasks (parked, id) WHERE parked IS NOT NULL;
