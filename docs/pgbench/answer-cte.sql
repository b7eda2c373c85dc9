-- answer-statements.sql as one statement of data-modifying CTEs.
\set r random(1, 1000)
\set n random(1, 1000000000)
\startpipeline
BEGIN;
WITH u AS (UPDATE runs SET status = 'RUNNING', closed_at = 0, data = data WHERE run_id = 'r' || :r AND status = 'RUNNING' RETURNING 1),
 d AS (DELETE FROM tasks WHERE id = -(:n)::bigint AND lease_owner IS NOT DISTINCT FROM 'x'::text RETURNING 1),
 u2 AS (UPDATE executions SET status = 'RUNNING', data = data WHERE run_id = 'r' || :r AND execution_id = 'S1-1' AND status = 'RUNNING' RETURNING 1),
 h AS (INSERT INTO history (run_id, at, type, execution_id, data) SELECT r, a, ty, e, d FROM unnest(ARRAY['r' || :r, 'r' || :r]::text[], ARRAY[1,2]::bigint[], ARRAY['ExecuteCompleted','StateExecutionStarted']::text[], ARRAY['S1-1','S2-1']::text[], ARRAY['\x7b7d','\x7b7d']::bytea[]) AS u(r, a, ty, e, d)),
 e AS (INSERT INTO executions (run_id, execution_id, state_id, status, created_at, data) VALUES ('r' || :r, 'S2-' || :n, 'S2', 'RUNNING', 1, '\x7b7d')),
 t AS (INSERT INTO tasks (run_id, workflow_id, execution_id, kind, due_at, attempt, first_attempt_at, lease_owner, lease_expires_at, data) VALUES ('r' || :r, 'w', 'S2-' || :n, 'execute', 1, 1, 1, 'x', 1, '\x7b7d'))
 SELECT iwf_expect((SELECT count(*) FROM u) = 1, 'run') AND iwf_expect((SELECT count(*) FROM d) = 0, 'task') AND iwf_expect((SELECT count(*) FROM u2) = 1, 'exec');
COMMIT;
\endpipeline
