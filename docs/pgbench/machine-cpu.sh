#!/bin/bash
# machine-cpu.sh DB SCRIPT.sql CLIENTS [PGOPTIONS]: runs SCRIPT with pgbench
# (CLIENTS clients on two threads, prepared statements) for 9 s and prints
# the CPU the whole machine spent per transaction between 2 s and 7 s, less
# pgbench's own: the backends, and also the WAL writer, the kernel's work
# for the sockets and the WAL flushes, and everything else that ran. Run it
# on a quiet machine that holds the PostgreSQL server; PGHOST, PGPORT and
# PGUSER as for psql. PGOPTIONS, e.g. '-c synchronous_commit=off', applies
# to pgbench's sessions. With PER=workflow it prints the CPU per workflow
# instead, for the w1-*.sql scripts, each of which inserts one row of
# workflows.
set -eu
db=$1 script=$2 clients=$3 per=${PER:-transaction}
busy() { awk '/^cpu /{print $2 + $3 + $4 + $7 + $8}' /proc/stat; }
count() {
  if [ "$per" = workflow ]; then
    psql -d "$db" -At -c "SELECT count(*) FROM workflows"
  else
    psql -d "$db" -At -c "SELECT xact_commit FROM pg_stat_database WHERE datname = '$db'"
  fi
}
PGOPTIONS="${4:-}" pgbench -n -M prepared -c "$clients" -j 2 -T 9 -f "$script" "$db" > /dev/null &
sleep 2
pgb=$(pgrep -n pgbench)
b1=$(busy) p1=$(awk '{print $14 + $15}' "/proc/$pgb/stat") x1=$(count)
sleep 5
b2=$(busy) p2=$(awk '{print $14 + $15}' "/proc/$pgb/stat") x2=$(count)
wait
ticks=$(getconf CLK_TCK) n=$((x2 - x1))
echo "$script, $clients clients ${4:-}: $(( (b2 - b1 - p2 + p1) * 1000000 / ticks / n )) µs of machine CPU per $per, pgbench's excluded ($((n / 5)) ${per}s/s)"
