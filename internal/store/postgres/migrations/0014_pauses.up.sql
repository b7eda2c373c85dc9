-- migrate: no transaction
--
-- Incident controls (engine/pause.go). A paused scope is one row: every
-- run of a workflow type ("type:NAME") or every run whose worker URL names
-- a host ("host:HOST:PORT") makes no worker call while its row exists.
-- Runs paused by themselves keep their pause in their own record.
--
-- A worker call held by a pause (Tx.TaskPark): its task is unleased and
-- due far beyond any claim, and parked names what holds it, the scope or
-- "run". NULL for every other task; the index holds the parked ones only,
-- which a resume makes due again (Tx.TaskUnpark). A release that does not
-- know the column leaves it alone (its inserts name their columns).
--
-- The statements run one at a time, outside a transaction (the first line
-- above), so that the index on tasks is built CONCURRENTLY: a plain CREATE
-- INDEX would stop every task write for as long as the build takes, which
-- on a store of many sleeping timers is not a moment. Each statement may
-- run again after a stopped run: the first ones are IF NOT EXISTS, and the
-- index is dropped (an invalid one a cancelled build left) and built again.
CREATE TABLE IF NOT EXISTS pauses (
    scope     TEXT COLLATE "C" PRIMARY KEY,
    reason    TEXT COLLATE "C" NOT NULL DEFAULT '',
    paused_by TEXT COLLATE "C" NOT NULL DEFAULT '',
    paused_at BIGINT NOT NULL
);
ALTER TABLE tasks ADD COLUMN IF NOT EXISTS parked TEXT COLLATE "C";
DROP INDEX CONCURRENTLY IF EXISTS tasks_parked;
CREATE INDEX CONCURRENTLY tasks_parked ON tasks (parked, id) WHERE parked IS NOT NULL;
