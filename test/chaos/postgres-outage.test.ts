// PostgreSQL becomes unreachable (a TCP proxy in front of it refuses every connection) while the
// platform runs intake and the dispatcher in one process, with attempts in flight. Every callback
// during the outage must get 503 + Retry-After: never a 2xx for something not stored, never a 500.
// Once PostgreSQL is back, the same process (no restart) accepts the provider's retries and
// delivers everything, including the attempts whose results could not be recorded during the cut.
import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDb } from '../../src/infra/db.js';
import { allSettled, countRows, expectAcknowledgedStored, mapConcurrent, measured, sendUntilAccepted, signed, sleep } from '../helpers/chaos.js';
import { createTestDatabase, type TestDatabase } from '../helpers/database.js';
import { createEndpoint, metricValue, slowResponder } from '../helpers/dispatch.js';
import { request } from '../helpers/http.js';
import { createSource } from '../helpers/intake.js';
import { expectNoViolations, metricsOf } from '../helpers/invariants.js';
import { eventually, startTestPlatform, type TestPlatform } from '../helpers/platform.js';
import { automation } from '../helpers/providers.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';
import { proxyDatabase, type TcpProxy } from '../helpers/tcp-proxy.js';

const BEFORE = 60;
const DURING = 30;

describe('PostgreSQL unreachable during intake, dispatcher running', () => {
  let database: TestDatabase;
  let proxy: TcpProxy;
  let t: TestPlatform;
  let direct: Knex;
  let receiver: Receiver;

  beforeAll(async () => {
    database = await createTestDatabase();
    const proxied = await proxyDatabase(database.url);
    proxy = proxied.proxy;
    // ATTEMPT_TIMEOUT_MS bounds the in-flight lease (timeout + 10 s) of attempts cut off by the outage.
    t = await startTestPlatform({ database, env: { DATABASE_URL: proxied.url, ATTEMPT_TIMEOUT_MS: '1000' } });
    // The test reads the database around the proxy.
    direct = createDb({ url: database.url, poolMax: 2 });
    receiver = await startReceiver(slowResponder(200));
  });
  afterAll(async () => {
    proxy?.restore();
    await t?.stop();
    await direct?.destroy();
    await proxy?.close();
    await receiver?.close();
    await database?.drop();
  });

  it('503 + Retry-After for every callback while it is gone, then recovery in the same process', { timeout: 120_000 }, async () => {
    const tenant = await t.createTenant();
    const source = await createSource(tenant, 'momo-automation');
    await createEndpoint(tenant, { url: `${receiver.url}/hook`, maxConcurrency: 4 });
    const body = (i: number) => automation.body(randomUUID(), 'order.created', 'sub_1', { i });
    const before = Array.from({ length: BEFORE }, (_, i) => body(i));
    await mapConcurrent(before, 10, (b) => sendUntilAccepted(() => t.url, source.id, signed.automation(source.secret, b)));
    await eventually(async () => receiver.requests.length >= 8, 'attempts under way', 30_000, 10);
    const stored = { events: await countRows(direct, 'events'), receipts: await countRows(direct, 'receipts') };

    proxy.cut('refuse');
    const cutAt = Date.now();
    // New callbacks and byte-identical repeats of stored ones, in waves over a few seconds, while
    // the dispatcher's attempts finish and fail to be recorded.
    const during = Array.from({ length: DURING }, (_, i) => body(BEFORE + i));
    const statuses: number[] = [];
    for (const wave of [during.slice(0, 10), during.slice(10, 20), [...during.slice(20), ...before.slice(0, 5)]]) {
      const answers = await Promise.all(
        wave.map((b) => {
          const cb = signed.automation(source.secret, b)();
          return request(t.url, 'POST', `/inbound/${source.id}`, { rawBody: cb.rawBody, headers: cb.headers });
        }),
      );
      for (const res of answers) {
        statuses.push(res.status);
        expect(res.status, res.text).toBe(503);
        expect(res.body).toEqual({ error: { code: 'unavailable', message: expect.any(String) } });
        expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
      }
      await sleep(500);
    }
    expect((await t.call('GET', '/readyz')).status).toBe(503);
    // Nothing was stored, nothing acknowledged.
    expect({ events: await countRows(direct, 'events'), receipts: await countRows(direct, 'receipts') }).toEqual(stored);
    const outageMs = Date.now() - cutAt;

    proxy.restore();
    const restoredAt = Date.now();
    // The provider retries what was refused; the same process must take it without a restart.
    const retried = await mapConcurrent(during, 10, (b) => sendUntilAccepted(() => t.url, source.id, signed.automation(source.secret, b), 60_000));
    const acceptingAfterMs = Date.now() - restoredAt;
    expect(retried.every((a) => a.status === 'accepted')).toBe(true);
    await expectAcknowledgedStored(direct, retried);
    expect(await countRows(direct, 'events')).toBe(BEFORE + DURING);

    await eventually(() => allSettled(direct, BEFORE + DURING), 'every delivery settled', 60_000, 250);
    const settledAfterMs = Date.now() - restoredAt;
    const metricsText = await metricsOf(t.url);
    const stats = await expectNoViolations({ db: direct, receivers: [receiver], metricsText: [metricsText] });
    expect(stats.succeeded).toBe(BEFORE + DURING);
    // Each 503 is counted as the provider chain saw it (plus those the provider loop retried on).
    expect(metricValue(metricsText, 'webhook_inbound_receipts_total', { outcome: 'unavailable' })).toBeGreaterThanOrEqual(statuses.length);
    measured('postgres-outage', {
      outageMs,
      refusedCallbacks: statuses.length,
      msFromRestoreToAllRetriesAccepted: acceptingAfterMs,
      msFromRestoreToAllSettled: settledAfterMs,
      attemptsLostInOutage: await countRows(direct, 'attempts', { error_class: 'worker_lost' }),
      redeliveries: stats.redeliveries,
    });
  });
});
