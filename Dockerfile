# syntax=docker/dockerfile:1
#
# The gateway in a container: the static gateway binary on Node 22 with the
# pinned claude CLI, running as a user of its own.
#
#   docker build --build-arg VERSION="$(git describe --tags --always --dirty)" -t gateway .
#   docker compose up -d        (compose.yaml: settings from .env, state on volumes)
#
# Stopping: the gateway drains on SIGTERM for up to QUERY_TIMEOUT_MS + 30 s
# (150 s by default) so that running turns finish and their replies are
# posted. Docker's default stop timeout of 10 s would SIGKILL them; give
# `docker stop --time 180` (or compose's stop_grace_period: 180s).

# Keep in step with go.mod's go line.
ARG GO_VERSION=1.26.8

# The build runs on the builder's own platform and cross-compiles, so a
# multi-platform build (--platform linux/amd64,linux/arm64) needs no
# emulation for Go.
FROM --platform=$BUILDPLATFORM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
ARG TARGETOS=linux
ARG TARGETARCH
# The same flags as `make build`: static, stripped, version stamped.
RUN CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath \
      -ldflags "-s -w -X github.com/agentgateway/gateway/internal/cli.Version=${VERSION}" \
      -o /out/gateway ./cmd/gateway

FROM node:22-bookworm-slim
# Keep in step with the Makefile's claude_VERSION (the version the
# conformance suite covers; `gateway doctor` warns about any other).
ARG CLAUDE_VERSION=2.1.330
# ca-certificates: the gateway is a Go binary and reads the system's roots
# to reach Discord over TLS. git: the agent works in repositories. tini:
# reaps any orphan and passes SIGTERM on to the gateway.
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates git tini \
 && rm -rf /var/lib/apt/lists/* \
 && npm install -g --no-audit --no-fund "@anthropic-ai/claude-code@${CLAUDE_VERSION}" \
 && npm cache clean --force \
 && claude --version
# A user of its own, with a fixed uid so that a bind-mounted CONFIG_DIR can
# be chowned to it (chown -R 10001:10001 ./config). Running as root would
# need IS_SANDBOX=1, since claude refuses PERMISSION_MODE=bypassPermissions
# as root; as this user IS_SANDBOX is not needed, and is not set.
RUN groupadd --system --gid 10001 gateway \
 && useradd --system --uid 10001 --gid gateway --home-dir /home/gateway --create-home \
      --shell /usr/sbin/nologin gateway \
 && mkdir -p /data \
 && chown gateway:gateway /data
COPY --from=build /out/gateway /usr/local/bin/gateway

USER gateway
WORKDIR /data
# ADMIN_ADDR: the admin server on the container's loopback only, for the
# HEALTHCHECK below. To reach the dashboard from outside, set
# ADMIN_ADDR=0.0.0.0:8081 and ADMIN_TOKEN, and publish the port.
ENV CONFIG_DIR=/data/config \
    ADMIN_ADDR=127.0.0.1:8081 \
    HOME=/home/gateway
# The example persona, so that a new named volume starts with it (Docker
# copies the image's content into an empty volume), and every setting with
# its default in /data/.env.example (docker run --rm --entrypoint cat IMAGE
# /data/.env.example). It must come before VOLUME: changes to a volume's
# path after it are discarded.
RUN gateway init /data/config --env-file /data/.env.example
# CONFIG_DIR holds the persona, the sessions and the inbox: keep it. The
# claude CLI keeps its own session files and login in $HOME (compose.yaml
# puts that on a volume too).
VOLUME ["/data/config"]

# gateway healthcheck GETs http://$ADMIN_ADDR/healthz and exits 0 or 1:
# no curl needed.
HEALTHCHECK --interval=30s --timeout=5s --start-period=90s --retries=3 \
  CMD ["gateway", "healthcheck"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/bin/tini", "--", "gateway"]
CMD ["run"]
