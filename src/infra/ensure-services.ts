import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { createConnection } from 'node:net';
import type { ClusterNode } from './redis.js';

/** A required service is down and could not be started here; the message says what to run. */
export class ServiceUnreachableError extends Error {
  override readonly name = 'ServiceUnreachableError';
}

const localHosts = new Set(['127.0.0.1', 'localhost', '::1', '[::1]']);

function reachable(host: string, port: number, timeoutMs = 1_000): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host: host.replace(/^\[|\]$/g, ''), port });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

async function waitFor(host: string, port: number, seconds: number): Promise<boolean> {
  for (let i = 0; i < seconds * 4; i++) {
    if (await reachable(host, port)) return true;
    await new Promise((r) => setTimeout(r, 250));
  }
  return false;
}

function tryStartPostgres(): void {
  if (!existsSync('/etc/postgresql')) return;
  for (const version of readdirSync('/etc/postgresql')) {
    execFileSync('pg_ctlcluster', ['--skip-systemctl-redirect', version, 'main', 'start'], { stdio: 'ignore' });
  }
}

function tryStartRedis(): void {
  execFileSync(
    'redis-server',
    ['--daemonize', 'yes', '--bind', '127.0.0.1', '-::1', '--port', '6379', '--save', '', '--appendonly', 'no'],
    { stdio: 'ignore' },
  );
}

/**
 * `npm start` on a developer machine: reach PostgreSQL and Redis, starting installed local servers
 * when they are down. Throws one line saying what to run when that is not possible. A Redis Cluster
 * is never started here: one of its seed nodes must answer.
 */
export async function ensureServices(databaseUrl: string, redisUrl: string, redisClusterNodes?: ClusterNode[]): Promise<void> {
  const services = [
    { name: 'PostgreSQL', url: new URL(databaseUrl), defaultPort: 5432, start: tryStartPostgres },
    ...(redisClusterNodes ? [] : [{ name: 'Redis', url: new URL(redisUrl), defaultPort: 6379, start: tryStartRedis }]),
  ];
  if (redisClusterNodes) await ensureClusterReachable(redisClusterNodes);
  for (const service of services) {
    const host = service.url.hostname;
    const port = Number(service.url.port || service.defaultPort);
    if (await reachable(host, port)) continue;
    if (localHosts.has(host)) {
      try {
        service.start();
      } catch {
        // Not installed here, or not ours to start: fall through to the message below.
      }
      if (await waitFor(host, port, 15)) continue;
    }
    throw new ServiceUnreachableError(
      `${service.name} is not reachable at ${host}:${port}; start it with: docker compose up -d postgres redis`,
    );
  }
}

async function ensureClusterReachable(nodes: ClusterNode[]): Promise<void> {
  const answers = await Promise.all(nodes.map((n) => reachable(n.host, n.port)));
  if (answers.includes(true)) return;
  const list = nodes.map((n) => `${n.host.includes(':') ? `[${n.host}]` : n.host}:${n.port}`).join(', ');
  throw new ServiceUnreachableError(`no node of the Redis Cluster is reachable (REDIS_CLUSTER_NODES: ${list})`);
}
