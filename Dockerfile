# subagentd: build, pack, and install the packed tarball into a slim runtime image, so the image
# holds exactly what `npm i -g subagentd` installs (no sources, tests or benchmarks). Runs as a
# non-root user under tini (signals reach the daemon, zombies are reaped), with the state dir and
# the socket's folder as volumes and `subagentd status` as the health check.
# No Docker engine runs on the development machines, and hadolint is on neither npm nor Debian:
# this file is checked by test/package-files.spec.ts and by reading (see docs/operations.md).
FROM node:22-bookworm-slim AS build
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
# Sources, tests and docs (see .dockerignore); tsconfig compiles tests and benchmarks too, and
# package.json's "files" leaves them out of the tarball.
COPY . .
RUN npm run build && npm pack --pack-destination /tmp && mv /tmp/subagentd-*.tgz /tmp/subagentd.tgz

FROM node:22-bookworm-slim
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends tini \
 && rm -rf /var/lib/apt/lists/*
ENV NODE_ENV=production \
    SUBAGENTD_HOME=/var/lib/subagentd \
    SUBAGENTD_SOCKET=/run/subagentd/daemon.sock
RUN groupadd --system subagentd && useradd --system --gid subagentd --home-dir /var/lib/subagentd subagentd \
 && mkdir -p /var/lib/subagentd /run/subagentd \
 && chown subagentd:subagentd /var/lib/subagentd /run/subagentd \
 && chmod 0700 /var/lib/subagentd /run/subagentd
COPY --from=build /tmp/subagentd.tgz /tmp/subagentd.tgz
RUN npm i -g --omit=dev --no-audit --no-fund /tmp/subagentd.tgz \
 && rm /tmp/subagentd.tgz \
 && npm cache clean --force
USER subagentd
WORKDIR /var/lib/subagentd
# State (session logs, run index, daemon log) and the socket, shared with sibling containers
# running as the same uid.
VOLUME ["/var/lib/subagentd", "/run/subagentd"]
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
  CMD ["subagentd", "status"]
ENTRYPOINT ["/usr/bin/tini", "--", "subagentd"]
CMD ["daemon"]
