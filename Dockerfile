# The relay runs its TypeScript sources through tsx's loader (`npm start` = `exec node --import tsx
# src/main.ts all`: the shell is replaced by node, so the SIGTERM that npm forwards reaches the
# process that drains in-flight attempts), so the image needs no build step. One image serves
# every role; docker-compose.yml picks the command.
FROM node:20-bookworm-slim

ENV NODE_ENV=production
WORKDIR /app

# Dependencies first, so a source change does not reinstall them. tsx is a runtime dependency.
COPY package.json package-lock.json ./
RUN npm ci --omit=dev && npm cache clean --force

# Sources stay owned by root: the app runs as `node` and must not be able to rewrite its own code.
COPY . .

USER node
EXPOSE 3000 3001
CMD ["npm", "start"]
