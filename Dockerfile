# syntax=docker/dockerfile:1
# payorch's image: built with the dev dependencies, run with the production ones only, as an
# unprivileged user. Not built in CI (no Docker there): test/integration/deploy-files.test.ts
# checks what it can (the packed --omit=dev install starts; compose.yaml agrees with the config).

FROM node:20-slim AS build
WORKDIR /app
# The lockfile and the workspace's manifest first: the install layer is reused until they change.
COPY package.json package-lock.json ./
COPY packages/client/package.json ./packages/client/
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY packages/client ./packages/client
COPY src ./src
RUN npm run build

FROM node:20-slim AS runtime
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=3000 \
    DATA_DIR=/data
WORKDIR /app
COPY package.json package-lock.json ./
COPY packages/client/package.json ./packages/client/
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
# The files the npm package ships (package.json "files"), compiled JavaScript from the build
# stage, and the client package the server imports (a workspace, linked by npm ci).
COPY --from=build /app/packages/client/dist ./packages/client/dist
COPY --from=build /app/dist ./dist
COPY bin ./bin
COPY console ./console
COPY migrations ./migrations
COPY sql ./sql
COPY config ./config
# PGlite's directory when DATABASE_URL is unset; owned by the user the process runs as.
RUN mkdir -p /data && chown node:node /data
VOLUME /data
USER node
EXPOSE 3000
# node:20-slim has no curl: Node's own fetch asks the liveness probe, which touches no database.
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.PORT || 3000) + '/livez').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# Not `npm start`: its prestart compiles TypeScript, which the runtime image does not have.
ENTRYPOINT ["node", "bin/payorch.js"]
CMD ["serve"]
