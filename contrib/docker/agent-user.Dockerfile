# syntax=docker/dockerfile:1
#
# The shipped image (../../Dockerfile) with the agent as a user of its own
# (AGENT_USER): the gateway stays user `gateway` and gets, through file
# capabilities, just what it needs to start the agent as user `agent` and
# to stop it. See docs/agent-user.md.
#
#   docker build -t gateway .
#   docker build -f contrib/docker/agent-user.Dockerfile --build-arg BASE=gateway -t gateway-agent-user .
#   docker compose -f compose.yaml -f contrib/docker/compose.agent-user.yaml up -d
#
# With AGENT_USER set, the admin server needs ADMIN_TOKEN (16 bytes or
# more): the agent shares the container's loopback. Put it in .env.
ARG BASE=gateway
FROM ${BASE}
USER root
RUN apt-get update \
 && apt-get install -y --no-install-recommends libcap2-bin \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --user-group --create-home --home-dir /home/agent --shell /usr/sbin/nologin agent \
 && setcap cap_setuid,cap_setgid,cap_kill,cap_chown+ep /usr/local/bin/gateway \
 && chown gateway:agent /data/config \
 && chmod 750 /data/config \
 && chown gateway:agent /data/config/*.md \
 && chmod 640 /data/config/*.md \
 && chmod 600 /data/config/heartbeat.md /data/config/boot.md \
 && chown agent:gateway /data/config/memory.md \
 && chmod 660 /data/config/memory.md \
 && chmod 711 /data
USER gateway
ENV AGENT_USER=agent
