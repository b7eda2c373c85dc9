# iwf-server developer commands. `make help` lists them.
SHELL     := /bin/bash
GO        ?= go
BIN       ?= bin/iwf-server
IMAGE     ?= iwf-server:dev
# The release number lives in one file, which the binaries embed; the
# commit and the build date reach them through -ldflags (package
# internal/buildinfo), so that a build outside git names them too.
VERSION    := $(shell cat internal/buildinfo/VERSION)
COMMIT     ?= $(shell git rev-parse HEAD 2>/dev/null)$(shell test -z "$$(git status --porcelain 2>/dev/null)" || echo -dirty)
BUILD_DATE ?= $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
# Evaluated once, so that every binary of a release says the same.
COMMIT     := $(COMMIT)
BUILD_DATE := $(BUILD_DATE)
BUILDINFO  := github.com/iwf-server/iwf-server/internal/buildinfo
LDFLAGS    := -X $(BUILDINFO).commit=$(COMMIT) -X $(BUILDINFO).buildDate=$(BUILD_DATE)
RELEASE_PLATFORMS ?= linux/amd64 linux/arm64 darwin/arm64
# Tracked files larger than this (bytes) fail make verify, except under
# testdata/ and docs/.
MAX_FILE_BYTES ?= 1048576
# The PostgreSQL suite runs when this URL is set or a server answers on
# 127.0.0.1:5432; CI sets IWF_TEST_POSTGRES_REQUIRED=1 so a missing
# PostgreSQL fails the run instead of skipping.
export IWF_TEST_POSTGRES_URL

.PHONY: help run build release test test-stress verify generate lint check-size docker bench bench-dbos fuzz chaos chaos-failover chaos-net soak batch-check limits-check mixed-version

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

run: ## start the server on the embedded SQLite store (./iwf.db)
	$(GO) run ./cmd/iwf-server

build: ## build the server binary into bin/
	CGO_ENABLED=0 $(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/iwf-server

# A release is built from a commit: a tree with changes (tracked or not)
# is refused unless ALLOW_DIRTY=1, and its binaries then say "-dirty".
release: ## static iwf-server and iwf for RELEASE_PLATFORMS into dist/, named with the version, and dist/SHA256SUMS
	@if [ "$(ALLOW_DIRTY)" != 1 ] && [ -n "$$(git status --porcelain)" ]; then \
		echo "release: the tree has changes (git status); commit them, or make release ALLOW_DIRTY=1"; exit 1; fi
	@rm -rf dist && mkdir -p dist
	@for p in $(RELEASE_PLATFORMS); do \
		os=$${p%/*}; arch=$${p#*/}; \
		for cmd in iwf-server iwf; do \
			out=dist/$${cmd}_$(VERSION)_$${os}_$${arch}; echo "== $$out"; \
			CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -ldflags "-s -w $(LDFLAGS)" -o $$out ./cmd/$$cmd || exit 1; \
		done; \
	done
	@cd dist && if command -v sha256sum >/dev/null; then sha256sum iwf*_$(VERSION)_*; else shasum -a 256 iwf*_$(VERSION)_*; fi >SHA256SUMS
	@echo "release $(VERSION) (commit $(COMMIT), built $(BUILD_DATE)):"; cat dist/SHA256SUMS

test: ## run all tests (SQLite always; PostgreSQL when reachable): server, SDK and deploy/check modules, one summary
	@out=$$(mktemp); status=0; failed=""; \
	echo "== server module"; \
	$(GO) test -count=1 ./... 2>&1 | tee -a $$out; test $${PIPESTATUS[0]} -eq 0 || { status=1; failed="$$failed server"; }; \
	echo "== SDK module (sdk-go)"; \
	(cd sdk-go && $(GO) test -count=1 ./...) 2>&1 | tee -a $$out; test $${PIPESTATUS[0]} -eq 0 || { status=1; failed="$$failed sdk-go"; }; \
	echo "== deployment files (deploy/check: Helm chart, compose, systemd)"; \
	(cd deploy/check && $(GO) test -count=1 ./...) 2>&1 | tee -a $$out; test $${PIPESTATUS[0]} -eq 0 || { status=1; failed="$$failed deploy/check"; }; \
	echo "== summary"; \
	echo "packages passed: $$(grep -c '^ok ' $$out)"; \
	if [ $$status -eq 0 ]; then echo "all tests passed"; else \
		echo "FAILED in:$$failed"; grep -E '^(FAIL|---  *FAIL|panic:)' $$out | grep -v '^FAIL$$' | sort -u; fi; \
	rm -f $$out; exit $$status

test-stress: ## make test while two CPU-bound processes load the machine
	@pids=""; for i in 1 2; do sh -c 'while :; do :; done' & pids="$$pids $$!"; done; \
	trap 'kill $$pids 2>/dev/null' EXIT INT TERM; \
	echo "== two CPU-bound processes running:$$pids"; \
	$(MAKE) --no-print-directory test

generate: ## regenerate code from api/openapi.yaml (server and SDK)
	$(GO) generate ./api/...
	cd sdk-go && $(GO) generate .

verify: generate lint check-size ## regenerate and fail if anything changed; gofmt + vet; no large tracked files
	@git diff --exit-code -- api/ sdk-go/internal/wire/ || (echo "generated code is stale: run 'make generate' and commit" && exit 1)
	@test -z "$$(git status --porcelain -- api/ sdk-go/internal/wire/)" || (git status --porcelain -- api/ sdk-go/internal/wire/ && echo "generate left untracked files" && exit 1)

lint: ## gofmt and go vet (server and SDK)
	@out=$$(gofmt -l $$(git ls-files '*.go')); test -z "$$out" || (echo "gofmt needed:"; echo "$$out"; exit 1)
	$(GO) vet ./...
	cd sdk-go && $(GO) vet ./...
	cd deploy/check && $(GO) vet ./...

check-size: ## fail when a tracked file outside testdata/ and docs/ is larger than MAX_FILE_BYTES (1 MB)
	@big=$$(git ls-files -s | awk -F'\t' '{split($$1, a, " "); print a[2] " " $$2}' \
		| git cat-file --batch-check='%(objectsize) %(rest)' \
		| awk -v max=$(MAX_FILE_BYTES) '$$1 > max && $$2 !~ /(^|\/)testdata\// && $$2 !~ /^docs\//'); \
	if [ -n "$$big" ]; then echo "tracked files over $(MAX_FILE_BYTES) bytes (build outputs belong in bin/ or dist/, data in testdata/):"; \
		echo "$$big" | awk '{printf "  %s (%d bytes)\n", substr($$0, index($$0, " ") + 1), $$1}'; exit 1; fi

docker: ## build the container image
	docker build --build-arg COMMIT=$(COMMIT) --build-arg BUILD_DATE=$(BUILD_DATE) -t $(IMAGE) .

# Each fuzz target runs for FUZZTIME in turn; crashers land in the
# package's testdata/fuzz/<Target>/ and then run with every `make test`.
FUZZTIME  ?= 1m
FUZZ_TARGETS := FuzzAPIRequest:./internal/httpapi FuzzRewriteBody:./internal/httpapi FuzzSearchQuery:./search \
	FuzzWorkerAnswer:./engine FuzzDecodeRecord:./engine/internal/record

fuzz: ## run every fuzz target for FUZZTIME (default 1m) each, one after another
	@for t in $(FUZZ_TARGETS); do \
		name=$${t%%:*}; pkg=$${t#*:}; \
		echo "== $$name ($$pkg, $(FUZZTIME))"; \
		$(GO) test -run '^$$' -fuzz "^$$name$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	done

bench: ## run the load generator against SQLite and PostgreSQL
	$(GO) run ./cmd/iwf-bench

bench-dbos: ## W1 @1 and W1b against DBOS Transact (../shared/peerbench), three interleaved rounds
	$(GO) run ./cmd/iwf-bench -peer dbos

# CHAOS_KILLS random SIGKILLs per store (make test runs 10), and kills/50 (at
# least one) pauses of the workload's type and of the worker's host; each
# store's run prints one line: kills=N pauses=P workflows=W lost=0
# double_applied=0 repeated_calls=R scope_pauses=S held_calls=H paused_calls=0,
# and one of its linearizability check (internal/chaos/linear_test.go):
# linearizability: store=S faults=F ops=N indeterminate=I violations=0.
# CHAOS_LINEAR=N makes that check N operations per workflow, the faults going
# on until they are done (by default its clients run while the faults strike).
CHAOS_KILLS ?= 100

limits-check: ## two nodes on PostgreSQL, a worker-host limit of 5, 200 workflows whose execute takes 200 ms: prints max_concurrency, duration (target 8s +-20%)
	@mkdir -p bin; IWF_LIMITS_WORKFLOWS=$${IWF_LIMITS_WORKFLOWS:-200} IWF_LIMITS_CHECK=1 IWF_LIMITS_TARGET=$${IWF_LIMITS_TARGET:-8s} IWF_LIMITS_LEASE=$${IWF_LIMITS_LEASE:-10s} \
		$(GO) test -count=1 -run '^TestTwoNodesWorkerConcurrencyLimit$$' -v ./internal/crashtest/ >bin/limits-check.log 2>&1; status=$$?; \
	grep -E '^(max_concurrency=|--- |ok|FAIL)' bin/limits-check.log; \
	if [ $$status -ne 0 ]; then echo "the whole output (server logs, permit rows, tasks): bin/limits-check.log"; fi; exit $$status

chaos: ## kill the server CHAOS_KILLS (default 100) times under a mixed workload on SQLite and PostgreSQL, then check every workflow
	@for run in 'TestChaos/sqlite' 'TestChaos/postgres' 'TestChaosPostgresRestart'; do \
		echo "== $$run (CHAOS_KILLS=$(CHAOS_KILLS))"; out=$$(mktemp); start=$$(date +%s); \
		CHAOS_KILLS=$(CHAOS_KILLS) $(GO) test -count=1 -timeout 0 -v -run "^$${run%%/*}\$$/$${run#*/}" ./internal/chaos/ >$$out 2>&1; status=$$?; \
		grep -E '^(kills=|linearizability:)' $$out; echo "wall time: $$(( $$(date +%s) - start ))s"; \
		if [ $$status -ne 0 ]; then cat $$out; rm -f $$out; exit 1; fi; rm -f $$out; \
	done
	@$(MAKE) --no-print-directory chaos-failover

# CHAOS_FAILOVERS PostgreSQL failovers (make test runs 1): the primary of a
# synchronous pair is SIGKILLed, the standby promoted, the old primary rebuilt
# as the new standby; prints failovers=N workflows=W lost=0 double_applied=0
# longest_unavailable=D (first 503 to the next 200 the workload saw).
CHAOS_FAILOVERS ?= 5

chaos-failover: ## fail PostgreSQL over CHAOS_FAILOVERS (default 5) times under the mixed workload on two nodes, then check every workflow
	@echo "== TestChaosFailover (CHAOS_FAILOVERS=$(CHAOS_FAILOVERS))"; out=$$(mktemp); start=$$(date +%s); \
	CHAOS_FAILOVERS=$(CHAOS_FAILOVERS) $(GO) test -count=1 -timeout 0 -v -run '^TestChaosFailover$$' ./internal/chaos/ >$$out 2>&1; status=$$?; \
	grep -E '^failovers=|periods of unavailability' $$out; echo "wall time: $$(( $$(date +%s) - start ))s"; \
	if [ $$status -ne 0 ]; then cat $$out; rm -f $$out; exit 1; fi; rm -f $$out

# Network faults (toxiproxy between a node and PostgreSQL: 200 ms latency, a
# bandwidth limit, resets, a black hole; CHAOS_NETFAULTS of each, default 1)
# and clock skew (a node under libfaketime 90 s ahead, then behind), each
# under the mixed workload and the checker; CI runs it after make test.
chaos-net: ## network faults between a node and PostgreSQL, and a node with a skewed clock, under the chaos workload
	@out=$$(mktemp); start=$$(date +%s); \
	IWF_CHAOS_NET=1 $(GO) test -count=1 -timeout 20m -v -run '^(TestNetFaults|TestClockSkew)$$' ./internal/chaos/ >$$out 2>&1; status=$$?; \
	grep -E '^(kills=|netfaults=|skew=)' $$out; echo "wall time: $$(( $$(date +%s) - start ))s"; \
	if [ $$status -ne 0 ]; then grep -E -- '--- FAIL|_test.go:[0-9]+:' $$out | head -100; fi; rm -f $$out; exit $$status

# The mixed-version test: two nodes of the previous release (named in
# internal/mixedtest/PREVIOUS_RELEASE, built from git history) under the
# chaos workload, this tree's migrations applied under them, two nodes of
# this tree beside them, the old ones stopped with SIGTERM; then the
# previous release's store conformance suite on this tree's schema. Prints
# mixed-version: previous=<commit> workflows=N old_calls=A new_calls=B
# lost=0 double_applied=0 old_errors=0; CI runs it after make test.
mixed-version: ## the previous release's nodes beside this tree's on one PostgreSQL database, and its conformance suite on this tree's schema
	@mkdir -p bin; start=$$(date +%s); \
	IWF_MIXED_VERSION=1 $(GO) test -count=1 -timeout 20m -v -run '^TestMixedVersion$$' ./internal/chaos/ >bin/mixed-version.log 2>&1; status=$$?; \
	grep -E '^mixed-version' bin/mixed-version.log; echo "wall time: $$(( $$(date +%s) - start ))s"; \
	if [ $$status -ne 0 ]; then grep -E -- '--- FAIL|_test.go:[0-9]+:' bin/mixed-version.log | head -100; \
		echo "the whole output (server logs included): bin/mixed-version.log"; fi; exit $$status

# The soak: the chaos workload at half the measured capacity for
# SOAK_DURATION on each store, sampled every 10 s into SOAK_DIR/soak-<store>.csv
# and .png; warm-up 10 min per hour (at least 30 s). Short runs check the
# machinery: make soak SOAK_DURATION=3m.
SOAK_DURATION ?= 1h
SOAK_DIR      ?= bin/soak

# BATCH_CHECK_RUNS runs terminated by one batch at BATCH_CHECK_RPS while W1 runs, with a SIGKILL
# mid-batch, on SQLite and PostgreSQL; prints W1's throughput alone and during the batch.
BATCH_CHECK_RUNS ?= 10000
BATCH_CHECK_RPS ?= 100
batch-check: ## terminate BATCH_CHECK_RUNS (default 10000) runs by query while W1 runs, kill -9 mid-batch; W1 must keep >= 70 %
	@out=$$(mktemp); BATCH_CHECK_RUNS=$(BATCH_CHECK_RUNS) BATCH_CHECK_RPS=$(BATCH_CHECK_RPS) \
	$(GO) test -count=1 -timeout 0 -v -run '^TestBatchUnderLoad$$' ./internal/crashtest/ >$$out 2>&1; status=$$?; \
	grep -E '^batch-check ' $$out; \
	if [ $$status -ne 0 ]; then grep -E -- '--- FAIL|_test.go:[0-9]+:' $$out | head -50; fi; rm -f $$out; exit $$status

soak: ## run the workload at half capacity for SOAK_DURATION (default 1h) per store; fail on leaks, p99 drift or any error
	@mkdir -p $(SOAK_DIR); out=$$(mktemp); \
	SOAK_DURATION=$(SOAK_DURATION) SOAK_DIR=$(abspath $(SOAK_DIR)) $(GO) test -count=1 -timeout 0 -v -run '^TestSoak$$' ./internal/chaos/ >$$out 2>&1; status=$$?; \
	grep -E '^soak ' $$out; \
	if [ $$status -ne 0 ]; then grep -E -- '--- FAIL|_test.go:[0-9]+:' $$out | head -100; fi; rm -f $$out; exit $$status
