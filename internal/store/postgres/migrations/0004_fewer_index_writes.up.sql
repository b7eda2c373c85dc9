-- Fewer index entries per row written. Every workflow inserts history,
-- execution and task rows and inserts and closes a run row; each index on
-- those tables is one more entry (and WAL record) per row, and an index on
-- an ever-growing identity column makes every backend insert into the same
-- rightmost page. The indexes below were kept for no query.
--
-- Upgrading rebuilds two primary keys, which locks history and executions
-- for as long as that takes (seconds per million rows).

-- history is read by run, in id order, only: (run_id, id) becomes the key,
-- and the index on id alone goes.
ALTER TABLE history DROP CONSTRAINT history_pkey;
DROP INDEX history_run;
ALTER TABLE history ADD CONSTRAINT history_pkey PRIMARY KEY (run_id, id);

-- executions are found by (run_id, execution_id), which is unique; id keeps
-- the insertion order within a run (ExecutionList sorts the few rows of a
-- run by it) and needs no index of its own.
ALTER TABLE executions DROP CONSTRAINT executions_pkey;
ALTER TABLE executions DROP CONSTRAINT executions_run_id_execution_id_key;
ALTER TABLE executions ADD CONSTRAINT executions_pkey PRIMARY KEY (run_id, execution_id);

-- Leases are renewed and released by owner a few times a minute; the partial
-- index of leased tasks (tasks_claim_expired) bounds those scans to the
-- tasks in flight, so an index on the owner only costs every task insert.
DROP INDEX tasks_lease_owner;

-- Searches on the close time always say closed_at <> 0 (searchsql), so open
-- runs need no entry: the run's insert skips this index.
DROP INDEX runs_closed_at;
CREATE INDEX runs_closed_at ON runs (closed_at) WHERE closed_at <> 0;
