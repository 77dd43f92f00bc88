# Parley's developer commands. `make test` is what CI runs.

GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X parley.Version=$(VERSION)

.PHONY: run build test bench lint

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

## lint: gofmt and go vet
lint:
	@unformatted="$$(gofmt -l .)"; \
	if [ -n "$$unformatted" ]; then echo "gofmt -w needed on:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
