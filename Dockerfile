# subagentd: multi-stage build, non-root runtime, state and socket in volumes.
# (No Docker engine runs on the development machines: this file is kept right by reading it.)
FROM node:20-bookworm-slim AS build
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json ./
COPY examples ./examples
COPY protocol ./protocol
COPY common ./common
COPY harness ./harness
COPY tool ./tool
COPY daemon ./daemon
COPY client ./client
COPY cli ./cli
COPY test ./test
COPY bench ./bench
RUN npm run build && npm prune --omit=dev

FROM node:20-bookworm-slim
ENV NODE_ENV=production \
    SUBAGENTD_HOME=/var/lib/subagentd \
    SUBAGENTD_SOCKET=/run/subagentd/daemon.sock
RUN groupadd --system subagentd && useradd --system --gid subagentd --home-dir /var/lib/subagentd subagentd \
 && mkdir -p /var/lib/subagentd /run/subagentd \
 && chown subagentd:subagentd /var/lib/subagentd /run/subagentd \
 && chmod 0700 /var/lib/subagentd /run/subagentd
WORKDIR /opt/subagentd
COPY --from=build /src/package.json ./
COPY --from=build /src/node_modules ./node_modules
COPY --from=build /src/dist ./dist
COPY examples ./examples
USER subagentd
# State (session logs, run index, daemon log) and the socket, shared with sibling containers
# running as the same uid.
VOLUME ["/var/lib/subagentd", "/run/subagentd"]
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
  CMD ["node", "dist/cli/main.js", "status"]
ENTRYPOINT ["node", "dist/cli/main.js"]
CMD ["daemon"]
