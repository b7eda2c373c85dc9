-- The docs table of w1-doc.sql: a run's row with the runs table's eight indexes, a version for the
-- blind check, the owner of the call it is owed and a partial index over work that falls due.
-- Apply it to a database that holds the store's schema (a W1 run of iwf-bench with -keep leaves one).
DROP TABLE IF EXISTS docs;
CREATE TABLE docs (run_id text COLLATE "C" PRIMARY KEY, workflow_id text COLLATE "C" NOT NULL, workflow_type text COLLATE "C" NOT NULL,
  status text COLLATE "C" NOT NULL, started_at bigint NOT NULL, closed_at bigint NOT NULL DEFAULT 0,
  version bigint NOT NULL, next_due bigint, owner text COLLATE "C", data bytea) WITH (fillfactor = 80);
CREATE INDEX docs_closed_at ON docs (closed_at) WHERE closed_at <> 0;
CREATE INDEX docs_search_order ON docs ((CASE WHEN closed_at = 0 THEN 9223372036854775807 ELSE closed_at END), started_at, run_id);
CREATE INDEX docs_search_status_order ON docs (status, (CASE WHEN closed_at = 0 THEN 9223372036854775807 ELSE closed_at END), started_at, run_id);
CREATE INDEX docs_search_type_order ON docs (workflow_type, (CASE WHEN closed_at = 0 THEN 9223372036854775807 ELSE closed_at END), started_at, run_id);
CREATE INDEX docs_search_type_start ON docs (workflow_type, started_at, run_id);
CREATE INDEX docs_started_at ON docs (started_at, run_id);
CREATE INDEX docs_workflow_id ON docs (workflow_id);
CREATE INDEX docs_due ON docs (next_due) WHERE next_due IS NOT NULL;
