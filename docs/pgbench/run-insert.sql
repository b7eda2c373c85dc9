-- A run's INSERT; compare with the same into a copy of runs with fewer indexes.
\set n random(1, 1000000000)
\startpipeline
BEGIN;
INSERT INTO runs (run_id, workflow_id, workflow_type, status, started_at, closed_at, data) VALUES (gen_random_uuid()::text, 'w' || :n, 'BenchW1', 'RUNNING', :n, 0, '\x7b7d');
COMMIT;
\endpipeline
