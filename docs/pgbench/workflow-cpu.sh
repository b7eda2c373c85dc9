#!/bin/bash
# workflow-cpu.sh DB SCRIPT.sql CLIENTS [PGOPTIONS]: machine-cpu.sh per run of
# SCRIPT instead of per transaction, for the w1-*.sql scripts, each of which
# inserts one row of workflows: runs SCRIPT with pgbench (CLIENTS clients on
# two threads, prepared statements) for 9 s and prints the CPU the whole
# machine spent per workflow between 2 s and 7 s, pgbench's own excluded.
# PGHOST, PGPORT and PGUSER as for psql; PGOPTIONS applies to pgbench's sessions.
set -eu
db=$1 script=$2 clients=$3
busy() { awk '/^cpu /{print $2 + $3 + $4 + $7 + $8}' /proc/stat; }
workflows() { psql -d "$db" -At -c "SELECT count(*) FROM workflows"; }
PGOPTIONS="${4:-}" pgbench -n -M prepared -c "$clients" -j 2 -T 9 -f "$script" "$db" > /dev/null &
sleep 2
pgb=$(pgrep -n pgbench)
b1=$(busy) p1=$(awk '{print $14 + $15}' "/proc/$pgb/stat") x1=$(workflows)
sleep 5
b2=$(busy) p2=$(awk '{print $14 + $15}' "/proc/$pgb/stat") x2=$(workflows)
wait
ticks=$(getconf CLK_TCK) n=$((x2 - x1))
echo "$script, $clients clients ${4:-}: $(( (b2 - b1 - p2 + p1) * 1000000 / ticks / n )) µs of machine CPU per workflow, pgbench's excluded ($((n / 5)) workflows/s)"
