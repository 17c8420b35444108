SHELL := /bin/bash

# Pinned agent CLI versions for the conformance suite.
CLAUDE_VERSION := 2.1.330

TOOLS   := $(CURDIR)/.tools
CLAUDE  := $(TOOLS)/claude/node_modules/.bin/claude
GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X github.com/agentgateway/gateway/internal/cli.Version=$(VERSION)

.PHONY: build test fuzz conformance lint clean

build: ## build bin/gateway
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/gateway ./cmd/gateway

test: ## unit, property and end-to-end tests (no network, no token)
	$(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1; }
	$(GO) test -race -count=1 ./...

fuzz: ## run every fuzz target briefly (FUZZTIME=30s by default)
	@for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
	    echo "== $$pkg $$f"; $(GO) test -run=NONE -fuzz="^$$f$$" -fuzztime=$${FUZZTIME:-30s} -fuzzminimizetime=1000x $$pkg || exit 1; \
	  done; \
	done

$(CLAUDE):
	mkdir -p $(TOOLS)/claude
	cd $(TOOLS)/claude && { test -f package.json || echo '{"private":true}' > package.json; } && \
	  npm install --no-audit --no-fund --loglevel=error @anthropic-ai/claude-code@$(CLAUDE_VERSION)

conformance: $(CLAUDE) ## the real claude CLI against the fake model API
	CLAUDE_BIN=$(CLAUDE) $(GO) test -race -count=1 -tags conformance -run Conformance -v ./internal/conformance/... 2>&1 | grep -v '^=== \(RUN\|PAUSE\|CONT\)'; exit $${PIPESTATUS[0]}

clean:
	rm -rf bin
