-- One history row inserted in a transaction of its own: a transaction's least work, for machine-cpu.sh.
\set n random(1, 1000000000)
\startpipeline
BEGIN;
INSERT INTO history (run_id, at, type, execution_id, data) VALUES ('x' || :n, 1, 'ExecuteCompleted', 'S1-1', '\x7b7d');
COMMIT;
\endpipeline
