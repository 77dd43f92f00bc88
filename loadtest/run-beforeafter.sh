#!/bin/sh
# run-beforeafter.sh [BEFORE [AFTER]]
#
# Issue 19's before/after: builds bin/parley-before from commit BEFORE
# (default f1d74cf, the last main before audience routing) and
# bin/parley-after from AFTER (default HEAD), then runs, for each in turn
# and back to back, on a fresh PostgreSQL database each
# (loadtest/run-seeded.sh with PG, default
# postgres://postgres@127.0.0.1:5432):
#
#   audience    10,000 users seeded in 50 channels, 2,000 sessions online
#               with views of ~50 users; 100 status changes, 1,000 channel
#               joins, 500 workspace joins at 50 actions/s
#   join-spike  5,000 users seeded in 10 channels, all online; 4,950 join
#               one channel, 2,000 joins/s asked; 2 messages/s meanwhile
#               into the other channels
#
# Both servers are driven by the after binary's load tester (the before
# binary has no audience scenario). Reports: OUT (default out/beforeafter)
# /<before|after>/<scenario>/{result.json,report.html} and <scenario>.txt
# (the summary table, with the load average before the run); a comparison
# is printed at the end. SKIP_BUILD=1 uses the binaries in bin/ as they
# are; WHICH=before (or after) runs one side.
set -eu
before=${1:-f1d74cf}
after=${2:-HEAD}
PG=${PG:-postgres://postgres@127.0.0.1:5432}
export PG
out=${OUT:-out/beforeafter}
mkdir -p bin "$out"

build() { # build COMMIT BINARY
	src=$(mktemp -d)
	git archive "$1" | tar -x -C "$src"
	here=$(pwd)
	(cd "$src" && go build -o "$here/$2" ./cmd/parley)
	rm -rf "$src"
	echo "built $2 from $1 ($(git rev-parse --short "$1"))"
}
if [ -z "${SKIP_BUILD:-}" ]; then # SKIP_BUILD=1: the binaries are there
	build "$before" bin/parley-before
	build "$after" bin/parley-after
fi

run() { # run WHICH SCENARIO USERS CHANNELS FLAGS…
	which=$1 scenario=$2 users=$3 channels=$4
	shift 4
	dir=$out/$which/$scenario
	mkdir -p "$dir"
	{
		echo "# $which ($(git rev-parse --short "$(eval echo \$"$which")")), $(date -u +%H:%M:%SZ), load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
		PARLEY=bin/parley-$which LOADTEST=bin/parley-after loadtest/run-seeded.sh "$users" "$channels" \
			--scenario "$scenario" --out "$dir" "$@" 2>"$dir/stderr.txt" || echo "# exit status $?"
		echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
	} | tee "$out/$which/$scenario.txt"
}

for which in ${WHICH:-before after}; do # WHICH=before: one side only
	run "$which" audience 10000 50 --users 2000 --rate 50 --connect-rate 250 --catch-up 60s --source-ips 127.0.0.1-127.0.0.4
	run "$which" join-spike 5000 10 --users 5000 --watchers 50 --rate 2000 --connect-rate 500 --duration 30s --catch-up 120s --procs 2 --source-ips 127.0.0.1-127.0.0.4
done

if command -v jq >/dev/null; then
	echo
	echo "join-spike: which, accepted joins/s, frames per join, join API p50 ms, member.joined delivery p50 ms, other channels' delivery p99 ms, lost"
	for which in before after; do
		jq -r --arg w "$which" '[$w, (.extra.joins_accepted_rate // 0 | floor), (.extra.frames_per_join // 0 | floor), .latency.join_api.p50_ms, .latency.join_delivery.p50_ms, .latency.delivery.p99_ms, .lost] | @tsv' "$out/$which/join-spike/result.json" || true
	done
	echo
	echo "audience: which, phase, ok, frames/action (own event), broadcast frames/action, server CPU-s/action, misdirected frames; then mix ratio and stale entries"
	for which in before after; do
		jq -r --arg w "$which" '.audience as $a | ($a.phases[] | [$w, .name, .ok, (.action_frames / .ok * 10 | floor / 10), (.broadcast_frames / .ok | floor), (.server_cpu_s / .ok * 10000 | floor / 10000), ([.misdirected[]] | add // 0)] | @tsv), ([$w, "mix", ($a.mix_ratio * 10 | floor / 10), "stale", $a.stale_entries] | @tsv)' "$out/$which/audience/result.json" || true
	done
fi
