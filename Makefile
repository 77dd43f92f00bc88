# Parley's developer commands. `make test` is what CI runs.

GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X parley.Version=$(VERSION)

.PHONY: run build test test-go test-web e2e web bench bench-gateway lint

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

## test: vet, every Go test with the race detector (PostgreSQL tests use
## PARLEY_TEST_POSTGRES and are skipped if it is unreachable, unless CI=true),
## the web client's type check and unit tests, then the browser e2e suite
test: web test-go test-web e2e

test-go:
	$(GO) vet ./...
	$(GO) test -race -count=1 ./...

test-web: web/node_modules/.package-lock.json
	cd web && npm run check && npm test

## e2e: Playwright in Debian's Chromium against a real parley (web/e2e);
## skipped when Chromium is missing, unless CI=true
e2e: web
	@if [ ! -x "$(CHROMIUM)" ] && [ "$$CI" != "true" ]; then \
		echo "e2e: SKIPPED: $(CHROMIUM) is missing (apt-get install chromium); under CI=true it runs"; \
	else \
		cd web && PARLEY_CHROMIUM="$(CHROMIUM)" PARLEY_E2E_SKIP_WEB_BUILD=1 npx playwright test -c e2e/playwright.config.ts; \
	fi

## bench: the store benchmarks
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./sqlstore/

## bench-gateway: the gateway end to end on loopback (docs/benchmarks.md):
## 10,000 sessions at one message a second, then 1,000 sessions with bursts
bench-gateway: build
	$(GO) run ./bench/gatewaybench -parley bin/parley -sessions 10000 -rate 1 -duration 30s
	$(GO) run ./bench/gatewaybench -parley bin/parley -sessions 1000 -burst 50 -burst-every 2s -duration 30s

## lint: gofmt and go vet
lint:
	@unformatted="$$(gofmt -l .)"; \
	if [ -n "$$unformatted" ]; then echo "gofmt -w needed on:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
