// Helpers for the replay, dead-letter and operational-event tests: everything goes through the real
// HTTP API, PostgreSQL and loopback receivers; the database is read only to count what a user would
// otherwise have to count page by page.
import type { ServerResponse } from 'node:http';
import { expect } from 'vitest';
import { metricValue } from './dispatch.js';
import { eventually, type TestPlatform, type TestTenant } from './platform.js';
import type { ReceivedRequest, Responder } from './receiver.js';
import { attemptsListed } from './database.js';
import { idOfUuid, uuidOf } from '../../src/domain/ids.js';

/** Answers every request with `status` (a tiny body so the attempt records an excerpt). */
export const answer =
  (status: number): Responder =>
  (_req, res) => {
    res.writeHead(status, { 'content-type': 'text/plain' }).end(`status ${status}`);
  };

/** Never answers: the attempt stays in flight until the platform's attempt timeout. */
export const hang: Responder = () => undefined;

/**
 * Holds every request until `release()` is called, then answers them (and later ones) with 200.
 * Lets a test look at state "while work is running" without racing the dispatcher.
 */
export function gate(): Responder & { release(): void; held: number } {
  const waiting: ServerResponse[] = [];
  let open = false;
  const responder = ((_req: ReceivedRequest, res: ServerResponse) => {
    if (open) res.writeHead(200).end();
    else waiting.push(res);
  }) as unknown as Responder & { release(): void; held: number };
  responder.release = () => {
    open = true;
    for (const res of waiting.splice(0)) res.writeHead(200).end();
  };
  Object.defineProperty(responder, 'held', { get: () => waiting.length });
  return responder;
}

export interface RowCounts {
  events: number;
  deliveries: number;
  attempts: number;
}

/** The tenant's events, deliveries and attempts, counted in PostgreSQL. */
export async function rowCounts(t: TestPlatform, tenantId: string): Promise<RowCounts> {
  const tenantKey = uuidOf('tenant', tenantId);
  const count = async (table: string) => Number((await t.platform.db(table).where({ tenant_id: tenantKey }).count({ n: '*' }))[0]!.n);
  // An attempt's tenant is its delivery's.
  const attempts = Number((await attemptsListed(t.platform.db).whereIn('delivery_id', t.platform.db('deliveries').where({ tenant_id: tenantKey }).select(t.platform.db.raw("typeid_of('dlv', id)"))).count({ n: '*' }))[0]!.n);
  return { events: await count('events'), deliveries: await count('deliveries'), attempts };
}

/** The id of the tenant's (only) API key: the actor id audit entries must name. */
export async function apiKeyId(t: TestPlatform, tenantId: string): Promise<string> {
  const row = await t.platform.db('api_keys').where({ tenant_id: uuidOf('tenant', tenantId) }).first('id');
  return row.id as string;
}

/** Waits until the endpoint has exactly `count` deliveries and none is still waiting or in flight. */
export async function settledOn(t: TestPlatform, endpointId: string, count: number, timeoutMs = 15_000): Promise<void> {
  await eventually(
    async () => {
      const rows: Array<{ status: string }> = await t.platform.db('deliveries').where({ endpoint_id: uuidOf('endpoint', endpointId) }).select('status');
      return rows.length === count && rows.every((r) => r.status === 'succeeded' || r.status === 'dead');
    },
    `${count} settled deliveries on ${endpointId}`,
    timeoutMs,
  );
}

/** Delivery ids (TypeIDs) of an endpoint in a given state, oldest first (the order a bulk replay takes them). */
export async function deliveryIds(t: TestPlatform, where: Record<string, unknown>): Promise<string[]> {
  const stored: string[] = await t.platform.db('deliveries').where(where).orderBy('id').pluck('id');
  return stored.map((id) => idOfUuid('delivery', id));
}

export async function replayOne(tenant: TestTenant, deliveryId: string, reason = 'customer asked for it again') {
  return tenant.call('POST', `/v1/deliveries/${deliveryId}/replay`, { body: { reason } });
}

export async function bulkReplay(tenant: TestTenant, body: Record<string, unknown>) {
  return tenant.call('POST', '/v1/replays', { body: { reason: 'bulk replay in a test', ...body } });
}

export interface Progress {
  id: string;
  status: 'running' | 'completed';
  total: number;
  done: number;
  failed: number;
  reason: string;
  filter: unknown;
  createdAt: string;
}

export async function progress(tenant: TestTenant, replayId: string): Promise<Progress> {
  const res = await tenant.call('GET', `/v1/replays/${replayId}`);
  expect(res.status, res.text).toBe(200);
  return res.body as Progress;
}

export async function completed(tenant: TestTenant, replayId: string, timeoutMs = 15_000): Promise<Progress> {
  return eventually(async () => {
    const p = await progress(tenant, replayId);
    return p.status === 'completed' && p;
  }, `replay ${replayId} completed`, timeoutMs);
}

export async function metric(t: TestPlatform, name: string, labels: Record<string, string> = {}): Promise<number> {
  const res = await t.call('GET', '/metrics');
  expect(res.status).toBe(200);
  return metricValue(res.text, name, labels);
}
