#!/bin/bash
# rounds.sh DB N SCRIPT.sql...: N rounds of machine-cpu.sh per workflow over the scripts,
# CLIENTS clients (8 unless set), the order rotated each round and the tables emptied (with a
# VACUUM and a CHECKPOINT) before every run, so that no script runs on the
# rows of another. PGOPTIONS, when set, applies to pgbench's sessions.
# Needs doc-setup.sql applied. Empties workflows, runs, executions, tasks,
# history and docs: use a scratch database.
set -eu
db=$1 n=$2
shift 2
scripts=("$@") k=$#
dir=$(dirname "$0")
reset() { psql -d "$db" -q -c "TRUNCATE workflows, runs, executions, tasks, history, docs" -c "VACUUM ANALYZE" -c "CHECKPOINT"; }
for i in $(seq 1 "$n"); do
  for j in $(seq 0 $((k - 1))); do
    reset
    PER=workflow bash "$dir/machine-cpu.sh" "$db" "${scripts[$(( (i + j) % k ))]}" "${CLIENTS:-8}" "${PGOPTIONS:-}" 2>&1 | tail -1
  done
done
