#!/bin/bash
# fill-pg-conns.sh SECONDS [PSQL-ARGS…]: keep a PostgreSQL server at its
# max_connections for SECONDS with short sessions (2–5 s each, opened
# whenever a slot is free), the way parallel test packages on one server
# do. Used to reproduce a chaos run's node restart meeting "too many
# clients already" (docs/reliability.md). Default server: 127.0.0.1:5432.
set -u
secs=${1:?usage: fill-pg-conns.sh SECONDS [psql args]}
shift
psqlargs=("$@")
[ ${#psqlargs[@]} -eq 0 ] && psqlargs=(-h 127.0.0.1 -U postgres)
max=$(psql "${psqlargs[@]}" -Atc 'show max_connections')
end=$((SECONDS + secs))
while [ $SECONDS -lt $end ]; do
  n=$(psql "${psqlargs[@]}" -Atc "select count(*) from pg_stat_activity where backend_type = 'client backend'" 2>/dev/null || echo "$max")
  for _ in $(seq 1 $((max - n))); do
    psql "${psqlargs[@]}" -Atc 'select pg_sleep(2 + random() * 3)' >/dev/null 2>&1 &
  done
  sleep 0.3
done
wait
