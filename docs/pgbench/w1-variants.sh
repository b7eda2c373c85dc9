#!/bin/bash
# w1-variants.sh DIR: writes three variants of w1-now.sql into DIR, each
# without one kind of work, to tell what each costs:
#   w1-notask.sql   no task rows: none inserted by the start or by S1's
#                   answer, none deleted;
#   w1-noexec.sql   no execution rows: none inserted, none updated;
#   w1-noread.sql   no read of S2's call behind S1's COMMIT.
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
