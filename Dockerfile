# Production runs compiled JavaScript (`node dist/main.js <role>`): no TypeScript loader, and node
# is PID 1's only process, so SIGTERM reaches the process that drains in-flight attempts. One image
# serves every role; docker-compose.yml picks the command.

# Build: the TypeScript compiler and the other dev dependencies live only in this stage.
FROM node:20-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci
COPY tsconfig.json tsconfig.build.json tsconfig.migrations.json ./
COPY src ./src
COPY migrations ./migrations
RUN npm run build
# The tenant portal: static files, typed against this server's OpenAPI document.
COPY portal ./portal
RUN npm run build:portal

FROM node:20-bookworm-slim

ENV NODE_ENV=production
WORKDIR /app

# Dependencies first, so a code change does not reinstall them.
COPY package.json package-lock.json ./
RUN npm ci --omit=dev && npm cache clean --force

# The compiled code stays owned by root: the app runs as `node` and must not be able to rewrite it.
COPY --from=build /app/dist ./dist
# The SQL functions' sources: `migrate` applies them after the compiled migrations (dist/infra finds
# them at ../../db/functions, as the sources do).
COPY db ./db
COPY --from=build /app/portal/dist ./portal/dist

# `node` (uid and gid 1000 in the official image), given by number so that Kubernetes can check
# runAsNonRoot without a runAsUser (deploy/kubernetes sets runAsUser: 1000 as well).
USER 1000:1000
EXPOSE 3000 3001
CMD ["node", "dist/main.js", "all"]
