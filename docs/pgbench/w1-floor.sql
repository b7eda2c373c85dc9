-- The least a W1 workflow costs when its three steps commit one by one: three durable transactions
-- of one row each (the start's workflow id, then one history row per answer).
\set n random(1, 1000000000000)
\startpipeline
BEGIN;
INSERT INTO workflows (workflow_id, current_run_id) VALUES ('w' || :n, 'r' || :n);
COMMIT;
\endpipeline
\startpipeline
BEGIN;
INSERT INTO history (run_id, at, type, execution_id, data) VALUES ('r' || :n, 1, 'ExecuteCompleted', 'S1-1', convert_to(repeat('x', 80), 'UTF8'));
COMMIT;
\endpipeline
\startpipeline
BEGIN;
INSERT INTO history (run_id, at, type, execution_id, data) VALUES ('r' || :n, 1, 'ExecuteCompleted', 'S2-1', convert_to(repeat('x', 80), 'UTF8'));
COMMIT;
\endpipeline
