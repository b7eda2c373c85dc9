#!/bin/bash
# w1-variants.sh DIR: writes three variants of w1-now.sql into DIR, each
# without one kind of work, to tell what each costs:
#   w1-notask.sql   no task rows: none inserted by the start or by S1's
#                   answer, none deleted;
#   w1-noexec.sql   no execution rows: none inserted, none updated;
#   w1-noread.sql   no read of S2's call behind S1's COMMIT;
# and one variant of w1-doc.sql:
#   w1-docrows.sql  w1-doc.sql made fit for runs that never end: the run's
#                   row carries its live executions only, and an execution
#                   that completes leaves it for a row of executions,
#                   written once in its final form (rows sized as in
#                   w1-now.sql: the row with one live execution 400 bytes,
#                   the closed run 368).
set -eu
dir=$1 src=$(dirname "$0")/w1-now.sql
body() { grep -v '^--' "$src"; }
{
  echo "-- w1-now.sql without task rows (written by w1-variants.sh)."
  body | grep -v -e '^INSERT INTO tasks' -e '^DELETE FROM tasks' |
    perl -pe "s/, d AS \(DELETE FROM tasks .*? RETURNING \w+\)//; s/, iwf_expect\(\(SELECT count\(\*\) FROM d[^)]*\) = 1, 'task'\)//"
} > "$dir/w1-notask.sql"
{
  echo "-- w1-now.sql without execution rows (written by w1-variants.sh)."
  body | grep -v -e '^INSERT INTO executions' -e '^WITH u AS (UPDATE executions'
} > "$dir/w1-noexec.sql"
{
  echo "-- w1-now.sql without the read behind S1's COMMIT (written by w1-variants.sh)."
  body | grep -v '^SELECT 0, run_id'
} > "$dir/w1-noread.sql"
{
  echo "-- w1-doc.sql with rows for completed executions (written by w1-variants.sh)."
  exec_row() { echo "INSERT INTO executions (run_id, execution_id, state_id, status, created_at, data) VALUES ('r' || :n, '$1-1', '$1', 'COMPLETED', 1, convert_to(repeat('y', 99), 'UTF8'));"; }
  grep -v '^--' "$(dirname "$0")/w1-doc.sql" |
    sed -e "s/repeat('x', 600)/repeat('x', 400)/; s/repeat('y', 700)/repeat('y', 400)/; s/repeat('z', 700)/repeat('z', 368)/" |
    while IFS= read -r line; do
      printf '%s\n' "$line"
      case $line in
        "WITH u AS (UPDATE docs SET version = 2"*) exec_row S1 ;;
        "WITH u AS (UPDATE docs SET version = 3"*) exec_row S2 ;;
      esac
    done
} > "$dir/w1-docrows.sql"
