# Parley's developer commands. `make test` is what CI runs.

GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X parley.Version=$(VERSION)

.PHONY: run build test bench bench-gateway bench-peer lint

## run: start Parley with a demo workspace (SQLite in ./data, embedded NATS)
run:
	$(GO) run -ldflags "$(LDFLAGS)" ./cmd/parley serve --demo

## build: build bin/parley with the version from git describe
build:
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/parley ./cmd/parley

## test: vet, then every test with the race detector (PostgreSQL tests use
## PARLEY_TEST_POSTGRES and are skipped if it is unreachable, unless CI=true)
test:
	$(GO) vet ./...
	$(GO) test -race -count=1 ./...

## bench: the store benchmarks
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./sqlstore/

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

## lint: gofmt and go vet
lint:
	@unformatted="$$(gofmt -l .)"; \
	if [ -n "$$unformatted" ]; then echo "gofmt -w needed on:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
