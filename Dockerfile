# syntax=docker/dockerfile:1
# The services' image: one image for every role. SERVICES picks what a container runs (all of
# them by default: the all-in-one service, on embedded PostgreSQL and chdb under /data); the
# distributed roles are `control-plane`, `ingest` and `proxy` (deploy/compose/, deploy/helm/).
# Node 24 (uWebSockets.js for it needs glibc 2.38: Debian 13 has 2.41). Expected size about
# 1.1 GB: node:24-trixie-slim (~230 MB) and 875 MB of pruned node_modules, most of it native
# code: chdb (~540 MB), embedded PostgreSQL (~60 MB) and this platform's uWebSockets.js binaries
# (~55 MB). docs/self-hosting.md says how to build, run and size it.
ARG NODE_VERSION=24.22.3

FROM node:${NODE_VERSION}-trixie-slim AS build
WORKDIR /app
# Dependencies first, from the lockfile alone, so a source change reuses this layer.
COPY package.json package-lock.json ./
COPY contracts/package.json contracts/package.json
COPY sdk/package.json sdk/package.json
COPY ingest/package.json ingest/package.json
COPY control-plane/package.json control-plane/package.json
COPY proxy/package.json proxy/package.json
COPY console/package.json console/package.json
RUN npm ci --no-audit --no-fund
COPY tsconfig.json ./
COPY contracts contracts
COPY sdk sdk
COPY ingest ingest
COPY control-plane control-plane
COPY proxy proxy
COPY console console
COPY deploy deploy
# The services' build (deploy/build.mjs) and the console's static files (console/dist, by Vite),
# made here while esbuild and Vite are installed; then the dev dependencies go (deploy/start.mjs
# runs the builds it finds when there is no esbuild or Vite).
# uWebSockets.js ships a binary per platform and Node ABI: only this platform's are kept.
RUN npm run build && npm prune --omit=dev --no-audit --no-fund && rm -rf node_modules/.cache/mcp-meter-ts \
 && node -e "for (const dir of ['node_modules/uWebSockets.js', 'node_modules/uws-pack/dist/bin']) for (const f of require('node:fs').readdirSync(dir)) if (f.startsWith('uws_') && !f.startsWith('uws_' + process.platform + '_' + process.arch + '_')) require('node:fs').rmSync(dir + '/' + f)"

FROM node:${NODE_VERSION}-trixie-slim
LABEL org.opencontainers.image.title="mcp-meter" \
      org.opencontainers.image.description="Metering proxy and billing control plane for MCP servers, APIs and software" \
      org.opencontainers.image.source="https://github.com/mcp-meter/mcp-meter" \
      org.opencontainers.image.licenses="UNLICENSED"
ENV NODE_ENV=production \
    DATA_DIR=/data \
    HOST=0.0.0.0 \
    PORT=8080 \
    PROXY_HOST=0.0.0.0 \
    PROXY_PORT=8081
WORKDIR /app
COPY --from=build --chown=node:node /app /app
RUN mkdir -p /data && chown node:node /data
# The image's own user (uid 1000), never root: embedded PostgreSQL then runs as it too.
USER node
VOLUME ["/data"]
EXPOSE 8080 8081
HEALTHCHECK --interval=10s --timeout=3s --start-period=60s --retries=3 CMD ["node", "deploy/healthcheck.mjs"]
# What `npm start` runs (package.json), without npm: signals reach the service directly.
CMD ["node", "--max-semi-space-size=64", "--min-semi-space-size=32", "--heap-growing-percent=300", "deploy/start.mjs"]
