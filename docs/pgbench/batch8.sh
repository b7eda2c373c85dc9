#!/bin/bash
# batch8.sh DIR: writes two pgbench scripts into DIR that commit eight
# execute answers (answer-statements.sql's statements, on eight runs) in one
# transaction, as the combiner sends a batch of eight:
#   batch8-statements.sql  each answer's six statements in turn;
#   batch8-merged.sql      the checks in turn, then each table's inserts of
#                          the eight answers as one statement.
set -eu
dir=$1
header() {
  echo "\\set n random(1, 1000000000)"
  for i in 0 1 2 3 4 5 6 7; do echo "\\set r$i random($((i * 125 + 1)), $((i * 125 + 125)))"; done
  echo '\startpipeline'
  echo 'BEGIN;'
}
footer() { echo 'COMMIT;'; echo '\endpipeline'; }
checks() { # answer i's run, task and execution statements with their checks
  local r="'r' || :r$1"
  echo "WITH u AS (UPDATE runs SET status = 'RUNNING', closed_at = 0, data = data WHERE run_id = $r AND status = 'RUNNING' RETURNING 1) SELECT iwf_expect((SELECT count(*) FROM u) = 1, 'run');"
  echo "WITH d AS (DELETE FROM tasks WHERE id = -(:n+$1)::bigint AND lease_owner IS NOT DISTINCT FROM 'x'::text RETURNING 1) SELECT iwf_expect((SELECT count(*) FROM d) = 0, 'task');"
  echo "WITH u AS (UPDATE executions SET status = 'RUNNING', data = data WHERE run_id = $r AND execution_id = 'S1-1' AND status = 'RUNNING' RETURNING 1) SELECT iwf_expect((SELECT count(*) FROM u) = 1, 'exec');"
}
join() { local IFS=,; echo "$*"; }
inserts() { # the history, execution and task inserts of the answers given
  local runs=() ats=() types=() execs=() data=() xs=() ts=()
  for i in "$@"; do
    runs+=("'r' || :r$i" "'r' || :r$i"); ats+=(1 2); types+=("'ExecuteCompleted'" "'StateExecutionStarted'")
    execs+=("'S1-1'" "'S2-1'"); data+=("'\\x7b7d'" "'\\x7b7d'")
    xs+=("('r' || :r$i, 'S2-' || (:n+$i), 'S2', 'RUNNING', 1, '\\x7b7d')")
    ts+=("('r' || :r$i, 'w', 'S2-' || (:n+$i), 'execute', 1, 1, 1, 'x', 1, '\\x7b7d')")
  done
  echo "INSERT INTO history (run_id, at, type, execution_id, data) SELECT r, a, ty, e, d FROM unnest(ARRAY[$(join "${runs[@]}")]::text[], ARRAY[$(join "${ats[@]}")]::bigint[], ARRAY[$(join "${types[@]}")]::text[], ARRAY[$(join "${execs[@]}")]::text[], ARRAY[$(join "${data[@]}")]::bytea[]) AS u(r, a, ty, e, d);"
  echo "INSERT INTO executions (run_id, execution_id, state_id, status, created_at, data) VALUES $(join "${xs[@]}");"
  echo "INSERT INTO tasks (run_id, workflow_id, execution_id, kind, due_at, attempt, first_attempt_at, lease_owner, lease_expires_at, data) VALUES $(join "${ts[@]}");"
}
{
  header
  for i in 0 1 2 3 4 5 6 7; do checks $i; inserts $i; done
  footer
} > "$dir/batch8-statements.sql"
{
  header
  for i in 0 1 2 3 4 5 6 7; do checks $i; done
  inserts 0 1 2 3 4 5 6 7
  footer
} > "$dir/batch8-merged.sql"
