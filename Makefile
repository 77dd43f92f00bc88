# Parley's developer commands. `make test` is what CI runs.

GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X parley.Version=$(VERSION)

.PHONY: run build test test-go s3-server mailpit bench-files test-web e2e web bench bench-gateway bench-peer bench-capacity bench-fetchspike bench-breaker loadtest loadtest-audience chaos soak storm move lint fuzz fuzz-short

CHROMIUM ?= /usr/bin/chromium

## run: build the web client, then start Parley with a demo workspace
## (SQLite in ./data, embedded NATS); open the printed URL
run: web
	$(GO) run -ldflags "$(LDFLAGS)" ./cmd/parley serve --demo

## build: build bin/parley (web client embedded) with the version from git describe
build: web
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/parley ./cmd/parley

## web: build the web client into webui/dist, which go:embed puts in the binary
## (npm ci runs when web/package-lock.json changed)
web: web/node_modules/.package-lock.json
	cd web && npm run build

web/node_modules/.package-lock.json: web/package.json web/package-lock.json
	cd web && npm ci --no-audit --no-fund

## test: lint (gofmt, go vet, Prettier), every Go test with the race detector
## (PostgreSQL tests use PARLEY_TEST_POSTGRES and are skipped if it is
## unreachable, unless CI=true), 500 executions of every fuzz target, the web
## client's type check and unit tests, then the browser e2e suite
test: lint web test-go fuzz-short test-web e2e

test-go: s3-server mailpit
	$(GO) vet ./...
	$(GO) test -race -count=1 ./...

## s3-server: build the S3 server the file storage tests run against
## (versitygw, pinned in internal/s3test) into the user cache directory,
## once; the tests reuse it. Under CI=true a failed build fails; otherwise
## the S3 tests skip with the reason.
s3-server:
	@$(GO) run ./internal/s3test/cmd/build-s3-server || [ "$$CI" != "true" ]

## mailpit: build the SMTP server the email tests run against (mailpit,
## pinned in internal/mailtest) into the user cache directory, once; a
## failed build skips those tests, unless CI=true (then it fails here)
mailpit:
	@$(GO) run ./internal/mailtest/cmd/build-mailpit || [ "$$CI" != "true" ]

## test-web: the web client's type check and unit tests; they include the first-load
## budget (web/app/bundle.test.ts), which reads the build, so build it first
test-web: web
	cd web && npm run check && npm test

## e2e: Playwright in Debian's Chromium against a real parley (web/e2e);
## skipped when Chromium is missing, unless CI=true
e2e: web
	@if [ ! -x "$(CHROMIUM)" ] && [ "$$CI" != "true" ]; then \
		echo "e2e: SKIPPED: $(CHROMIUM) is missing (apt-get install chromium); under CI=true it runs"; \
	else \
		cd web && PARLEY_CHROMIUM="$(CHROMIUM)" PARLEY_E2E_SKIP_WEB_BUILD=1 npx playwright test -c e2e/playwright.config.ts; \
	fi

## fuzz: every Go fuzz target of the module (as `go test -list` names them,
## in the packages whose tests declare one), FUZZTIME each (default 10s;
## a count such as 100000x avoids Go 1.26's deadline race, see fuzz-short).
## Crashers land in the package's testdata/fuzz/<Target>/: commit them as
## seeds with the fix.
FUZZTIME ?= 10s
fuzz:
	@set -e; $(GO) list -f '{{.ImportPath}} {{.Dir}}' ./... | while read -r pkg dir; do \
		grep -qs '^func Fuzz' "$$dir"/*_test.go || continue; \
		for target in $$($(GO) test -list '^Fuzz' "$$pkg" | grep '^Fuzz'); do \
			echo "fuzz: $$pkg $$target for $(FUZZTIME)"; \
			$(GO) test -run '^$$' -fuzz "^$$target\$$" -fuzztime $(FUZZTIME) "$$pkg"; \
		done; \
	done

## fuzz-short: every fuzz target for 500 executions (part of `make test`;
## the seeds alone already run in test-go). A count, not a duration: Go
## 1.26's fuzz coordinator can fail a duration run with "context deadline
## exceeded" and no crasher when the machine is loaded (golang/go#75804,
## fixed in Go 1.27).
fuzz-short:
	$(MAKE) fuzz FUZZTIME=500x

## bench: the store benchmarks
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./sqlstore/

## bench-files: a 200 MiB upload streamed to a real parley process with its RSS
## sampled, then 100 concurrent 1 MiB uploads; on the data directory and on a
## versitygw (docs/benchmarks.md, "Files")
bench-files: s3-server
	$(GO) run ./bench/filebench -big-mb 200 -n 100
	$(GO) run ./bench/filebench -big-mb 200 -n 100 -s3

## bench-breaker: a 2 s PostgreSQL stall through a fault proxy under steady
## load, with the store guard on and off (docs/benchmarks.md, docs/store-guard.md)
bench-breaker:
	PARLEY_BENCH_BREAKER=1 $(GO) test -count=1 -run TestBenchBreakerStall -v -timeout 5m ./cmd/parley/

## bench-gateway: the gateway end to end on loopback (docs/benchmarks.md):
## 10,000 sessions at one message a second, then 1,000 sessions with bursts
bench-gateway: build
	$(GO) run ./bench/gatewaybench -parley bin/parley -sessions 10000 -rate 1 -duration 30s
	$(GO) run ./bench/gatewaybench -parley bin/parley -sessions 1000 -burst 50 -burst-every 2s -duration 30s

## bench-peer: Parley against Centrifugo v5.4.9 (built from the Go module
## proxy into ~/.cache/parley-bench the first time), the same fan-out to
## 1,000 and 10,000 subscribers of one channel (docs/benchmarks.md)
bench-peer: build
	$(GO) run ./bench/peer -parley bin/parley -centrifugo-version v5.4.9 -subscribers 1000,10000 -rate 2 -duration 20s -rounds 3 -size 200

## bench-capacity: each server's open-loop capacity (p99 ≤ 500 ms, nothing
## lost) at 1,000 and 10,000 subscribers, the null server (the generator's
## ceiling) included; shared cores, then the generator on core 0 and the
## servers on core 1 (docs/benchmarks.md, "Open-loop capacity")
bench-capacity: build
	mkdir -p out
	$(GO) build -o bin/peer ./bench/peer
	bin/peer -parley bin/parley -centrifugo-version v5.4.9 -servers null,parley,centrifugo -subscribers 1000,10000 -capacity -duration 5s -size 200 -json out/capacity-shared.json
	taskset -c 0 bin/peer -parley bin/parley -centrifugo-version v5.4.9 -servers null,parley,centrifugo -subscribers 1000,10000 -capacity -duration 5s -size 200 -server-cpus 1 -json out/capacity-pinned.json

## bench-fetchspike: store queries per delivered event when 5,000 clients of
## one hot channel fetch /events after each message, on PostgreSQL, with the
## recent-events buffer off, coalescing alone and the buffer on, in one run
## (docs/benchmarks.md, "Fetch spike: the recent-events buffer")
bench-fetchspike:
	PARLEY_FETCHSPIKE_PG=1 PARLEY_FETCHSPIKE_CLIENTS=5000 PARLEY_FETCHSPIKE_USERS=200 PARLEY_FETCHSPIKE_MESSAGES=20 \
		$(GO) test -count=1 -run '^TestFetchSpike$$' -v -timeout 30m ./recent/

## lint: gofmt, go vet, and Prettier over the web client (web/.prettierrc)
lint: web/node_modules/.package-lock.json
	@unformatted="$$(gofmt -l .)"; \
	if [ -n "$$unformatted" ]; then echo "gofmt -w needed on:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	cd web && npm run format:check

## loadtest: every `parley loadtest` scenario at the sizes recorded in
## docs/benchmarks.md, each against a freshly seeded SQLite server
## (loadtest/run-seeded.sh); reports in out/loadtest/<scenario>/. Minutes
## of both cores: not part of `make test`.
loadtest: build
	loadtest/run-seeded.sh 5000 10 --scenario big-team-boot --connect-rate 250 --rate 1 --duration 20s --procs 2 --source-ips 127.0.0.1-127.0.0.4 --out out/loadtest/big-team-boot
	loadtest/run-seeded.sh 5000 10 --scenario reconnect-storm --connect-rate 500 --rate 2 --storm-after 10s --duration 40s --catch-up 60s --procs 2 --source-ips 127.0.0.1-127.0.0.4 --out out/loadtest/reconnect-storm
	loadtest/run-seeded.sh 5000 10 --scenario hot-channel --connect-rate 500 --rate 2 --duration 30s --procs 2 --source-ips 127.0.0.1-127.0.0.4 --out out/loadtest/hot-channel-5000
	loadtest/run-seeded.sh 1000 10 --scenario hot-channel --connect-rate 500 --rate 10 --duration 30s --out out/loadtest/hot-channel-1000
	loadtest/run-seeded.sh 1000 10 --scenario join-spike --connect-rate 500 --watchers 50 --rate 50 --duration 30s --out out/loadtest/join-spike
	loadtest/run-seeded.sh 3000 30 --scenario steady --connect-rate 500 --rate 100 --duration 30s --out out/loadtest/steady

## loadtest-hot: issue 13's hot channel at LINE's size (loadtest/run-hot.sh):
## 5,000 members of #general, 100 msg/s into it, 500 viewers, 50 msg/s into
## 100 other channels; baseline, view-aware delivery on and view_dry_run,
## against one seeded SQLite server; reports in out/loadtest/hot/. A few
## minutes of both cores.
loadtest-hot: build
	loadtest/run-hot.sh 5000 100 --connect-rate 500 --procs 2 --source-ips 127.0.0.1-127.0.0.4

## loadtest-audience: issue 19's before/after (loadtest/run-beforeafter.sh):
## builds bin/parley-before (f1d74cf) and bin/parley-after (HEAD) and runs
## the audience and join-spike scenarios on each, on a fresh PostgreSQL
## database each (PG, default postgres://postgres@127.0.0.1:5432); reports
## in out/beforeafter/. About half an hour of both cores.
loadtest-audience:
	loadtest/run-beforeafter.sh

## soak: issue 15's soak (loadtest/run-soak.sh, docs/benchmarks.md "Soak"):
## one `parley serve` on a fresh PostgreSQL database (PG_SERVER, default
## postgres://postgres@127.0.0.1:5432), 2,000 users, steady and hot-channel
## traffic at once for an hour (about 70 % of what this machine delivers),
## sampled every 30 s (goroutines, heap, RSS, open files, database
## connections) with heap and goroutine profiles at the start and the end;
## fails unless every series stayed flat. Results in out/soak/. Not CI
## (TestSoakSampler is its CI size).
PG_SERVER ?= postgres://postgres@127.0.0.1:5432
soak: build
	PG='$(PG_SERVER)' loadtest/run-soak.sh $(or $(SOAK_DURATION),1h) out/soak

## chaos: issue 15's long chaos run (docs/reliability.md): 3 nodes on a
## fresh PostgreSQL database (PG, default postgres://postgres@127.0.0.1:5432),
## 20 minutes of steady and hot-channel traffic with a fault every 5–20 s
## (kill -9, SIGSTOP, pg_terminate_backend, a stalled database: 50–70 of
## them), then the histories checked; CHAOS_SEED=n replays a schedule.
## Report in out/chaos/. Not part of `make test` (TestChaos is its CI size).
PG ?= postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable
chaos: build
	bin/parley chaos --postgres '$(PG)' --nodes 3 --users 60 --channels 8 --writers 15 --rate 30 \
		--duration 20m --seed $(or $(CHAOS_SEED),0) --out out/chaos

## move: issue 17 item 5's evidence (docs/directory.md "Moving a workspace"):
## 2 store-routed nodes on a control database (shard local) and a second
## shard on PostgreSQL (PG, as for chaos), 500 gateway sessions, 50 posts/s
## through the HTTP API, the workspace moved by `parley workspaces move`
## after 20 s, 20 s more load, then the histories and both shards checked.
## Report in out/move (move.json, chaos.html). Not part of `make test`.
move: build
	bin/parley loadtest move --postgres '$(PG)' --nodes 2 --users 500 --channels 8 --writers 50 --rate 50 \
		--before 20s --after 20s --out out/move

## storm: issue 15's whole-fleet reconnect storm (docs/reliability.md):
## 3 nodes on a fresh PostgreSQL database (PG, as for chaos), 5,000
## sessions, every socket cut at once, then a rolling restart of every
## node; sessions back, database transactions against a steady window,
## resume sources. Report in out/fleet-storm/. Not part of `make test`
## (TestFleetStorm is its CI size).
storm: build
	bin/parley loadtest fleet-storm --postgres '$(PG)' --nodes 3 --sessions 5000 --rate 20 --window 15s \
		--rolling-restart --out out/fleet-storm
