-- Eight answers in one transaction, as the combiner sends a batch of eight: each answer's statements in turn.
\set n random(1, 1000000000)
\set r0 random(1, 125)
\set r1 random(126, 250)
\set r2 random(251, 375)
\set r3 random(376, 500)
\set r4 random(501, 625)
\set r5 random(626, 750)
\set r6 random(751, 875)
\set r7 random(876, 1000)
\startpipeline
BEGIN;
WITH u AS (UPDATE runs SET status = 'RUNNING', closed_at = 0, data = data WHERE run_id = 'r' || :r0 AND status = 'RUNNING' RETURNING 1) SELECT iwf_expect((SELECT count(*) FROM u) = 1, 'run');
WITH d AS (DELETE FROM tasks WHERE id = -(:n+0)::bigint AND lease_owner IS NOT DISTINCT FROM 'x'::text RETURNING 1) SELECT iwf_expect((SELECT count(*) FROM d) = 0, 'task');
WITH u AS (UPDATE executions SET status = 'RUNNING', data = data WHERE run_id = 'r' || :r0 AND execution_id = 'S1-1' AND status = 'RUNNING' RETURNING 1) SELECT iwf_expect((SELECT count(*) FROM u) = 1, 'exec');
INSERT INTO history (run_id, at, type, execution_id, data) SELECT r, a, ty, e, d FROM unnest(ARRAY['r' || :r0, 'r' || :r0]::text[], ARRAY[1,2]::bigint[], ARRAY['ExecuteCompleted','StateExecutionStarted']::text[], ARRAY['S1-1','S2-1']::text[], ARRAY['\x7b7d','\x7b7d']::bytea[]) AS u(r, a, ty, e, d);
INSERT INTO executions (run_id, execution_id, state_id, status, created_at, data) VALUES ('r' || :r0, 'S2-' || (:n+0), 'S2', 'RUNNING', 1, '\x7b7d');
INSERT INTO tasks (run_id, workflow_id, execution_id, kind, due_at, attempt, first_attempt_at, lease_owner, lease_expires_at, data) VALUES ('r' || :r0, 'w', 'S2-' || (:n+0), 'execute', 1, 1, 1, 'x', 1, '\x7b7d');
WITH u AS (UPDATE runs SET status = 'RUNNING', closed_at = 0, data = data WHERE run_id = 'r' || :r1 AND status = 'RUNNING' RETURNING 1) SELECT iwf_expect((SELECT count(*) FROM u) = 1, 'run');
WITH d AS (DELETE FROM tasks WHERE id = -(:n+1)::bigint AND lease_owner IS NOT DISTINCT FROM 'x'::text RETURNING 1) SELECT iwf_expect((SELECT count(*) FROM d) = 0, 'task');
WITH u AS (UPDATE executions SET status = 'RUNNING', data = data WHERE run_id = 'r' || :r1 AND execution_id = 'S1-1' AND status = 'RUNNING' RETURNING 1) SELECT iwf_expect((SELECT count(*) FROM u) = 1, 'exec');
INSERT INTO history (run_id, at, type, execution_id, data) SELECT r, a, ty, e, d FROM unnest(ARRAY['r' || :r1, 'r' || :r1]::text[], ARRAY[1,2]::bigint[], ARRAY['ExecuteCompleted','StateExecutionStarted']::text[], ARRAY['S1-1','S2-1']::text[], ARRAY['\x7b7d','\x7b7d']::bytea[]) AS u(r, a, ty, e, d);
INSERT INTO executions (run_id, execution_id, state_id, status, created_at, data) VALUES ('r' || :r1, 'S2-' || (:n+1), 'S2', 'RUNNING', 1, '\x7b7d');
INSERT INTO tasks (run_id, workflow_id, execution_id, kind, due_at, attempt, first_attempt_at, lease_owner, lease_expires_at, data) VALUES ('r' || :r1, 'w', 'S2-' || (:n+1), 'execute', 1, 1, 1, 'x', 1, '\x7b7d');
WITH u AS (UPDATE runs SET status = 'RUNNING', closed_at = 0, data = data WHERE run_id = 'r' || :r2 AND status = 'RUNNING' RETURNING 1) SELECT iwf_expect((SELECT count(*) FROM u) = 1, 'run');
WITH d AS (DELETE FROM tasks WHERE id = -(:n+2)::bigint AND lease_owner IS NOT DISTINCT FROM 'x'::text RETURNING 1) SELECT iwf_expect((SELECT count(*) FROM d) = 0, 'task');
WITH u AS (UPDATE executions SET status = 'RUNNING', data = data WHERE run_id = 'r' || :r2 AND execution_id = 'S1-1' AND status = 'RUNNING' RETURNING 1) SELECT iwf_expect((SELECT count(*) FROM u) = 1, 'exec');
INSERT INTO history (run_id, at, type, execution_id, data) SELECT r, a, ty, e, d FROM unnest(ARRAY['r' || :r2, 'r' || :r2]::text[], ARRAY[1,2]::bigint[], ARRAY['ExecuteCompleted','StateExecutionStarted']::text[], ARRAY['S1-1','S2-1']::text[], ARRAY['\x7b7d','\x7b7d']::bytea[]) AS u(r, a, ty, e, d);
INSERT INTO executions (run_id, execution_id, state_id, status, created_at, data) VALUES ('r' || :r2, 'S2-' || (:n+2), 'S2', 'RUNNING', 1, '\x7b7d');
INSERT INTO tasks (run_id, workflow_id, execution_id, kind, due_at, attempt, first_attempt_at, lease_owner, lease_expires_at, data) VALUES ('r' || :r2, 'w', 'S2-' || (:n+2), 'execute', 1, 1, 1, 'x', 1, '\x7b7d');
WITH u AS (UPDATE runs SET status = 'RUNNING', closed_at = 0, data = data WHERE run_id = 'r' || :r3 AND status = 'RUNNING' RETURNING 1) SELECT iwf_expect((SELECT count(*) FROM u) = 1, 'run');
WITH d AS (DELETE FROM tasks WHERE id = -(:n+3)::bigint AND lease_owner IS NOT DISTINCT FROM 'x'::text RETURNING 1) SELECT iwf_expect((SELECT count(*) FROM d) = 0, 'task');
WITH u AS (UPDATE executions SET status = 'RUNNING', data = data WHERE run_id = 'r' || :r3 AND execution_id = 'S1-1' AND status = 'RUNNING' RETURNING 1) SELECT iwf_expect((SELECT count(*) FROM u) = 1, 'exec');
INSERT INTO history (run_id, at, type, execution_id, data) SELECT r, a, ty, e, d FROM unnest(ARRAY['r' || :r3, 'r' || :r3]::text[], ARRAY[1,2]::bigint[], ARRAY['ExecuteCompleted','StateExecutionStarted']::text[], ARRAY['S1-1','S2-1']::text[], ARRAY['\x7b7d','\x7b7d']::bytea[]) AS u(r, a, ty, e, d);
INSERT INTO executions (run_id, execution_id, state_id, status, created_at, data) VALUES ('r' || :r3, 'S2-' || (:n+3), 'S2', 'RUNNING', 1, '\x7b7d');
INSERT INTO tasks (run_id, workflow_id, execution_id, kind, due_at, attempt, first_attempt_at, lease_owner, lease_expires_at, data) VALUES ('r' || :r3, 'w', 'S2-' || (:n+3), 'execute', 1, 1, 1, 'x', 1, '\x7b7d');
WITH u AS (UPDATE runs SET status = 'RUNNING', closed_at = 0, data = data WHERE run_id = 'r' || :r4 AND status = 'RUNNING' RETURNING 1) SELECT iwf_expect((SELECT count(*) FROM u) = 1, 'run');
WITH d AS (DELETE FROM tasks WHERE id = -(:n+4)::bigint AND lease_owner IS NOT DISTINCT FROM 'x'::text RETURNING 1) SELECT iwf_expect((SELECT count(*) FROM d) = 0, 'task');
WITH u AS (UPDATE executions SET status = 'RUNNING', data = data WHERE run_id = 'r' || :r4 AND execution_id = 'S1-1' AND status = 'RUNNING' RETURNING 1) SELECT iwf_expect((SELECT count(*) FROM u) = 1, 'exec');
INSERT INTO history (run_id, at, type, execution_id, data) SELECT r, a, ty, e, d FROM unnest(ARRAY['r' || :r4, 'r' || :r4]::text[], ARRAY[1,2]::bigint[], ARRAY['ExecuteCompleted','StateExecutionStarted']::text[], ARRAY['S1-1','S2-1']::text[], ARRAY['\x7b7d','\x7b7d']::bytea[]) AS u(r, a, ty, e, d);
INSERT INTO executions (run_id, execution_id, state_id, status, created_at, data) VALUES ('r' || :r4, 'S2-' || (:n+4), 'S2', 'RUNNING', 1, '\x7b7d');
INSERT INTO tasks (run_id, workflow_id, execution_id, kind, due_at, attempt, first_attempt_at, lease_owner, lease_expires_at, data) VALUES ('r' || :r4, 'w', 'S2-' || (:n+4), 'execute', 1, 1, 1, 'x', 1, '\x7b7d');
WITH u AS (UPDATE runs SET status = 'RUNNING', closed_at = 0, data = data WHERE run_id = 'r' || :r5 AND status = 'RUNNING' RETURNING 1) SELECT iwf_expect((SELECT count(*) FROM u) = 1, 'run');
WITH d AS (DELETE FROM tasks WHERE id = -(:n+5)::bigint AND lease_owner IS NOT DISTINCT FROM 'x'::text RETURNING 1) SELECT iwf_expect((SELECT count(*) FROM d) = 0, 'task');
WITH u AS (UPDATE executions SET status = 'RUNNING', data = data WHERE run_id = 'r' || :r5 AND execution_id = 'S1-1' AND status = 'RUNNING' RETURNING 1) SELECT iwf_expect((SELECT count(*) FROM u) = 1, 'exec');
INSERT INTO history (run_id, at, type, execution_id, data) SELECT r, a, ty, e, d FROM unnest(ARRAY['r' || :r5, 'r' || :r5]::text[], ARRAY[1,2]::bigint[], ARRAY['ExecuteCompleted','StateExecutionStarted']::text[], ARRAY['S1-1','S2-1']::text[], ARRAY['\x7b7d','\x7b7d']::bytea[]) AS u(r, a, ty, e, d);
INSERT INTO executions (run_id, execution_id, state_id, status, created_at, data) VALUES ('r' || :r5, 'S2-' || (:n+5), 'S2', 'RUNNING', 1, '\x7b7d');
INSERT INTO tasks (run_id, workflow_id, execution_id, kind, due_at, attempt, first_attempt_at, lease_owner, lease_expires_at, data) VALUES ('r' || :r5, 'w', 'S2-' || (:n+5), 'execute', 1, 1, 1, 'x', 1, '\x7b7d');
WITH u AS (UPDATE runs SET status = 'RUNNING', closed_at = 0, data = data WHERE run_id = 'r' || :r6 AND status = 'RUNNING' RETURNING 1) SELECT iwf_expect((SELECT count(*) FROM u) = 1, 'run');
WITH d AS (DELETE FROM tasks WHERE id = -(:n+6)::bigint AND lease_owner IS NOT DISTINCT FROM 'x'::text RETURNING 1) SELECT iwf_expect((SELECT count(*) FROM d) = 0, 'task');
WITH u AS (UPDATE executions SET status = 'RUNNING', data = data WHERE run_id = 'r' || :r6 AND execution_id = 'S1-1' AND status = 'RUNNING' RETURNING 1) SELECT iwf_expect((SELECT count(*) FROM u) = 1, 'exec');
INSERT INTO history (run_id, at, type, execution_id, data) SELECT r, a, ty, e, d FROM unnest(ARRAY['r' || :r6, 'r' || :r6]::text[], ARRAY[1,2]::bigint[], ARRAY['ExecuteCompleted','StateExecutionStarted']::text[], ARRAY['S1-1','S2-1']::text[], ARRAY['\x7b7d','\x7b7d']::bytea[]) AS u(r, a, ty, e, d);
INSERT INTO executions (run_id, execution_id, state_id, status, created_at, data) VALUES ('r' || :r6, 'S2-' || (:n+6), 'S2', 'RUNNING', 1, '\x7b7d');
INSERT INTO tasks (run_id, workflow_id, execution_id, kind, due_at, attempt, first_attempt_at, lease_owner, lease_expires_at, data) VALUES ('r' || :r6, 'w', 'S2-' || (:n+6), 'execute', 1, 1, 1, 'x', 1, '\x7b7d');
WITH u AS (UPDATE runs SET status = 'RUNNING', closed_at = 0, data = data WHERE run_id = 'r' || :r7 AND status = 'RUNNING' RETURNING 1) SELECT iwf_expect((SELECT count(*) FROM u) = 1, 'run');
WITH d AS (DELETE FROM tasks WHERE id = -(:n+7)::bigint AND lease_owner IS NOT DISTINCT FROM 'x'::text RETURNING 1) SELECT iwf_expect((SELECT count(*) FROM d) = 0, 'task');
WITH u AS (UPDATE executions SET status = 'RUNNING', data = data WHERE run_id = 'r' || :r7 AND execution_id = 'S1-1' AND status = 'RUNNING' RETURNING 1) SELECT iwf_expect((SELECT count(*) FROM u) = 1, 'exec');
INSERT INTO history (run_id, at, type, execution_id, data) SELECT r, a, ty, e, d FROM unnest(ARRAY['r' || :r7, 'r' || :r7]::text[], ARRAY[1,2]::bigint[], ARRAY['ExecuteCompleted','StateExecutionStarted']::text[], ARRAY['S1-1','S2-1']::text[], ARRAY['\x7b7d','\x7b7d']::bytea[]) AS u(r, a, ty, e, d);
INSERT INTO executions (run_id, execution_id, state_id, status, created_at, data) VALUES ('r' || :r7, 'S2-' || (:n+7), 'S2', 'RUNNING', 1, '\x7b7d');
INSERT INTO tasks (run_id, workflow_id, execution_id, kind, due_at, attempt, first_attempt_at, lease_owner, lease_expires_at, data) VALUES ('r' || :r7, 'w', 'S2-' || (:n+7), 'execute', 1, 1, 1, 'x', 1, '\x7b7d');
COMMIT;
\endpipeline
