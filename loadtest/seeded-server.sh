# seeded-server.sh: sourced by run-seeded.sh and run-hot.sh, which set bin
# (the parley binary), port, admin (an address, or off), users, channels,
# name (for messages) and, optionally, PG (as in run-seeded.sh).
#
# Seeds a fresh store in a temporary directory (SQLite, or a fresh
# PostgreSQL database made with psql) with `parley seed`, starts `parley
# serve` on it with the identify rate and per-address API limits lifted
# (every socket comes from this machine) and waits for it. It leaves dir
# (seed.json is there) and pid set, and removes the server, the database
# and the directory when the script exits.
dir=$(mktemp -d)
pid=
db=
store="--data $dir"
if [ -n "${PG:-}" ]; then
	db=parley_lt_$(date +%s)_$$
	psql "$PG/postgres" -qc "CREATE DATABASE $db" >/dev/null
	store="--db $PG/$db?sslmode=disable"
fi
cleanup() {
	if [ -n "$pid" ]; then
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	if [ -n "$db" ]; then
		psql "$PG/postgres" -qc "DROP DATABASE IF EXISTS $db" >/dev/null || true
	fi
	rm -rf "$dir"
}
trap cleanup EXIT INT TERM
ulimit -n "$(ulimit -Hn)"
# shellcheck disable=SC2086 # $store is two words
"$bin" seed $store --users "$users" --channels "$channels" --out "$dir/seed.json" --log-level warn
# shellcheck disable=SC2086
"$bin" serve $store --listen "127.0.0.1:$port" --admin "$admin" --identify-rate 10000000 --rate-message-ip off --rate-write-ip off --rate-create-ip off --rate-search-ip off --rate-signup-ip off --log-level warn >"$dir/serve.log" 2>&1 &
pid=$!
i=0
until grep -q "Parley is running at" "$dir/serve.log" 2>/dev/null; do
	i=$((i + 1))
	if [ "$i" -gt 300 ] || ! kill -0 "$pid" 2>/dev/null; then
		echo "$name: the server did not start:" >&2
		cat "$dir/serve.log" >&2
		exit 1
	fi
	sleep 0.1
done
