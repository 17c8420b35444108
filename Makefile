SHELL := /bin/bash

# The agent CLIs of the conformance suite: npm package and pinned version.
# Each installs into .tools/<name> (git-ignored), with the command gateway
# doctor and chat print for a missing CLI; a stamp file per version makes a
# changed pin reinstall and an unchanged one reuse the install.
CLIS := claude codex gemini opencode pi
claude_PKG       := @anthropic-ai/claude-code
claude_VERSION   := 2.1.330
codex_PKG        := @openai/codex
codex_VERSION    := 0.169.0
gemini_PKG       := @google/gemini-cli
gemini_VERSION   := 0.61.0
opencode_PKG     := opencode-ai
opencode_VERSION := 1.18.33
pi_PKG           := @mariozechner/pi-coding-agent
pi_VERSION       := 0.73.1

TOOLS   := $(CURDIR)/.tools
cli_bin   = $(TOOLS)/$(1)/node_modules/.bin/$(1)
cli_stamp = $(TOOLS)/$(1)/.installed-$($(1)_VERSION)
GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X github.com/agentgateway/gateway/internal/cli.Version=$(VERSION)

.PHONY: help build run chat release test test-worker lint fuzz conformance chaos chaos-cluster clis bench footprint soak clean browser
.DEFAULT_GOAL := build

help: ## list the targets
	@grep -E '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | awk -F'\t' '{printf "  make %-14s %s\n", $$1, $$2}'

build: ## build bin/gateway: static (CGO_ENABLED=0), stripped, with the version
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/gateway ./cmd/gateway

# make run and make chat install the pinned claude into .tools/ when it is
# missing; bin/gateway finds it there itself (beside bin/, before PATH;
# AGENT_CLI_PATH, in the environment or .env, still wins). ARGS go to the
# command: make chat ARGS='-m "hello"'.
run: build $(call cli_stamp,claude) ## build, install the pinned claude into .tools/ when missing, and run the gateway (key and token in .env)
	./bin/gateway run $(ARGS)

chat: build $(call cli_stamp,claude) ## the same, with the terminal as the channel: no Discord needed (the key in .env)
	./bin/gateway chat $(ARGS)

# make release: one static binary per platform, named with the version, and
# their checksums, in dist/.
PLATFORMS := linux/amd64 linux/arm64

release: ## static binaries for linux/amd64 and linux/arm64 in dist/, version stamped, with SHA256SUMS
	rm -rf dist && mkdir -p dist
	@set -e; for p in $(PLATFORMS); do \
	  os=$${p%/*}; arch=$${p#*/}; out=dist/gateway-$(VERSION)-$$os-$$arch; \
	  echo "== $$out"; \
	  CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $$out ./cmd/gateway; \
	done
	cd dist && sha256sum gateway-* > SHA256SUMS && cat SHA256SUMS

test: lint ## lint, then unit, property and end-to-end tests (no network, no token)
	$(GO) test -race -count=1 ./...

test-worker: ## the end-to-end acceptance tests again, each gateway a gateway run taking prompts plus a gateway worker on its own CONFIG_DIR running every turn, on a real NATS server (the list: internal/gateway/testdata/e2e-on-a-worker.txt)
	GATEWAY_E2E_WORKER=1 $(GO) test -race -count=1 -run "^($$(paste -sd'|' internal/gateway/testdata/e2e-on-a-worker.txt))$$" ./internal/gateway/

lint: ## go vet and the gofmt check
	$(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files -co --exclude-standard '*.go'))" || { gofmt -l $$(git ls-files -co --exclude-standard '*.go'); echo "gofmt needed"; exit 1; }

fuzz: ## run every fuzz target briefly (FUZZTIME=30s by default)
	@for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
	    echo "== $$pkg $$f"; $(GO) test -run=NONE -fuzz="^$$f$$" -fuzztime=$${FUZZTIME:-30s} -fuzzminimizetime=1000x $$pkg || exit 1; \
	  done; \
	done

define install_cli
$(call cli_stamp,$(1)):
	npm install --prefix $(TOOLS)/$(1) --no-audit --no-fund --loglevel=error $($(1)_PKG)@$($(1)_VERSION)
	rm -f $(TOOLS)/$(1)/.installed-* && touch $$@
endef
$(foreach c,$(CLIS),$(eval $(call install_cli,$(c))))

clis: $(foreach c,$(CLIS),$(call cli_stamp,$(c))) ## install every pinned agent CLI into .tools/

# Each CLI's binary reaches its tests as <NAME>_BIN (CLAUDE_BIN, CODEX_BIN...).
CLI_ENV := $(foreach c,$(CLIS),$(shell echo $(c) | tr a-z A-Z)_BIN=$(call cli_bin,$(c)))

conformance: clis ## every agent CLI against the fake model APIs, and gateway run against the fake Discord
	$(CLI_ENV) $(GO) test -race -count=1 -timeout 20m -tags conformance -run Conformance -v ./internal/conformance/... 2>&1 | grep -v '^=== \(RUN\|PAUSE\|CONT\)'; exit $${PIPESTATUS[0]}

chaos: ## kill -9 the built gateway at random moments (CHAOS_KILLS, default 12; CHAOS_THREADS=1 for a thread per prompt, CHAOS_NATS=1 for the inbox on NATS JetStream); every prompt answered exactly once
	$(GO) test -count=1 -timeout 30m -tags chaos -run '^TestChaos$$' -v ./internal/chaos/ 2>&1 | grep -v '^=== \(RUN\|PAUSE\|CONT\)\|^ *{'; exit $${PIPESTATUS[0]}

chaos-cluster: ## the same across processes: a real nats-server, gateway run and two gateway workers, each kill -9'd at random moments (CHAOS_KILLS, default 12; CHAOS_RUN_TURNS=0 for an intake-only run node); every prompt answered exactly once, in order, and conversations resume on other workers
	$(GO) test -count=1 -timeout 30m -tags chaos -run '^TestChaosCluster$$' -v ./internal/chaos/ 2>&1 | grep -v '^=== \(RUN\|PAUSE\|CONT\)\|^ *{'; exit $${PIPESTATUS[0]}

bench: ## measure footprint and speed; writes BENCHMARKS.md (about 40 minutes plus the soak: BENCH_SOAK, an hour by default)
	$(GO) run ./cmd/bench -out BENCHMARKS.md -soak-for $${BENCH_SOAK:-1h}

footprint: ## the quick footprint lines (binary, modules, start, idle RSS), as CI prints them
	$(GO) run ./cmd/bench -footprint

soak: ## steady fake traffic for SOAK (default 5m); RSS and goroutines should stay flat
	$(GO) run ./cmd/bench -soak $${SOAK:-5m}

clean: ## remove bin/ and dist/
	rm -rf bin dist

browser: ## the dashboard in headless Chromium (apt-get install chromium); screenshots to SCREENSHOT_DIR
	$(GO) test -tags browser -count=1 -run Browser -v ./internal/dashboard/
