#!/bin/sh
# run-seeded.sh USERS CHANNELS [parley loadtest flags…]
#
# A load test at a size the API setup cannot reach in reasonable time:
# seeds a fresh database with `parley seed` (USERS users sharing one
# password hash, CHANNELS public channels besides #general, one session
# token each), starts `parley serve` on it (identify rate and per-address
# API limits lifted: every socket comes from this machine), runs `parley
# loadtest --seed …` with the remaining flags, then stops the server and
# removes the database.
#
# The store is SQLite in a temporary directory, or with PG=postgres://…
# (a server URL without a database, such as
# postgres://postgres@127.0.0.1:5432) a fresh PostgreSQL database made for
# the run with psql and dropped at the end.
# PARLEY (default bin/parley) is the binary that seeds and serves;
# LOADTEST (default PARLEY) the one that drives the load; PORT (default
# 18181) the port.
# With CONFIG="key=value …" the server's admin listener is on (port
# PORT+1) and `parley config set CONFIG` runs before the load; with
# METRICS=file the server's /metrics are saved there after it.
set -eu
bin=${PARLEY:-bin/parley}
driver=${LOADTEST:-$bin}
port=${PORT:-18181}
admin=off
if [ -n "${CONFIG:-}" ] || [ -n "${METRICS:-}" ]; then
	admin=127.0.0.1:$((port + 1))
fi
users=$1
channels=$2
shift 2
name=run-seeded
# shellcheck source=loadtest/seeded-server.sh
. "$(dirname "$0")/seeded-server.sh"
if [ -n "${CONFIG:-}" ]; then
	# shellcheck disable=SC2086 # CONFIG is several key=value words
	"$bin" config --admin "$admin" set $CONFIG >/dev/null
fi
status=0
"$driver" loadtest --url "http://127.0.0.1:$port" --seed "$dir/seed.json" --server-pid "$pid" "$@" || status=$?
if [ -n "${METRICS:-}" ]; then
	curl -sf "http://$admin/metrics" >"$METRICS" || echo "run-seeded: could not read /metrics" >&2
fi
exit "$status"
