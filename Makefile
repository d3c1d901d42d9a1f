# fencedlock — the two commands of the quick start:
#   make demo   a chaos run on locally started Redis nodes
#   make test   vet and the race-enabled tests on real Redis nodes
GO ?= go
export TESTCONTAINERS_RYUK_DISABLED = true

.PHONY: demo test deps vet build bench

deps:
	bash scripts/deps.sh

demo: deps
	$(GO) run ./cmd/fencedlock chaos --duration 20s --json report.json --html report.html

vet:
	$(GO) vet ./...

test: deps vet
	$(GO) test -race -count=1 -timeout 15m ./...

build:
	$(GO) build -o bin/fencedlock ./cmd/fencedlock

bench: deps
	$(GO) test -run '^$$' -bench . -benchmem ./redlock/
