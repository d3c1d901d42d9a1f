# fencedlock — the two commands of the quick start:
#   make demo   a chaos run (the hunt profile) on locally started Redis nodes
#   make test   vet, staticcheck and the race-enabled tests on real Redis nodes (and, when
#               `docker info` works, on containers too)
# Each installs what it needs and is missing from Debian's packages first
# (scripts/deps.sh): the demo redis-server and libfaketime, the tests those
# and postgresql and chromium.
# and, slower:
#   make mutants  the mutation campaign: the hunt profile against each planted bug
#   make compare  every lock (fencedlock, fencedlock-acks, redsync, redislock, a Sentinel-managed
#                 single instance) under one fault schedule, side by side
#   make rolling  rolling restarts of nodes without data under one long hold, with
#                 WithReacquireOnExtend (the hold survives)
# and, with Docker:
#   make image          build the Redis image from this machine's redis-server (no registry)
#   make compose-check  docker-compose.yml up, the quick start and `fencedlock status` against it, down
GO ?= go
# The chaos harness and its tests remove their own containers: no Ryuk, whose
# image would have to be pulled.
export TESTCONTAINERS_RYUK_DISABLED = true

# The image scripts/redis-image.sh builds. The container tests and
# docker-compose.yml run FENCEDLOCK_REDIS_IMAGE: this one unless you set
# another (FENCEDLOCK_REDIS_IMAGE=redis:7.0 make test, where a registry is
# reachable).
LOCAL_IMAGE := fencedlock/redis:local
FENCEDLOCK_REDIS_IMAGE ?= $(LOCAL_IMAGE)
export FENCEDLOCK_REDIS_IMAGE

# Compose v2 (`docker compose`) if installed, else the standalone docker-compose.
COMPOSE = $(shell docker compose version >/dev/null 2>&1 && echo "docker compose" || echo docker-compose)
COMPOSE_NODES := 127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003,127.0.0.1:7004,127.0.0.1:7005

.PHONY: demo test deps deps-demo vet build bench image compose-check mutants compare rolling

# What the demo uses (also the mutants, the image and the bench), and what
# the tests use.
deps-demo:
	bash scripts/deps.sh demo

deps:
	bash scripts/deps.sh test

demo: deps-demo
	$(GO) run ./cmd/fencedlock chaos --faults hunt --duration 20s --json report.json --html report.html

# The comparison's faults: the hunt (whose workload writes late and holds
# past validity, what fencing is for) with Sentinel failovers, one node and
# then a majority at once. --lock all runs each node as a primary with a
# replica under Sentinel for every lock.
COMPARE_FAULTS := hunt,failover

compare: deps-demo
	$(GO) run ./cmd/fencedlock chaos --lock all --faults $(COMPARE_FAULTS) --duration 60s --seed 1 \
		--json compare.json --html compare.html

# The rolling restarts (docs/chaos.md): the nodes restart without their data
# one at a time while client 0 keeps one auto-extended hold and the others
# contend for it, with redlock.WithReacquireOnExtend. The same restarts
# without the option, where the hold is lost: --lock fencedlock instead.
rolling: deps-demo
	$(GO) run ./cmd/fencedlock chaos --faults rolling --lock fencedlock-reacquire --duration 5m \
		--json rolling.json --html rolling.html

STATICCHECK = $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2

vet:
	$(GO) vet ./...
	$(STATICCHECK) ./...
	cd bench && $(GO) vet ./... && $(STATICCHECK) ./...

# The per-package timeout only stops a hung run: the chaos package is the
# long pole, 10 min on a 2-core machine with one core kept busy and near 15
# when something else loads it too (its runs stretch with the measured timing).
test: deps vet
	@if docker info >/dev/null 2>&1; then \
		bash scripts/redis-image.sh $(LOCAL_IMAGE); \
	else \
		echo "docker not available: the container tests will be skipped"; \
	fi
	$(GO) test -race -count=1 -timeout 30m ./...
	cd bench && $(GO) test -race -count=1 -timeout 5m ./...

# The mutation campaign (internal/mutants): for each planted protocol bug, a
# copy of the module with the bug, its CLI, and `fencedlock chaos --faults
# hunt --stop-on-violation` for at most 60 s; prints killed (with the first
# violation) or survived, and the score. Exit 1 below 90% killed.
mutants: deps-demo
	$(GO) run ./internal/mutants/cmd/mutants -faults hunt -duration 60s

build:
	$(GO) build -o bin/fencedlock ./cmd/fencedlock

bench: deps-demo
	$(GO) test -run '^$$' -bench . -benchmem ./redlock/
	cd bench && $(GO) run ./cmd/lockbench

image: deps-demo
	bash scripts/redis-image.sh $(LOCAL_IMAGE)

# Starts from a clean stack (a run cut short may have left one), waits for the
# healthchecks by polling (Compose v1 has no `up --wait`), and takes it down
# again whatever happens. The local image is never pulled (Compose v1 ignores
# pull_policy, but the image target has just built it). status exits 1 when
# the key is free, as it is once the quick start released it: the JSON check
# that every node answered is what counts.
compose-check: image
	@set -eu; \
	compose="$(COMPOSE) -p fencedlock-check"; \
	if [ "$$FENCEDLOCK_REDIS_IMAGE" = "$(LOCAL_IMAGE)" ]; then export FENCEDLOCK_PULL_POLICY=never; fi; \
	down() { $$compose down --volumes --timeout 1 >/dev/null 2>&1 || true; }; \
	down; trap down EXIT; \
	echo "compose-check: $$compose up ($$FENCEDLOCK_REDIS_IMAGE)"; \
	$$compose up -d; \
	for i in $$(seq 60); do \
		ids=$$($$compose ps -q); \
		health=$$(docker inspect --format '{{.State.Health.Status}}' $$ids); \
		if [ $$(echo "$$health" | grep -c '^healthy$$') -eq 5 ]; then break; fi; \
		if [ $$i -eq 60 ]; then echo "compose-check: not healthy after 60s:" $$health; $$compose logs --tail 5; exit 1; fi; \
		sleep 1; \
	done; \
	echo "compose-check: 5 nodes healthy"; \
	$(GO) run ./examples/quickstart --nodes $(COMPOSE_NODES); \
	$(GO) run ./cmd/fencedlock status --nodes $(COMPOSE_NODES) --key quickstart:invoice-42 || true; \
	$(GO) run ./cmd/fencedlock status --nodes $(COMPOSE_NODES) --key quickstart:invoice-42 --json | \
		grep -q '"answered": *5' || { echo "compose-check: not every node answered"; exit 1; }; \
	echo "compose-check: ok"
