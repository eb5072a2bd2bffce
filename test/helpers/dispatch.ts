// Helpers for dispatcher tests: publishing through the API, waiting for a delivery to settle,
// raw TCP servers for broken receivers, and worker child processes. Everything is real: loopback
// sockets, the platform's HTTP API, PostgreSQL and Redis.
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { expect } from 'vitest';
import type { ServerResponse } from 'node:http';
import type { Knex } from 'knex';
import type { AttemptRecord } from '../../src/delivery/sql/attempts.js';
import type { ClaimedDelivery } from '../../src/delivery/sql/claimed.js';
import { newId, uuidOf } from '../../src/domain/ids.js';
import { createDb } from '../../src/infra/db.js';
import { deliveryStatuses } from './chaos.js';
import { eventually, startTestPlatform, type TestPlatform, type TestTenant } from './platform.js';
import type { ReceivedRequest, Responder } from './receiver.js';

export interface Attempt {
  id: string;
  attemptNumber: number;
  trigger: 'initial' | 'retry' | 'replay';
  startedAt: string;
  durationMs: number;
  statusCode: number | null;
  outcome: 'success' | 'retry' | 'terminal';
  errorClass: string | null;
  error: string | null;
  responseExcerpt: string | null;
  nextAttemptAt: string | null;
}

export interface Delivery {
  id: string;
  eventId: string;
  endpointId: string;
  status: 'pending' | 'queued' | 'in_flight' | 'succeeded' | 'dead';
  attemptCount: number;
  nextAttemptAt: string | null;
  deadReason: string | null;
  lastError: string | null;
  lastStatusCode: number | null;
  attempts?: Attempt[];
}

export interface EndpointBody {
  url: string;
  eventTypes?: string[];
  maxConcurrency?: number;
  rateLimitPerSecond?: number;
  ordering?: 'none' | 'per-message';
  retryPolicy?: { maxAttempts?: number; baseDelayMs?: number; maxDelayMs?: number; maxEventAgeSeconds?: number };
}

export async function createEndpoint(tenant: TestTenant, body: EndpointBody): Promise<{ id: string; secret: string; url: string }> {
  const res = await tenant.call('POST', '/v1/endpoints', { body });
  expect(res.status, res.text).toBe(201);
  return res.body;
}

let keyCounter = 0;
/** Publishes one event through the API and returns its id (the webhook-id receivers see). */
export async function publish(tenant: TestTenant, type = 'order.created', data: unknown = { n: keyCounter }): Promise<string> {
  const res = await tenant.call('POST', '/v1/events', { body: { type, data }, headers: { 'idempotency-key': `k-${process.pid}-${++keyCounter}-${Date.now()}` } });
  expect(res.status, res.text).toBe(202);
  return res.body.id as string;
}

/** Publishes `count` events, `parallel` at a time (publishing is not what these tests measure). */
export async function publishMany(tenant: TestTenant, count: number, parallel = 8, type = 'order.created'): Promise<string[]> {
  const ids: string[] = new Array(count);
  let next = 0;
  await Promise.all(
    Array.from({ length: parallel }, async () => {
      for (let i = next++; i < count; i = next++) ids[i] = await publish(tenant, type, { i });
    }),
  );
  return ids;
}

export async function deliveryOfEvent(tenant: TestTenant, eventId: string): Promise<Delivery | undefined> {
  const list = await tenant.call('GET', `/v1/deliveries?eventId=${eventId}`);
  expect(list.status).toBe(200);
  return list.body.data[0] as Delivery | undefined;
}

export async function getDelivery(tenant: TestTenant, id: string): Promise<Delivery> {
  const res = await tenant.call('GET', `/v1/deliveries/${id}`);
  expect(res.status, res.text).toBe(200);
  return res.body as Delivery;
}

/** Waits until the event's (only) delivery is succeeded or dead and returns it with its attempts. */
export async function settledDelivery(tenant: TestTenant, eventId: string, timeoutMs = 15_000): Promise<Delivery> {
  const d = await eventually(
    async () => {
      const found = await deliveryOfEvent(tenant, eventId);
      return found && (found.status === 'succeeded' || found.status === 'dead') && found;
    },
    `delivery of ${eventId} settled`,
    timeoutMs,
  );
  return getDelivery(tenant, d.id);
}

/** Counts the platform's deliveries by status, straight from the database (see deliveryStatuses). */
export async function statusCounts(t: TestPlatform, endpointId?: string): Promise<Record<string, number>> {
  return deliveryStatuses(t.platform.db, endpointId);
}

/** A responder that answers after `ms` and tracks how many requests it holds at once. */
export function slowResponder(ms: number, status = 200): Responder & { readonly inFlight: number; readonly maxInFlight: number } {
  const state = { inFlight: 0, maxInFlight: 0 };
  const responder: Responder = (_req: ReceivedRequest, res: ServerResponse) => {
    state.inFlight++;
    state.maxInFlight = Math.max(state.maxInFlight, state.inFlight);
    setTimeout(() => {
      state.inFlight--;
      res.writeHead(status).end();
    }, ms);
  };
  return Object.defineProperties(responder, {
    inFlight: { get: () => state.inFlight },
    maxInFlight: { get: () => state.maxInFlight },
  }) as Responder & { readonly inFlight: number; readonly maxInFlight: number };
}

export interface RawServer {
  url: string;
  connections: number;
  close(): Promise<void>;
}

/** A TCP server that speaks whatever `onRequestBytes` writes: for malformed HTTP responses. */
export async function rawServer(onRequestBytes: (socket: net.Socket) => void): Promise<RawServer> {
  const sockets = new Set<net.Socket>();
  const state = { connections: 0 };
  const server = net.createServer((s) => {
    state.connections++;
    sockets.add(s);
    s.on('error', () => {});
    s.on('close', () => sockets.delete(s));
    s.once('data', () => onRequestBytes(s));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    get connections() {
      return state.connections;
    },
    close: () => {
      for (const s of sockets) s.destroy();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

/** A loopback port with nothing listening on it (bound, then released). */
export async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** Milliseconds between consecutive requests, by arrival time at the receiver. */
export function gaps(requests: ReceivedRequest[]): number[] {
  return requests.slice(1).map((r, i) => r.at - requests[i]!.at);
}

// ---------------------------------------------------------------------------------------------
// Worker child processes

const repoRoot = fileURLToPath(new URL('../..', import.meta.url));

export interface WorkerProcess {
  child: ChildProcess;
  pid: number;
  /** The port of the worker's operations server (/metrics), once it is listening. */
  port(): Promise<number>;
  /** Resolves with the exit code (or the signal name) when the process has ended. */
  exited: Promise<number | string>;
  output(): string;
  kill(signal: NodeJS.Signals): void;
}

/**
 * Starts `src/main.ts worker` in its own process with the platform's environment (same database,
 * same SECRETS_KEY, same Redis prefix).
 */
export function startWorkerProcess(t: TestPlatform, extraEnv: Record<string, string> = {}): WorkerProcess {
  return startPlatformProcess('worker', { ...t.env, QUEUE_PREFIX: t.queuePrefix, PORT: '0', LOG_LEVEL: 'info', ...extraEnv });
}

/**
 * Starts `src/main.ts <role>` in its own process with exactly `env` (on top of this process's
 * environment; LOG_LEVEL must be at least `info` for port() to see the "listening" line). Node runs
 * the TypeScript through tsx's loader in this one process, not through the tsx CLI, which would put
 * a second process in between: a SIGKILL must reach the process that holds the attempts.
 * `nodeArgs` come after tsx's loader (e.g. another --import).
 */
export function startPlatformProcess(role: 'all' | 'api' | 'worker', env: Record<string, string>, nodeArgs: string[] = []): WorkerProcess {
  const child = spawn(process.execPath, ['--import', 'tsx', ...nodeArgs, 'src/main.ts', role], { cwd: repoRoot, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr!.on('data', (c: Buffer) => (out += c.toString()));
  const exited = once(child, 'exit').then(([code, signal]) => (code ?? signal) as number | string);
  return {
    child,
    pid: child.pid!,
    port: () =>
      eventually(
        async () => {
          const m = /"port":(\d+)[^\n]*"msg":"listening"/.exec(out) ?? /"msg":"listening"[^\n]*"port":(\d+)/.exec(out);
          if (child.exitCode !== null) throw new Error(`${role} process exited early:\n${out}`);
          return m ? Number(m[1]) : undefined;
        },
        `${role} process listening`,
        30_000,
        50,
      ),
    exited,
    output: () => out,
    kill: (signal) => {
      if (child.exitCode === null && child.signalCode === null) process.kill(child.pid!, signal);
    },
  };
}

/** Reads one counter or gauge sample from a /metrics text, summed over label sets matching `labels`. */
export function metricValue(text: string, name: string, labels: Record<string, string> = {}): number {
  let sum = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith(name)) continue;
    const m = /^([a-z_]+)(\{([^}]*)\})? ([0-9.e+-]+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const got = Object.fromEntries([...(m[3] ?? '').matchAll(/([a-z_]+)="([^"]*)"/g)].map((x) => [x[1], x[2]]));
    if (Object.entries(labels).every(([k, v]) => got[k] === v)) sum += Number(m[4]);
  }
  return sum;
}

/**
 * Writes `count` events and their pending deliveries for one endpoint straight into the database
 * (the rows fan-out would write, thousands of times faster) and wakes the dispatcher, if the
 * platform runs one; answers the event ids.
 */
export async function insertPendingBacklog(t: TestPlatform, tenantId: string, endpointId: string, count: number, acceptedAt = new Date()): Promise<string[]> {
  const ids = await insertDeliveries(t, tenantId, endpointId, count, acceptedAt, 'pending');
  t.platform.dispatcher?.wake();
  return ids;
}

/**
 * Writes `count` events whose delivery to one endpoint has succeeded, as history, and answers the
 * event ids. They never enter delivery_queue: a pending delivery updated to succeeded leaves a dead
 * entry in delivery_queue_due, which scans read again for as long as none can mark it to be
 * skipped (an older snapshot open, or its page changed under the scan).
 */
export async function insertSucceededDeliveries(t: TestPlatform, tenantId: string, endpointId: string, count: number): Promise<string[]> {
  return insertDeliveries(t, tenantId, endpointId, count, new Date(), 'succeeded');
}

async function insertDeliveries(t: TestPlatform, tenantId: string, endpointId: string, count: number, now: Date, status: 'pending' | 'succeeded'): Promise<string[]> {
  const tenantKey = uuidOf('tenant', tenantId);
  const eventIds = Array.from({ length: count }, () => newId('event'));
  // Stored under the uuid each TypeID encodes; the body names the event by its TypeID.
  const events = eventIds.map((id, i) => ({
    id: uuidOf('event', id), tenant_id: tenantKey, origin: 'api', type: 'order.created',
    body: JSON.stringify({ id, type: 'order.created', timestamp: now.toISOString(), messageId: null, data: { i } }), created_at: now,
  }));
  await t.platform.db.batchInsert('events', events, 500);
  await t.platform.db.batchInsert(
    'deliveries',
    events.map((e) => ({
      id: uuidOf('delivery', newId('delivery')),
      tenant_id: tenantKey,
      event_id: e.id,
      endpoint_id: uuidOf('endpoint', endpointId),
      status,
      next_attempt_at: status === 'pending' ? now : null,
      succeeded_at: status === 'succeeded' ? now : null,
      deadline_at: new Date(now.getTime() + 3_600_000),
      created_at: now,
      updated_at: now,
    })),
    500,
  );
  return eventIds;
}

/** The record of a claimed delivery's first attempt answered 200 in 3 ms, as a slot makes it. */
export function successOf(d: ClaimedDelivery): AttemptRecord {
  return {
    deliveryId: d.id, endpointId: d.endpoint.id, attemptNumber: d.attempt_count, leaseToken: d.lease_token, trigger: d.next_trigger,
    startedAt: new Date(), durationMs: 3, statusCode: 200, outcome: 'success', errorClass: null, errorMessage: null,
    responseExcerpt: null, next: { status: 'succeeded' }, endpointFailure: false,
  };
}

/**
 * For tests that move deliveries step by step through the SQL functions: an api-role platform (no
 * dispatcher, so deliveries move only when the test moves them), one tenant, and one connection of
 * the test's own, so every call on it reuses the plans its first calls made.
 */
export interface SteppedPlatform {
  t: TestPlatform;
  tenant: TestTenant;
  conn: Knex;
  stop(): Promise<void>;
}

export async function startSteppedPlatform(tenantName: string): Promise<SteppedPlatform> {
  const t = await startTestPlatform({ role: 'api' });
  const tenant = await t.createTenant(tenantName);
  const conn = createDb({ url: t.database.url, poolMax: 1 });
  return {
    t, tenant, conn,
    async stop() {
      await conn.destroy();
      await t.stop();
    },
  };
}

/** The circuit settings and in-flight lease that stepped tests record results and hand-offs under. */
export const steppedLimits = { circuitFailureThreshold: 3, circuitCooldownSeconds: 30 };
export const steppedLeaseMs = 30_000;
