import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDb } from '../../src/infra/db.js';
import { createTestDatabase, type TestDatabase } from '../helpers/database.js';
import { request, type ApiResponse } from '../helpers/http.js';
import {
  createEndpoint,
  createSource,
  expectError,
  expectOutcome,
  postCallback,
  readMetrics,
  receiptsDelta,
  sign,
  storedFor,
  type Callback,
  type MetricSamples,
  type Stored,
  type TestSource,
} from '../helpers/intake.js';
import { eventually, startTestPlatform, type TestPlatform, type TestTenant } from '../helpers/platform.js';
import { automation, communication } from '../helpers/providers.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';
import { proxyDatabase, type TcpProxy } from '../helpers/tcp-proxy.js';

/**
 * PostgreSQL goes away behind a TCP proxy while the platform keeps running: every callback must be
 * told 503 + Retry-After (never a 2xx for something that was not stored), readiness must say so
 * quickly, and the same process must serve again once the database is back.
 */

let database: TestDatabase;
let proxy: TcpProxy;
let t: TestPlatform;
let direct: Knex;
let tenant: TestTenant;
let source: TestSource;
let receiver: Receiver;

beforeAll(async () => {
  database = await createTestDatabase();
  const proxied = await proxyDatabase(database.url);
  proxy = proxied.proxy;
  t = await startTestPlatform({ database, env: { DATABASE_URL: proxied.url } });
  // Assertions read the database directly, around the proxy.
  direct = createDb({ url: database.url, poolMax: 2 });
  tenant = await t.createTenant('outage');
  source = await createSource(tenant, 'momo-communication');
  receiver = await startReceiver();
  await createEndpoint(tenant, `${receiver.url}/hook`);
});
afterAll(async () => {
  proxy?.restore();
  await t?.stop();
  await direct?.destroy();
  await proxy?.close();
  await receiver?.close();
  await database?.drop();
});

const callback = (messageId = `m-${randomUUID()}`, status = 'delivered'): Callback =>
  sign.communication(source.secret, communication.messageStatus(messageId, status));

async function timed<T>(work: Promise<T>): Promise<{ value: T; ms: number }> {
  const started = Date.now();
  const value = await work;
  return { value, ms: Date.now() - started };
}

function expectUnavailable(res: ApiResponse): void {
  expectError(res, 503, 'unavailable');
  expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
}

/**
 * Answers while the database is cut: new callbacks, a byte-identical repeat of a stored one, a
 * forged one and readiness, all at once; none may be a 2xx and nothing may be stored.
 */
async function duringOutage(before: Stored, warm: Callback, fresh: Callback[], limitMs: number): Promise<void> {
  const [ready, repeat, forged, ...answers] = await Promise.all([
    timed(request(t.url, 'GET', '/readyz')),
    timed(postCallback(t, source.id, warm)),
    timed(postCallback(t, source.id, { ...warm, headers: { ...warm.headers, 'x-signature': '0'.repeat(64) } })),
    ...fresh.map((cb) => timed(postCallback(t, source.id, cb))),
  ]);

  // Readiness is a probe: it must say no within its own 2 s budget, not wait for pg's timeouts.
  expect(ready!.value.status).toBe(503);
  expect(ready!.value.body).toMatchObject({ status: 'unavailable', database: false, redis: true });
  expect(ready!.ms).toBeLessThan(3_500);
  // Even a repeat of a stored callback cannot be confirmed without the database: 503, not 200.
  for (const { value, ms } of [repeat!, ...answers]) {
    expectUnavailable(value);
    expect(ms).toBeLessThan(limitMs);
  }
  // A bad signature is refused on its own merits; no database needed to know that.
  expectError(forged!.value, 401, 'bad_signature');
  expect(await storedFor(direct, source.id)).toEqual(before);
}

/** The outage as an operator sees it on /metrics: one `unavailable` per 503, nothing accepted. */
async function expectCountedUnavailable(before: MetricSamples, unavailable: number): Promise<void> {
  const after = await eventually(async () => {
    const now = await readMetrics(t.url);
    return receiptsDelta(before, now, 'momo-communication', 'unavailable') >= unavailable && now;
  }, 'unavailable counted', 5_000);
  expect(receiptsDelta(before, after, 'momo-communication', 'unavailable')).toBe(unavailable);
  expect(receiptsDelta(before, after, 'momo-communication', 'rejected_signature')).toBe(1);
}

/** After the proxy is restored: the same callbacks (as a provider would retry them) are accepted. */
async function afterRecovery(fresh: Callback[]): Promise<void> {
  const before = await storedFor(direct, source.id);
  await eventually(async () => (await request(t.url, 'GET', '/readyz')).status === 200, 'ready again', 15_000);
  const [first, ...rest] = fresh;
  const { eventId } = await eventually(async () => {
    const res = await postCallback(t, source.id, first!);
    // Until the pool has a working connection the answer may still be 503, but never anything else.
    if (res.status === 503) return undefined;
    return expectOutcome(res, 'accepted');
  }, 'a callback accepted again', 20_000);
  const results = await Promise.all(rest.map((cb) => postCallback(t, source.id, cb)));
  const eventIds = [eventId, ...results.map((res) => expectOutcome(res, 'accepted').eventId)];
  const after = await storedFor(direct, source.id);
  expect(after.events - before.events).toBe(fresh.length);
  // The dispatcher in this same process is back too: every new event reaches the endpoint.
  await eventually(async () => eventIds.every((id) => receiver.requests.some((r) => r.headers['webhook-id'] === id)), 'events delivered after recovery', 20_000);
}

describe('PostgreSQL outage behind the platform', () => {
  it('refused connections: 503 + Retry-After for every callback, nothing stored, then recovery without a restart', async () => {
    const warm = callback();
    expectOutcome(await postCallback(t, source.id, warm), 'accepted');
    const fresh = Array.from({ length: 5 }, () => callback());
    const [stored, metrics] = [await storedFor(direct, source.id), await readMetrics(t.url)];

    // A source this process has never served yet: its secret cannot be loaded, yet it must not be
    // reported unknown (404 would make a provider give up); it is the same outage, 503.
    const cold = await createSource(tenant, 'momo-automation');
    const coldCallback = sign.automation(cold.secret, automation.body(randomUUID()));

    proxy.cut('refuse');
    await duringOutage(stored, warm, fresh, 10_000);
    expectUnavailable(await postCallback(t, cold.id, coldCallback));

    proxy.restore();
    await afterRecovery(fresh);
    expectOutcome(await postCallback(t, source.id, warm), 'duplicate');
    expectOutcome(await postCallback(t, cold.id, coldCallback), 'accepted');
    await expectCountedUnavailable(metrics, fresh.length + 1);
  });

  it('black hole (connections accepted, never answered): 503 within the pg timeouts, then recovery', async () => {
    const warm = callback();
    expectOutcome(await postCallback(t, source.id, warm), 'accepted');
    const fresh = Array.from({ length: 3 }, () => callback());
    const [stored, metrics] = [await storedFor(direct, source.id), await readMetrics(t.url)];

    // pg gives up after 5 s for a new connection and 10 s for a query on an open one (src/infra/db.ts).
    proxy.cut('blackhole');
    await duringOutage(stored, warm, fresh, 12_000);

    proxy.restore();
    await afterRecovery(fresh);
    // Recovered means recovered: a burst right after is served promptly, not by stuck connections.
    const burst = await Promise.all(Array.from({ length: 10 }, () => timed(postCallback(t, source.id, callback()))));
    for (const { value, ms } of burst) {
      expectOutcome(value, 'accepted');
      expect(ms).toBeLessThan(2_000);
    }
    await expectCountedUnavailable(metrics, fresh.length + 1);
  }, 45_000);
});
