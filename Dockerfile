# The Multigrid gateway: one image for every instance of a fleet (see compose.yaml).
#
# NOT BUILT HERE: Docker cannot run on the machine this was written on, and the oven/bun base
# image is not reachable from it, so this file has not been built or run. It follows the README's
# own install path (Node.js + `npm ci`, Bun from the `bun` npm package), which is checked by CI.
#
#   docker build -t multigrid .
#   docker run -p 8080:8080 -e DATABASE_URL=postgres://… -e REDIS_URL=redis://… multigrid
#
# Stage 1 installs with npm: every dependency, Bun included, and the postinstall patch of the
# postgres driver (src/store/postgres/patch-postgres-driver.mjs); then it keeps the Bun binary and
# drops the dev dependencies. Stage 2 is a slim Debian with Bun, the production dependencies and the sources:
# no Node.js, no npm, no compiler.

# Base images pinned to exact releases (both Debian 12, so the Bun binary copied across finds the
# same glibc); raise them together.
FROM node:22.20.0-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
COPY src/store/postgres/patch-postgres-driver.mjs ./src/store/postgres/
RUN npm ci --no-audit --no-fund \
 && cp node_modules/bun/bin/bun.exe /usr/local/bin/bun \
 && npm prune --omit=dev --no-audit --no-fund \
 && rm -rf node_modules/bun node_modules/@oven

FROM debian:12.12-slim
RUN useradd --create-home --uid 10001 multigrid
WORKDIR /app
COPY --from=build /usr/local/bin/bun /usr/local/bin/bun
COPY --from=build /app/node_modules ./node_modules
COPY package.json ./
COPY src ./src
COPY providers ./providers
COPY sql ./sql
# The embedded store (SQLite) lives here when DATABASE_URL is not set; mount a volume on it.
RUN mkdir -p /app/data && chown multigrid /app/data
USER multigrid
# MIMALLOC_PURGE_DELAY=-1: the allocator keeps the pages it frees (README, as `npm start` sets it);
# `docker run -e MIMALLOC_PURGE_DELAY=10` restores its default.
ENV NODE_ENV=production HOST=0.0.0.0 PORT=8080 MULTIGRID_DATA_DIR=/app/data MIMALLOC_PURGE_DELAY=-1
EXPOSE 8080
# No curl in a slim image: Bun asks /healthz itself.
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s \
  CMD ["bun", "-e", "fetch('http://127.0.0.1:' + (process.env.PORT || 8080) + '/healthz').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# SIGTERM (docker stop): stop claiming, finish in-flight lines (MULTIGRID_DRAIN_MS, 10 s), hand
# the rest back; keep the stop grace period above it (compose.yaml: 15 s).
STOPSIGNAL SIGTERM
# Bun's own limit on a request's head raised, so the gateway answers heads over 16 KiB in its
# envelope (src/http/head-limit.ts).
CMD ["bun", "--max-http-header-size=65536", "src/main.ts"]
