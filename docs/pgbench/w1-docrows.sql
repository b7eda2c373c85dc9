-- w1-doc.sql with the executions of a run that never ends in mind: the run's row (doc-setup.sql's
-- docs) carries the executions still live and the call it is owed, and an execution that completes
-- leaves it for a row of executions, written once, in its final form. A run that loops through
-- thousands of states then rewrites only its live executions with each answer. Rows sized as in
-- w1-now.sql: the run's row with one live execution 400 bytes, the closed run 368.
\set n random(1, 1000000000000)
\startpipeline
BEGIN;
SELECT set_config('statement_timeout', '30000', true);
INSERT INTO workflows (workflow_id, current_run_id) VALUES ('w' || :n, 'r' || :n);
INSERT INTO docs (run_id, workflow_id, workflow_type, status, started_at, closed_at, version, next_due, owner, data) VALUES ('r' || :n, 'w' || :n, 'BenchW1', 'RUNNING', :n, 0, 1, NULL, 'owner', convert_to(repeat('x', 400), 'UTF8'));
INSERT INTO history (run_id, at, type, execution_id, data) SELECT r, a, ty, e, d FROM unnest(ARRAY['r' || :n, 'r' || :n]::text[], ARRAY[1,1]::bigint[], ARRAY['WorkflowStarted','StateExecutionStarted']::text[], ARRAY['','S1-1']::text[], ARRAY[convert_to(repeat('x', 80), 'UTF8'), convert_to(repeat('x', 80), 'UTF8')]::bytea[]) WITH ORDINALITY AS u(r, a, ty, e, d, o) ORDER BY o RETURNING id;
COMMIT;
\endpipeline
\startpipeline
BEGIN;
WITH u AS (UPDATE docs SET version = 2, data = convert_to(repeat('y', 400), 'UTF8') WHERE run_id = 'r' || :n AND version = 1 RETURNING 1) SELECT iwf_expect((SELECT count(*) FROM u) = 1, 'run');
INSERT INTO executions (run_id, execution_id, state_id, status, created_at, data) VALUES ('r' || :n, 'S1-1', 'S1', 'COMPLETED', 1, convert_to(repeat('y', 99), 'UTF8'));
INSERT INTO history (run_id, at, type, execution_id, data) SELECT r, a, ty, e, d FROM unnest(ARRAY['r' || :n, 'r' || :n]::text[], ARRAY[1,1]::bigint[], ARRAY['ExecuteCompleted','StateExecutionStarted']::text[], ARRAY['S1-1','S2-1']::text[], ARRAY[convert_to(repeat('x', 80), 'UTF8'), convert_to(repeat('x', 80), 'UTF8')]::bytea[]) WITH ORDINALITY AS u(r, a, ty, e, d, o) ORDER BY o RETURNING id;
COMMIT;
\endpipeline
\startpipeline
BEGIN;
WITH u AS (UPDATE docs SET version = 3, status = 'COMPLETED', closed_at = (:n)::bigint + 1, owner = NULL, data = convert_to(repeat('z', 368), 'UTF8') WHERE run_id = 'r' || :n AND version = 2 RETURNING 1) SELECT iwf_expect((SELECT count(*) FROM u) = 1, 'run');
INSERT INTO executions (run_id, execution_id, state_id, status, created_at, data) VALUES ('r' || :n, 'S2-1', 'S2', 'COMPLETED', 1, convert_to(repeat('y', 99), 'UTF8'));
INSERT INTO history (run_id, at, type, execution_id, data) SELECT r, a, ty, e, d FROM unnest(ARRAY['r' || :n, 'r' || :n]::text[], ARRAY[1,1]::bigint[], ARRAY['ExecuteCompleted','WorkflowClosed']::text[], ARRAY['S2-1','']::text[], ARRAY[convert_to(repeat('x', 80), 'UTF8'), convert_to(repeat('x', 80), 'UTF8')]::bytea[]) WITH ORDINALITY AS u(r, a, ty, e, d, o) ORDER BY o RETURNING id;
COMMIT;
\endpipeline
