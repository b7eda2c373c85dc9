-- answer-statements.sql as one call of the PL/pgSQL function t_answer (setup.sql).
\set r random(1, 1000)
\set n random(1, 1000000000)
\startpipeline
BEGIN;
SELECT t_answer('r' || :r, -(:n)::bigint, 'S1-1', ARRAY['r' || :r, 'r' || :r]::text[], ARRAY[1,2]::bigint[], ARRAY['ExecuteCompleted','StateExecutionStarted']::text[], ARRAY['S1-1','S2-1']::text[], ARRAY['\x7b7d','\x7b7d']::bytea[], 'S2-' || :n, '\x7b7d');
COMMIT;
\endpipeline
