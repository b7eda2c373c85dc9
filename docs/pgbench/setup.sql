-- Rows and a function for the scripts of this directory, in a database that
-- holds the store's schema (a W1 run of iwf-bench with -keep leaves one).
-- Runs r1..r1000 and their execution S1-1 are what the answer scripts update.
INSERT INTO runs (run_id, workflow_id, workflow_type, status, started_at, closed_at, data)
SELECT 'r' || i, 'w' || i, 'BenchW1', 'RUNNING', 1, 0, convert_to(repeat('x', 368), 'UTF8')
FROM generate_series(1, 1000) i;
INSERT INTO executions (run_id, execution_id, state_id, status, created_at, data)
SELECT 'r' || i, 'S1-1', 'S1', 'RUNNING', 1, convert_to(repeat('x', 99), 'UTF8')
FROM generate_series(1, 1000) i;

-- answer-function.sql: the six statements of answer-statements.sql as one
-- PL/pgSQL function, checks by ROW_COUNT.
CREATE OR REPLACE FUNCTION t_answer(p_run text, p_task bigint, p_exec text, h_r text[], h_a bigint[], h_t text[],
    h_e text[], h_d bytea[], n_exec text, p_data bytea) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE n int;
BEGIN
  UPDATE runs SET status = 'RUNNING', closed_at = 0, data = data WHERE run_id = p_run AND status = 'RUNNING';
  GET DIAGNOSTICS n = ROW_COUNT;
  IF n <> 1 THEN RAISE EXCEPTION 'run changed since it was read' USING ERRCODE = 'IW001'; END IF;
  DELETE FROM tasks WHERE id = p_task AND lease_owner IS NOT DISTINCT FROM 'x'::text;
  GET DIAGNOSTICS n = ROW_COUNT;
  IF n <> 0 THEN RAISE EXCEPTION 'task changed since it was read' USING ERRCODE = 'IW001'; END IF;
  UPDATE executions SET status = 'RUNNING', data = data WHERE run_id = p_run AND execution_id = p_exec AND status = 'RUNNING';
  GET DIAGNOSTICS n = ROW_COUNT;
  IF n <> 1 THEN RAISE EXCEPTION 'execution changed since it was read' USING ERRCODE = 'IW001'; END IF;
  INSERT INTO history (run_id, at, type, execution_id, data) SELECT r, a, ty, e, d FROM unnest(h_r, h_a, h_t, h_e, h_d) AS u(r, a, ty, e, d);
  INSERT INTO executions (run_id, execution_id, state_id, status, created_at, data) VALUES (p_run, n_exec, 'S2', 'RUNNING', 1, p_data);
  INSERT INTO tasks (run_id, workflow_id, execution_id, kind, due_at, attempt, first_attempt_at, lease_owner, lease_expires_at, data)
    VALUES (p_run, 'w', n_exec, 'execute', 1, 1, 1, 'x', 1, p_data);
  RETURN true;
END $$;
