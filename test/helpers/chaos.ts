// Shared pieces of the chaos scenarios (test/chaos): a provider that retries the way real providers
// do, seeded shuffling so a failing order can be replayed, bounded concurrency, and the one-line
// measurements each scenario prints for the report.
import { randomBytes } from 'node:crypto';
import type { Knex } from 'knex';
import pLimit from 'p-limit';
import { request, type ApiResponse } from './http.js';
import type { Callback } from './intake.js';
import { automation } from './providers.js';
import { idOfUuid, uuidOf } from '../../src/domain/ids.js';

/**
 * A small seeded PRNG (mulberry32). Every scenario prints its seed; CHAOS_SEED=<n> replays the
 * same shuffles.
 */
export function seededRandom(label: string): () => number {
  const seed = process.env.CHAOS_SEED ? Number(process.env.CHAOS_SEED) : randomBytes(4).readUInt32LE(0);
  console.info(`[chaos] ${label}: seed ${seed} (CHAOS_SEED=${seed} replays it)`);
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

/** Fisher–Yates with the given random source; returns a new array. */
export function shuffle<T>(items: readonly T[], random: () => number): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

/** Runs `work` over every item, at most `concurrency` at a time, keeping the input order in the result. */
export async function mapConcurrent<T, R>(items: readonly T[], concurrency: number, work: (item: T, index: number) => Promise<R>): Promise<R[]> {
  const limit = pLimit(concurrency);
  return Promise.all(items.map((item, i) => limit(() => work(item, i))));
}

/** Prints one measurement line for the scenario report (the CI log keeps it). */
export function measured(scenario: string, values: Record<string, number | string>): void {
  console.info(`[chaos] ${scenario}: ${Object.entries(values).map(([k, v]) => `${k}=${v}`).join(' ')}`);
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export interface ProviderAnswer {
  status: 'accepted' | 'duplicate' | 'stale';
  eventId: string;
  receiptId: string;
  /** How many tries it took (1 = the first answer was a 200). */
  tries: number;
  /** The answers before the 200: 503s and connection failures; anything else fails the scenario. */
  refusals: string[];
}

/**
 * Sends one callback the way a provider with retries does: until it gets a 200. A 503 (storage
 * unavailable) or a connection failure (the process is down) is retried after a short pause; any
 * other answer, including every 5xx but 503, is a broken promise and throws.
 * `sign` is called per try, so time-stamped signatures are fresh on every retry.
 */
export async function sendUntilAccepted(baseUrl: () => string, sourceId: string, sign: () => Callback, timeoutMs = 90_000): Promise<ProviderAnswer> {
  const deadline = Date.now() + timeoutMs;
  const refusals: string[] = [];
  for (let tries = 1; ; tries++) {
    const cb = sign();
    let res: ApiResponse | undefined;
    try {
      res = await request(baseUrl(), 'POST', `/inbound/${sourceId}`, { rawBody: cb.rawBody, headers: cb.headers });
    } catch (err) {
      refusals.push(`connection: ${(err as Error).cause ? String((err as { cause: unknown }).cause) : (err as Error).message}`);
    }
    if (res?.status === 200) return { ...(res.body as { status: ProviderAnswer['status']; eventId: string; receiptId: string }), tries, refusals };
    if (res && res.status !== 503) throw new Error(`callback answered ${res.status} ${res.text} (a provider retrying it would see a broken promise)`);
    if (res) {
      if (!(Number(res.headers.get('retry-after')) > 0)) throw new Error(`503 without a usable Retry-After: ${res.headers.get('retry-after')}`);
      refusals.push('503');
    }
    if (Date.now() > deadline) throw new Error(`callback never accepted after ${tries} tries: ${refusals.slice(-3).join(', ')}`);
    await sleep(150);
  }
}

/** Signed callbacks, re-signed on every call (momo-automation signatures carry a timestamp). */
export const signed = {
  automation: (secret: string, body: string) => (): Callback => ({ rawBody: body, headers: automation.headers(secret, body) }),
};

/** Admin and tenant setup against any base URL (an in-process platform or a child process). */
export async function createTenantAt(baseUrl: string, adminToken: string, name = 'chaos') {
  const res = await request(baseUrl, 'POST', '/admin/tenants', { token: adminToken, body: { name } });
  if (res.status !== 201) throw new Error(`tenant creation failed: ${res.status} ${res.text}`);
  const { id, apiKey } = res.body as { id: string; apiKey: string };
  const call = <T = any>(method: string, path: string, body?: unknown) => request<T>(baseUrl, method, path, { token: apiKey, body });
  return {
    id,
    apiKey,
    call,
    async source(type: 'momo-automation' | 'momo-communication'): Promise<{ id: string; secret: string }> {
      const r = await call('POST', '/v1/sources', { type, name: `${type} source` });
      if (r.status !== 201) throw new Error(`source creation failed: ${r.status} ${r.text}`);
      return { id: r.body.id, secret: r.body.secret };
    },
    async endpoint(body: Record<string, unknown>): Promise<string> {
      const r = await call('POST', '/v1/endpoints', body);
      if (r.status !== 201) throw new Error(`endpoint creation failed: ${r.status} ${r.text}`);
      return r.body.id as string;
    },
  };
}

/**
 * Deliveries by status as the API shows them, straight from PostgreSQL (optionally of one
 * endpoint): a slot's claim is kept in the queue row only (db/functions/delivery_state.sql).
 */
export async function deliveryStatuses(db: Knex, endpointId?: string): Promise<Record<string, number>> {
  const { rows } = await db.raw<{ rows: Array<{ status: string; n: number }> }>(
    `SELECT s.status, count(*)::int AS n FROM deliveries d CROSS JOIN LATERAL delivery_state(d.id, d.status, d.attempt_count) s
      ${endpointId ? 'WHERE d.endpoint_id = :endpointId' : ''} GROUP BY s.status`,
    endpointId ? { endpointId: uuidOf('endpoint', endpointId) } : {},
  );
  return Object.fromEntries(rows.map((r) => [r.status, r.n]));
}

/** Number of rows in a table, optionally filtered. */
export async function countRows(db: Knex, table: string, where: Record<string, unknown> = {}): Promise<number> {
  const [row] = await db(table).where(where).count<{ n: number }[]>('* as n');
  return Number(row!.n);
}

/** True once every delivery is succeeded or dead (and there are `expected` of them, if given). */
export async function allSettled(db: Knex, expected?: number): Promise<boolean> {
  const s = await deliveryStatuses(db);
  const total = Object.values(s).reduce((a, b) => a + b, 0);
  const settled = (s.succeeded ?? 0) + (s.dead ?? 0);
  return settled === total && (expected === undefined || total === expected);
}

/**
 * Durable acceptance, checked from the provider's side: every callback answered 200 names a
 * receipt and an event that are in PostgreSQL, linked as the answer said. Returns how many.
 */
export async function expectAcknowledgedStored(db: Knex, answers: Array<{ receiptId: string; eventId: string }>): Promise<number> {
  const receipts = new Map<string, string>();
  const ids = answers.map((a) => a.receiptId);
  for (let i = 0; i < ids.length; i += 1000) {
    const rows: Array<{ id: string; event_id: string }> = await db('receipts').whereIn('id', ids.slice(i, i + 1000)).select('id', 'event_id');
    for (const r of rows) receipts.set(r.id, idOfUuid('event', r.event_id));
  }
  const lost = answers.filter((a) => receipts.get(a.receiptId) !== a.eventId);
  if (lost.length > 0) throw new Error(`${lost.length} acknowledged callbacks are not stored as answered, e.g. ${JSON.stringify(lost.slice(0, 3))}`);
  return answers.length;
}
