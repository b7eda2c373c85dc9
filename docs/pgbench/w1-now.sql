-- One W1 workflow as the store sends it: the start; S1's answer (S1 -> S2) with S2's call read behind
-- its COMMIT; S2's answer, which closes the run. Three pipelined transactions, one round trip each.
-- For rounds.sh (machine-cpu.sh per workflow); rows sized like a W1 run's (run 368 bytes, execution 99, history event 80).
\set n random(1, 1000000000000)
\startpipeline
BEGIN;
SELECT set_config('statement_timeout', '30000', true);
INSERT INTO workflows (workflow_id, current_run_id) VALUES ('w' || :n, 'r' || :n);
INSERT INTO executions (run_id, execution_id, state_id, status, created_at, data) SELECT r, e, s, st, c, d FROM unnest(ARRAY['r' || :n]::text[], ARRAY['S1-1']::text[], ARRAY['S1']::text[], ARRAY['EXECUTE']::text[], ARRAY[1]::bigint[], ARRAY[convert_to(repeat('x', 99), 'UTF8')]::bytea[]) WITH ORDINALITY AS u(r, e, s, st, c, d, o) ORDER BY o;
INSERT INTO tasks (run_id, workflow_id, execution_id, kind, due_at, attempt, first_attempt_at, lease_owner, lease_expires_at, data) SELECT r, w, e, k, du, a, f, lo, le, d FROM unnest(ARRAY['r' || :n]::text[], ARRAY['w' || :n]::text[], ARRAY['S1-1']::text[], ARRAY['EXECUTE']::text[], ARRAY[1]::bigint[], ARRAY[1]::int[], ARRAY[1]::bigint[], ARRAY['owner']::text[], ARRAY[2]::bigint[], ARRAY[NULL]::bytea[]) WITH ORDINALITY AS u(r, w, e, k, du, a, f, lo, le, d, o) ORDER BY o RETURNING id;
INSERT INTO runs (run_id, workflow_id, workflow_type, status, started_at, closed_at, data) VALUES ('r' || :n, 'w' || :n, 'BenchW1', 'RUNNING', :n, 0, convert_to(repeat('x', 368), 'UTF8'));
INSERT INTO history (run_id, at, type, execution_id, data) SELECT r, a, ty, e, d FROM unnest(ARRAY['r' || :n, 'r' || :n]::text[], ARRAY[1,1]::bigint[], ARRAY['WorkflowStarted','StateExecutionStarted']::text[], ARRAY['','S1-1']::text[], ARRAY[convert_to(repeat('x', 80), 'UTF8'), convert_to(repeat('x', 80), 'UTF8')]::bytea[]) WITH ORDINALITY AS u(r, a, ty, e, d, o) ORDER BY o RETURNING id;
COMMIT;
\endpipeline
\startpipeline
BEGIN;
WITH u AS (UPDATE runs SET status = 'RUNNING', closed_at = 0, data = convert_to(repeat('y', 368), 'UTF8') WHERE run_id = 'r' || :n AND status = 'RUNNING' AND closed_at = 0 RETURNING 1), d AS (DELETE FROM tasks WHERE run_id = 'r' || :n AND execution_id = 'S1-1' AND EXISTS (SELECT 1 FROM u) RETURNING 1) SELECT iwf_expect((SELECT count(*) FROM u) = 1, 'run'), iwf_expect((SELECT count(*) FROM d) = 1, 'task');
WITH u AS (UPDATE executions SET status = 'COMPLETED', data = convert_to(repeat('y', 99), 'UTF8') WHERE run_id = 'r' || :n AND execution_id = 'S1-1' AND status = 'EXECUTE' RETURNING 1) SELECT iwf_expect((SELECT count(*) FROM u) = 1, 'execution');
INSERT INTO executions (run_id, execution_id, state_id, status, created_at, data) SELECT r, e, s, st, c, d FROM unnest(ARRAY['r' || :n]::text[], ARRAY['S2-1']::text[], ARRAY['S2']::text[], ARRAY['EXECUTE']::text[], ARRAY[1]::bigint[], ARRAY[convert_to(repeat('x', 99), 'UTF8')]::bytea[]) WITH ORDINALITY AS u(r, e, s, st, c, d, o) ORDER BY o;
INSERT INTO tasks (run_id, workflow_id, execution_id, kind, due_at, attempt, first_attempt_at, lease_owner, lease_expires_at, data) SELECT r, w, e, k, du, a, f, lo, le, d FROM unnest(ARRAY['r' || :n]::text[], ARRAY['w' || :n]::text[], ARRAY['S2-1']::text[], ARRAY['EXECUTE']::text[], ARRAY[1]::bigint[], ARRAY[1]::int[], ARRAY[1]::bigint[], ARRAY['owner']::text[], ARRAY[2]::bigint[], ARRAY[NULL]::bytea[]) WITH ORDINALITY AS u(r, w, e, k, du, a, f, lo, le, d, o) ORDER BY o RETURNING id;
INSERT INTO history (run_id, at, type, execution_id, data) SELECT r, a, ty, e, d FROM unnest(ARRAY['r' || :n, 'r' || :n]::text[], ARRAY[1,1]::bigint[], ARRAY['ExecuteCompleted','StateExecutionStarted']::text[], ARRAY['S1-1','S2-1']::text[], ARRAY[convert_to(repeat('x', 80), 'UTF8'), convert_to(repeat('x', 80), 'UTF8')]::bytea[]) WITH ORDINALITY AS u(r, a, ty, e, d, o) ORDER BY o RETURNING id;
COMMIT;
SELECT 0, run_id, workflow_id, workflow_type, status, started_at, closed_at, data, NULL::double precision, NULL::boolean FROM runs WHERE run_id = 'r' || :n UNION ALL SELECT 1, execution_id, state_id, status, NULL, created_at, NULL, data, NULL, NULL FROM executions WHERE run_id = 'r' || :n AND execution_id = 'S2-1' UNION ALL SELECT 2, key, NULL, NULL, NULL, NULL, NULL, value, NULL, NULL FROM data_attributes WHERE run_id = 'r' || :n UNION ALL SELECT 3, key, value_type, string_value, NULL, int_value, time_value, raw, double_value, bool_value FROM search_attributes WHERE run_id = 'r' || :n UNION ALL SELECT 4, key, value, NULL, NULL, pos::bigint, NULL, NULL, NULL, NULL FROM search_attribute_strings WHERE run_id = 'r' || :n;
\endpipeline
\startpipeline
BEGIN;
WITH u AS (UPDATE runs SET status = 'COMPLETED', closed_at = (:n)::bigint + 1, data = convert_to(repeat('z', 368), 'UTF8') WHERE run_id = 'r' || :n AND status = 'RUNNING' AND closed_at = 0 RETURNING 1), d AS (DELETE FROM tasks WHERE run_id = 'r' || :n AND EXISTS (SELECT 1 FROM u) RETURNING execution_id) SELECT iwf_expect((SELECT count(*) FROM u) = 1, 'run'), iwf_expect((SELECT count(*) FROM d WHERE execution_id = 'S2-1') = 1, 'task');
WITH u AS (UPDATE executions SET status = 'COMPLETED', data = convert_to(repeat('y', 99), 'UTF8') WHERE run_id = 'r' || :n AND execution_id = 'S2-1' AND status = 'EXECUTE' RETURNING 1) SELECT iwf_expect((SELECT count(*) FROM u) = 1, 'execution');
INSERT INTO history (run_id, at, type, execution_id, data) SELECT r, a, ty, e, d FROM unnest(ARRAY['r' || :n, 'r' || :n]::text[], ARRAY[1,1]::bigint[], ARRAY['ExecuteCompleted','WorkflowClosed']::text[], ARRAY['S2-1','']::text[], ARRAY[convert_to(repeat('x', 80), 'UTF8'), convert_to(repeat('x', 80), 'UTF8')]::bytea[]) WITH ORDINALITY AS u(r, a, ty, e, d, o) ORDER BY o RETURNING id;
COMMIT;
\endpipeline
