/**
 * A private, throw-away redis-server for scenarios that kill or restart Redis. The shared Redis on
 * 6379 serves every other test file at the same time, so it is never touched: a scenario starts its
 * own server on a free port, points the platform at it, and kills or replaces it at will.
 *
 *   const redis = await startRedisServer();          // empty, no persistence
 *   redis.kill();                                    // SIGKILL: everything in it is gone
 *   const again = await startRedisServer(redis.port); // a new, empty server on the same port
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { closedPort } from './dispatch.js';
import { eventually } from './platform.js';

export interface RedisServer {
  port: number;
  url: string;
  child: ChildProcess;
  /** Ends the server at once (SIGKILL: no save, no goodbye to clients) and waits for it to be gone. */
  kill(): Promise<void>;
}

export async function startRedisServer(port?: number): Promise<RedisServer> {
  const p = port ?? (await closedPort());
  const child = spawn('redis-server', ['--port', String(p), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--daemonize', 'no'], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr!.on('data', (c: Buffer) => (out += c.toString()));
  const exited = once(child, 'exit');
  await eventually(
    async () => {
      if (child.exitCode !== null) throw new Error(`redis-server on ${p} exited early:\n${out}`);
      return out.includes('Ready to accept connections');
    },
    `redis-server on port ${p} ready`,
    15_000,
    20,
  );
  return {
    port: p,
    url: `redis://127.0.0.1:${p}`,
    child,
    kill: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    },
  };
}
