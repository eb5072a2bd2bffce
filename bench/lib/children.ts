import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdirSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { listensOn } from './proc.js';
import { WORKER_NODE_FLAGS } from '../../src/config/node-flags.js';

/**
 * Child processes of the benchmark. Everything is started as `node --import tsx <file>` rather than
 * through the tsx CLI: the CLI runs the script in a second process, and /proc measurements (CPU
 * seconds, peak RSS) must read the process that does the work, not a wrapper.
 */

export const repoRoot = process.cwd();
export const profileDir = join(repoRoot, 'bench', 'results', 'profiles');

const running = new Set<ChildProcess>();

export interface Child {
  name: string;
  pid: number;
  process: ChildProcess;
  /** The last lines the child wrote to stderr/stdout, for error messages. */
  output(): string;
  /** Resolves with the exit code once the process has ended. */
  exited: Promise<number | null>;
  stop(timeoutMs?: number): Promise<void>;
}

export interface SpawnOptions {
  env?: Record<string, string>;
  /** Extra node flags, e.g. --cpu-prof. */
  nodeArgs?: string[];
  ipc?: boolean;
  /** `compiled`: `script` is JavaScript (dist/), run by node alone; default: TypeScript through tsx. */
  runtime?: Runtime;
}

/** How platform code runs: compiled by `npm run build` (production) or from source through tsx. */
export type Runtime = 'compiled' | 'tsx';

export function spawnTs(name: string, script: string, args: string[], opts: SpawnOptions = {}): Child {
  const loader = opts.runtime === 'compiled' ? [] : ['--import', 'tsx'];
  const child = spawn(process.execPath, [...(opts.nodeArgs ?? []), ...loader, script, ...args], {
    cwd: repoRoot,
    env: { ...process.env, ...opts.env },
    stdio: opts.ipc ? ['ignore', 'pipe', 'pipe', 'ipc'] : ['ignore', 'pipe', 'pipe'],
  });
  if (child.pid === undefined) throw new Error(`could not start ${name}`);
  running.add(child);
  let tail = '';
  const keep = (chunk: Buffer) => {
    tail = (tail + chunk.toString('utf8')).slice(-4000);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  const exited = once(child, 'exit').then(([code]) => code as number | null);
  child.on('exit', () => running.delete(child));
  return {
    name,
    pid: child.pid,
    process: child,
    output: () => tail,
    exited,
    async stop(timeoutMs = 30_000) {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
      await exited;
      clearTimeout(timer);
    },
  };
}

/** Runs a helper to its end and returns the last line it printed (its JSON result). */
export async function runToEnd(name: string, script: string, args: string[]): Promise<string> {
  const child = spawnTs(name, script, args);
  const code = await child.exited;
  const lines = child.output().trim().split('\n');
  if (code !== 0) throw new Error(`${name} exited with ${code}:\n${child.output()}`);
  return lines[lines.length - 1] ?? '';
}

/** Kills whatever the benchmark started and is still running (on failure or Ctrl-C). */
export function killAllChildren(): void {
  for (const child of running) child.kill('SIGKILL');
}

async function bindable(port: number): Promise<boolean> {
  const server = createServer();
  server.listen(port, '0.0.0.0');
  const ok = await Promise.race([once(server, 'listening').then(() => true), once(server, 'error').then(() => false)]);
  if (ok) await new Promise<void>((resolve) => server.close(() => resolve()));
  return ok;
}

/**
 * A free port below the kernel's ephemeral range (32768+), where outgoing connections and other
 * processes' port-0 servers take theirs, so the port is very unlikely to be taken meanwhile.
 */
export async function freePort(): Promise<number> {
  for (;;) {
    const port = 20_000 + Math.floor(Math.random() * 12_000);
    if (await bindable(port)) return port;
  }
}

/** Waits until the child itself listens on the URL's port and answers it with a 2xx. */
export async function waitForHttp(child: Child, url: string, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  const port = Number(new URL(url).port);
  while (Date.now() < deadline) {
    if (child.process.exitCode !== null) throw new Error(`${child.name} exited early:\n${child.output()}`);
    if (!listensOn(child.pid, port)) {
      await sleep(100);
      continue;
    }
    try {
      const res = await fetch(url);
      if (res.ok) return;
    } catch {
      // not listening yet
    }
    await sleep(100);
  }
  throw new Error(`${child.name} did not answer ${url} within ${timeoutMs} ms:\n${child.output()}`);
}

export type Role = 'api' | 'worker' | 'all';

export interface PlatformSettings {
  databaseUrl: string;
  redisUrl: string;
  queuePrefix: string;
  adminToken: string;
  secretsKey: string;
}

export interface PlatformProcess extends Child {
  url: string;
  role: Role;
}

/**
 * One platform process exactly as production runs it (`node dist/main.js <role>`, built by the
 * orchestrator at the start of the run), apart from the bench's own database, Redis prefix and port;
 * `runtime: 'tsx'` runs src/main.ts as `npm run start:<role>` does instead. `profileName` runs it
 * under --cpu-prof; the profile is written when the process exits after SIGTERM.
 */
export async function startPlatform(
  settings: PlatformSettings,
  role: Role,
  opts: { env?: Record<string, string>; profileName?: string; runtime?: Runtime } = {},
): Promise<PlatformProcess> {
  const runtime = opts.runtime ?? 'compiled';
  const port = await freePort();
  // The worker with the V8 flags production starts it with (compose, Kubernetes, npm run start:worker).
  const nodeArgs: string[] = role === 'worker' ? [...WORKER_NODE_FLAGS] : [];
  if (opts.profileName) {
    // One directory per process: node writes one profile per thread (tsx's module loader runs on its
    // own thread), so a fixed file name would let the threads overwrite each other.
    const dir = join(profileDir, opts.profileName);
    mkdirSync(dir, { recursive: true });
    nodeArgs.push('--cpu-prof', `--cpu-prof-dir=${dir}`);
  }
  const child = spawnTs(`platform ${role}`, runtime === 'compiled' ? 'dist/main.js' : 'src/main.ts', [role], {
    nodeArgs,
    runtime,
    env: {
      // Not `production`: the receivers are plain http on loopback, which production refuses as an
      // endpoint URL. The platform reads NODE_ENV for nothing else that the bench measures (the
      // secrets it would generate outside production are given here).
      NODE_ENV: 'development',
      PORT: String(port),
      DATABASE_URL: settings.databaseUrl,
      REDIS_URL: settings.redisUrl,
      QUEUE_PREFIX: settings.queuePrefix,
      ADMIN_TOKEN: settings.adminToken,
      SECRETS_KEY: settings.secretsKey,
      ALLOW_PRIVATE_TARGETS: 'true',
      LOG_LEVEL: 'warn',
      ...opts.env,
    },
  });
  const url = `http://127.0.0.1:${port}`;
  await waitForHttp(child, `${url}/healthz`);
  return { ...child, url, role };
}
