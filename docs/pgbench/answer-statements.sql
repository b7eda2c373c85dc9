-- W1's execute answer (S1 -> S2) as the store sends it: six statements in one pipelined transaction.
\set r random(1, 1000)
\set n random(1, 1000000000)
\startpipeline
BEGIN;
WITH u AS (UPDATE runs SET status = 'RUNNING', closed_at = 0, data = data WHERE run_id = 'r' || :r AND status = 'RUNNING' RETURNING 1) SELECT iwf_expect((SELECT count(*) FROM u) = 1, 'run');
WITH d AS (DELETE FROM tasks WHERE id = -(:n)::bigint AND lease_owner IS NOT DISTINCT FROM 'x'::text RETURNING 1) SELECT iwf_expect((SELECT count(*) FROM d) = 0, 'task');
WITH u AS (UPDATE executions SET status = 'RUNNING', data = data WHERE run_id = 'r' || :r AND execution_id = 'S1-1' AND status = 'RUNNING' RETURNING 1) SELECT iwf_expect((SELECT count(*) FROM u) = 1, 'exec');
INSERT INTO history (run_id, at, type, execution_id, data) SELECT r, a, ty, e, d FROM unnest(ARRAY['r' || :r, 'r' || :r]::text[], ARRAY[1,2]::bigint[], ARRAY['ExecuteCompleted','StateExecutionStarted']::text[], ARRAY['S1-1','S2-1']::text[], ARRAY['\x7b7d','\x7b7d']::bytea[]) AS u(r, a, ty, e, d);
INSERT INTO executions (run_id, execution_id, state_id, status, created_at, data) VALUES ('r' || :r, 'S2-' || :n, 'S2', 'RUNNING', 1, '\x7b7d');
INSERT INTO tasks (run_id, workflow_id, execution_id, kind, due_at, attempt, first_attempt_at, lease_owner, lease_expires_at, data) VALUES ('r' || :r, 'w', 'S2-' || :n, 'execute', 1, 1, 1, 'x', 1, '\x7b7d');
COMMIT;
\endpipeline
