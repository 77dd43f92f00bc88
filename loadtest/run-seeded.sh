#!/bin/sh
# run-seeded.sh USERS CHANNELS [parley loadtest flags…]
#
# A load test at a size the API setup cannot reach in reasonable time:
# seeds a fresh SQLite database with `parley seed` (USERS users sharing one
# password hash, CHANNELS public channels besides #general, one session
# token each), starts `parley serve` on it (identify rate lifted: every
# socket comes from this machine), runs `parley loadtest --seed …` with the
# remaining flags, then stops the server and removes the database.
# PARLEY (default bin/parley) is the binary; PORT (default 18181) the port.
set -eu
bin=${PARLEY:-bin/parley}
port=${PORT:-18181}
users=$1
channels=$2
shift 2
dir=$(mktemp -d)
pid=
cleanup() {
	if [ -n "$pid" ]; then
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	rm -rf "$dir"
}
trap cleanup EXIT INT TERM
ulimit -n "$(ulimit -Hn)"
"$bin" seed --data "$dir" --users "$users" --channels "$channels" --out "$dir/seed.json" --log-level warn
"$bin" serve --data "$dir" --listen "127.0.0.1:$port" --admin off --identify-rate 10000000 --rate-message-ip off --rate-write-ip off --rate-create-ip off --rate-search-ip off --log-level warn >"$dir/serve.log" 2>&1 &
pid=$!
i=0
until grep -q "Parley is running at" "$dir/serve.log" 2>/dev/null; do
	i=$((i + 1))
	if [ "$i" -gt 300 ] || ! kill -0 "$pid" 2>/dev/null; then
		echo "run-seeded: the server did not start:" >&2
		cat "$dir/serve.log" >&2
		exit 1
	fi
	sleep 0.1
done
"$bin" loadtest --url "http://127.0.0.1:$port" --seed "$dir/seed.json" --server-pid "$pid" "$@"
