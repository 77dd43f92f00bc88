#!/bin/sh
# run-hot.sh [USERS [CHANNELS [parley loadtest flags…]]]
#
# Issue 13's hot-channel evidence in one run: seeds USERS users (default
# 5,000, all in #general) and CHANNELS other channels (default 100, user i
# in load-(i mod CHANNELS + 1)) once, starts one `parley serve` with its
# admin listener on, and runs the hot-channel scenario three times against
# it:
#
#   baseline  no messages into #general, only --other-rate into the others
#   view      view-aware delivery on (the default live configuration)
#   dryrun    `parley config set view_dry_run=true`: every member gets
#             every event, the summaries are only counted
#
# then prints the three side by side (jq). Reports go to
# $OUT/{baseline,view,dryrun}/ (default out/loadtest/hot). Flags after
# CHANNELS go to every run, after the defaults (later flags win):
# --rate 100 --other-rate 50 --posters 100 --duration 20s.
# MODES (default "baseline view dryrun") picks the runs. PARLEY (default
# bin/parley), PORT (18181), ADMIN_PORT (18191), PG as in run-seeded.sh.
set -eu
bin=${PARLEY:-bin/parley}
port=${PORT:-18181}
admin=127.0.0.1:${ADMIN_PORT:-18191}
out=${OUT:-out/loadtest/hot}
users=${1:-5000}
channels=${2:-100}
[ $# -ge 2 ] && shift 2 || shift $#
name=run-hot
# shellcheck source=loadtest/seeded-server.sh
. "$(dirname "$0")/seeded-server.sh"
cfg() { "$bin" config --admin "$admin" set "$@" >/dev/null; }
run() {
	name=$1
	shift
	echo "== run-hot: $name" >&2
	mkdir -p "$out/$name"
	# A run that loses events exits 1; the comparison still wants its figures.
	"$bin" loadtest --url "http://127.0.0.1:$port" --seed "$dir/seed.json" --server-pid "$pid" \
		--scenario hot-channel --rate 100 --other-rate 50 --posters 100 --duration 20s \
		--out "$out/$name" "$@" || echo "run-hot: $name failed (exit $?)" >&2
}
modes=${MODES:-baseline view dryrun}
for m in $modes; do
	case $m in
	baseline)
		cfg view_enabled=true view_dry_run=false
		run baseline --baseline "$@"
		;;
	view)
		cfg view_enabled=true view_dry_run=false
		run view "$@"
		;;
	dryrun)
		cfg view_enabled=true view_dry_run=true
		run dryrun "$@"
		cfg view_dry_run=false
		;;
	*)
		echo "run-hot: unknown mode $m (baseline, view, dryrun)" >&2
		exit 2
		;;
	esac
done
echo
echo "hot channel: $users members, $channels other channels ($out)"
for m in $modes; do
	[ -f "$out/$m/result.json" ] || continue
	jq -r --arg m "$m" '
		def f(x): if x == null then "-" else (x * 100 | round / 100 | tostring) end;
		def lat(k): if .latency[k] == null then "-" else "\(f(.latency[k].p50_ms)) / \(f(.latency[k].p99_ms))" end;
		"\($m):\tdeliveries \(.deliveries)\tframes/s \(f(.extra.load_frames_per_s))\tserver CPU-ms/1000 deliveries \(f(.extra.server_cpu_s_per_1000_deliveries * 1000)) (server CPU-s \(f(.extra.all_server_cpu_seconds)))\twrites/delivery \(f(.extra.server_syscw_per_delivery))\tviewers p50/p99 \(lat("delivery")) ms\tother p50/p99 \(lat("other_delivery")) ms\tsummaries \(f(.extra.summaries))\tlost/dup/ooo \(.lost)/\(.duplicated)/\(.out_of_order) (viewers \(f(.extra.viewer_lost))/\(f(.extra.viewer_duplicated))/\(f(.extra.viewer_out_of_order)))\tcaught up \(f(.extra.caught_up_s)) s\tposts \(.offered | map("\(.name) \(f(.achieved_rate))/\(f(.asked_rate))") | join(", "))"
	' "$out/$m/result.json"
done
