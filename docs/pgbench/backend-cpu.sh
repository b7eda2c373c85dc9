#!/bin/bash
# backend-cpu.sh DB SCRIPT.sql: runs SCRIPT with pgbench (one client,
# prepared statements, synchronous_commit off so that no flush is timed) for
# 9 s and prints the CPU its backend spent per transaction, read from /proc
# between 2 s and 7 s. Run it on the machine of the PostgreSQL server, as a
# user that can read /proc/<backend>/stat; PGHOST, PGPORT and PGUSER as for psql.
set -eu
db=$1 script=$2
PGOPTIONS='-c synchronous_commit=off' pgbench -n -M prepared -c 1 -T 9 -f "$script" "$db" > /dev/null &
sleep 2
pid=$(psql -d "$db" -At -c "SELECT pid FROM pg_stat_activity WHERE application_name = 'pgbench'")
commits() { psql -d "$db" -At -c "SELECT xact_commit FROM pg_stat_database WHERE datname = '$db'"; }
cpu() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
c1=$(cpu) x1=$(commits)
sleep 5
c2=$(cpu) x2=$(commits)
wait
ticks=$(getconf CLK_TCK)
echo "$script: $(( (c2 - c1) * 1000000 / ticks / (x2 - x1) )) µs of backend CPU per transaction ($((x2 - x1)) transactions)"
