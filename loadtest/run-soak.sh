#!/bin/sh
# run-soak.sh [DURATION [OUT]]
#
# The soak of issue 15 (`make soak`, not CI): a fresh PostgreSQL database
# (PG, default postgres://postgres@127.0.0.1:5432) seeded with USERS users
# (default 2000) and CHANNELS channels (default 20), one `parley serve` on
# it (admin listener on PORT+1), and for DURATION (default 1h) at once:
#   - steady traffic: every user, STEADY_RATE actions/s (default 40);
#   - hot-channel traffic: the first HOT_USERS users (default 1000),
#     HOT_RATE msg/s into #general (default 5) and HOT_OTHER msg/s into the
#     other channels (default 5);
#   - `parley loadtest soak`, sampling the server every EVERY (default 30s):
#     goroutines, heap in use, RSS, open files, the database's connections;
#     heap and goroutine profiles at the start and the end; the verdict.
# The load runs a little longer than the sampling so that the last window
# is under load. Everything goes to OUT (default out/soak): soak.csv,
# soak.json, *.pb.gz, steady/ and hot/ (the load tester's reports), and
# the server's log. The exit status is the verdict's (and the load
# tester's: nothing lost, duplicated or reordered).
set -eu
bin=${PARLEY:-bin/parley}
port=${PORT:-18281}
admin=127.0.0.1:$((port + 1))
duration=${1:-1h}
out=${2:-out/soak}
users=${USERS:-2000}
channels=${CHANNELS:-20}
PG=${PG:-postgres://postgres@127.0.0.1:5432}
name=run-soak
mkdir -p "$out"
# The load outlasts the sampler by two minutes (go durations: 1h, 20s…).
load=$(awk -v d="$duration" 'BEGIN {
	n = d + 0; u = d; sub(/^[0-9.]+/, "", u)
	s = (u == "h") ? n * 3600 : (u == "m") ? n * 60 : n
	printf "%ds", s + (s >= 600 ? 120 : 2)
}')
# shellcheck source=loadtest/seeded-server.sh
. "$(dirname "$0")/seeded-server.sh"
status=0
"$bin" loadtest soak --admin "http://$admin" --db "$PG/$db?sslmode=disable" --duration "$duration" \
	--every "${EVERY:-30s}" --out "$out" >"$out/verdict.txt" 2>"$out/samples.log" &
soak=$!
"$bin" loadtest --url "http://127.0.0.1:$port" --seed "$dir/seed.json" --server-pid "$pid" \
	--scenario steady --rate "${STEADY_RATE:-40}" --connect-rate 200 --duration "$load" \
	--catch-up 60s --out "$out/steady" >"$out/steady.txt" 2>"$out/steady.log" &
steady=$!
"$bin" loadtest --url "http://127.0.0.1:$port" --seed "$dir/seed.json" --users "${HOT_USERS:-1000}" \
	--scenario hot-channel --rate "${HOT_RATE:-5}" --other-rate "${HOT_OTHER:-5}" --connect-rate 200 \
	--duration "$load" --catch-up 60s --out "$out/hot" >"$out/hot.txt" 2>"$out/hot.log" &
hot=$!
wait "$soak" || status=$?
wait "$steady" || status=$?
wait "$hot" || status=$?
cp "$dir/serve.log" "$out/serve.log" 2>/dev/null || true
cat "$out/verdict.txt"
exit "$status"
