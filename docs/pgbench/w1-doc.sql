-- w1-now.sql's workflow with one row per run: the run's row (doc-setup.sql's docs, with the runs'
-- indexes) carries its executions and the call it is owed, and every answer rewrites it, checked by
-- its version; history stays a row per event. Nothing reads behind a COMMIT: the row is the server's.
\set n random(1, 1000000000000)
\startpipeline
BEGIN;
SELECT set_config('statement_timeout', '30000', true);
INSERT INTO workflows (workflow_id, current_run_id) VALUES ('w' || :n, 'r' || :n);
INSERT INTO docs (run_id, workflow_id, workflow_type, status, started_at, closed_at, version, next_due, owner, data) VALUES ('r' || :n, 'w' || :n, 'BenchW1', 'RUNNING', :n, 0, 1, NULL, 'owner', convert_to(repeat('x', 600), 'UTF8'));
INSERT INTO history (run_id, at, type, execution_id, data) SELECT r, a, ty, e, d FROM unnest(ARRAY['r' || :n, 'r' || :n]::text[], ARRAY[1,1]::bigint[], ARRAY['WorkflowStarted','StateExecutionStarted']::text[], ARRAY['','S1-1']::text[], ARRAY[convert_to(repeat('x', 80), 'UTF8'), convert_to(repeat('x', 80), 'UTF8')]::bytea[]) WITH ORDINALITY AS u(r, a, ty, e, d, o) ORDER BY o RETURNING id;
COMMIT;
\endpipeline
\startpipeline
BEGIN;
WITH u AS (UPDATE docs SET version = 2, data = convert_to(repeat('y', 700), 'UTF8') WHERE run_id = 'r' || :n AND version = 1 RETURNING 1) SELECT iwf_expect((SELECT count(*) FROM u) = 1, 'run');
INSERT INTO history (run_id, at, type, execution_id, data) SELECT r, a, ty, e, d FROM unnest(ARRAY['r' || :n, 'r' || :n]::text[], ARRAY[1,1]::bigint[], ARRAY['ExecuteCompleted','StateExecutionStarted']::text[], ARRAY['S1-1','S2-1']::text[], ARRAY[convert_to(repeat('x', 80), 'UTF8'), convert_to(repeat('x', 80), 'UTF8')]::bytea[]) WITH ORDINALITY AS u(r, a, ty, e, d, o) ORDER BY o RETURNING id;
COMMIT;
\endpipeline
\startpipeline
BEGIN;
WITH u AS (UPDATE docs SET version = 3, status = 'COMPLETED', closed_at = (:n)::bigint + 1, owner = NULL, data = convert_to(repeat('z', 700), 'UTF8') WHERE run_id = 'r' || :n AND version = 2 RETURNING 1) SELECT iwf_expect((SELECT count(*) FROM u) = 1, 'run');
INSERT INTO history (run_id, at, type, execution_id, data) SELECT r, a, ty, e, d FROM unnest(ARRAY['r' || :n, 'r' || :n]::text[], ARRAY[1,1]::bigint[], ARRAY['ExecuteCompleted','WorkflowClosed']::text[], ARRAY['S2-1','']::text[], ARRAY[convert_to(repeat('x', 80), 'UTF8'), convert_to(repeat('x', 80), 'UTF8')]::bytea[]) WITH ORDINALITY AS u(r, a, ty, e, d, o) ORDER BY o RETURNING id;
COMMIT;
\endpipeline
