#!/bin/sh
# run-outbox-storms.sh BEFORE_BIN AFTER_BIN [OUT]
#
# Issue 15's storms before and after the outbox: for each scenario, the
# binary from before the outbox (BEFORE_BIN: built from 938ea3e^1, the
# main commit before "Merge h-chaos1") and main's (AFTER_BIN), back to
# back, each on a fresh PostgreSQL database (loadtest/run-seeded.sh with
# PG, default postgres://postgres@127.0.0.1:5432):
#
#   hot-channel  5,000 users in 10 channels, 100 msg/s into #general
#   join-spike   5,000 users, 4,950 joining one channel at 2,000 joins/s
#                asked (50 watchers), 2 msg/s into the others
#
# ORDER (default "before after") is the order of each pair; SCENARIOS
# (default "hot-channel join-spike") the scenarios run.
# Both servers are driven by AFTER_BIN's load tester. Reports in OUT
# (default out/outbox-storms)/<before|after>/<scenario>/ and the summary
# tables in <which>-<scenario>.txt, with the load average around each run.
set -eu
before=$1
after=$2
out=${3:-out/outbox-storms}
PG=${PG:-postgres://postgres@127.0.0.1:5432}
export PG
mkdir -p "$out"
run() { # run WHICH BIN SCENARIO FLAGS…
	which=$1 bin=$2 scenario=$3
	shift 3
	dir=$out/$which/$scenario
	mkdir -p "$dir"
	{
		echo "# $which, $(date -u +%H:%M:%SZ), load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
		PARLEY=$bin LOADTEST=$after METRICS=$dir/metrics.txt loadtest/run-seeded.sh 5000 10 \
			--scenario "$scenario" --out "$dir" "$@" 2>"$dir/stderr.txt" || echo "# exit status $?"
		echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
	} >"$out/$which-$scenario.txt"
}
for scenario in ${SCENARIOS:-hot-channel join-spike}; do
	for which in ${ORDER:-before after}; do
		eval bin=\$"$which"
		case $scenario in
		hot-channel) run "$which" "$bin" hot-channel --rate 100 ;;
		join-spike)
			run "$which" "$bin" join-spike --users 5000 --watchers 50 --rate 2000 --connect-rate 500 --duration 30s \
				--catch-up 120s --procs 2 --source-ips 127.0.0.1-127.0.0.4
			;;
		*) echo "run-outbox-storms: unknown scenario $scenario" >&2 && exit 2 ;;
		esac
	done
done
