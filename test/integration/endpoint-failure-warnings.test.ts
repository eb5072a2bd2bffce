import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { warnFailing, type FailingEndpoint } from '../../src/delivery/endpoint-health.js';
import { idOfUuid, uuidOf } from '../../src/domain/ids.js';
import type { Platform } from '../../src/platform.js';
import { createEndpoint, publish } from '../helpers/dispatch.js';
import { eventually, startTestPlatform, type TestPlatform, type TestTenant } from '../helpers/platform.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';
import { answer } from '../helpers/replay.js';

/**
 * Before the sweep disables an endpoint that has failed for AUTO_DISABLE_AFTER_SECONDS, it warns the
 * tenant with `platform.endpoint.failing` at 50, 75 and 90 % of that window: once per threshold per
 * failure streak, a success starting the count again, however many processes sweep.
 */
const windowSeconds = 6;

interface Announced {
  type: string;
  id: string;
  timestamp: string;
  data: { endpointId: string; threshold?: number; failingSince?: string; lastError?: string | null; reason?: string };
}

/** Records every failure warning a platform process decided to announce, before publishing dedupes anything. */
function recordWarnings(platform: Platform, into: FailingEndpoint[]): void {
  const lifecycle = platform.lifecycle;
  const announce = lifecycle.announce.bind(lifecycle);
  lifecycle.announce = async (deadIds, disabled, failing = []) => {
    into.push(...failing);
    await announce(deadIds, disabled, failing);
  };
}

describe('failure warnings before an auto-disable', () => {
  let t: TestPlatform;
  let second: TestPlatform;
  const announcedByProcesses: FailingEndpoint[] = [];
  const receivers: Receiver[] = [];
  const receiver = async (status: number) => {
    const r = await startReceiver(answer(status));
    receivers.push(r);
    return r;
  };
  /** What the listener received, one entry per event (a retried request counts once), in event order. */
  const received = (r: Receiver): Announced[] => {
    const byId = new Map<string, Announced>();
    for (const req of r.requests) {
      const body = JSON.parse(req.body) as Announced;
      byId.set(body.id, body);
    }
    return [...byId.values()].sort((a, b) => (a.id < b.id ? -1 : 1));
  };
  // Events are stored under the uuid their TypeID encodes (the same order); the bodies name them by TypeID.
  const platformEvents = async (tenantId: string, type: string) =>
    ((await t.platform.db('events').where({ tenant_id: uuidOf('tenant', tenantId), type }).orderBy('id').pluck('id')) as string[]).map((id) => idOfUuid('event', id));

  async function failingSetup(name: string) {
    const tenant = await t.createTenant(name);
    const listener = await receiver(200);
    await createEndpoint(tenant, { url: `${listener.url}/ops`, eventTypes: ['platform.endpoint.failing', 'platform.endpoint.disabled'] });
    const failing = await receiver(503);
    // The circuit never opens here (CIRCUIT_FAILURE_THRESHOLD), so retries keep the streak going.
    const endpointId = (await createEndpoint(tenant, { url: `${failing.url}/orders`, eventTypes: ['order.*'], retryPolicy: { maxAttempts: 100 } })).id;
    return { tenant, listener, failing, endpointId };
  }

  const disabledAt = (listener: Receiver) =>
    eventually(async () => received(listener).find((e) => e.type === 'platform.endpoint.disabled'), 'platform.endpoint.disabled at the listener', 30_000);

  beforeAll(async () => {
    const env = { AUTO_DISABLE_AFTER_SECONDS: String(windowSeconds), SWEEP_INTERVAL_MS: '100', CIRCUIT_FAILURE_THRESHOLD: '1000' };
    t = await startTestPlatform({ env });
    // A second worker process on the same database and queues: two sweepers at once.
    second = await startTestPlatform({ role: 'worker', database: t.database, queuePrefix: t.queuePrefix, env: t.env });
    recordWarnings(t.platform, announcedByProcesses);
    recordWarnings(second.platform, announcedByProcesses);
  });
  afterAll(async () => {
    await Promise.all(receivers.map((r) => r.close()));
    await second?.platform.stop();
    await t?.stop();
  });

  it('sends one platform.endpoint.failing per threshold, in order, with the streak and last error, then disables the endpoint', async () => {
    const { tenant, listener, endpointId } = await failingSetup('warned');
    await publish(tenant, 'order.created');

    const disabled = await disabledAt(listener);
    expect(disabled.data).toEqual({ endpointId, reason: expect.stringContaining('failing continuously since') });
    // The warnings are published before the disable; wait for all three to arrive.
    const warnings = await eventually(async () => {
      const w = received(listener).filter((e) => e.type === 'platform.endpoint.failing');
      return w.length >= 3 && w;
    }, 'three warnings at the listener');

    const endpoint = (await tenant.call('GET', `/v1/endpoints/${endpointId}`)).body;
    expect(endpoint.status).toBe('disabled');
    const failingSince = endpoint.health.failingSince as string;
    expect(endpoint.health).toMatchObject({ warnedThreshold: 0.9, autoDisableAt: new Date(Date.parse(failingSince) + windowSeconds * 1000).toISOString() });
    expect(warnings.map((w) => w.data)).toEqual(
      [0.5, 0.75, 0.9].map((threshold) => ({ endpointId, threshold, failingSince, lastError: 'HTTP 503' })),
    );
    // Each one at (not before) its share of the window, and all before the disable.
    for (const w of warnings) expect(Date.parse(w.timestamp) - Date.parse(failingSince)).toBeGreaterThanOrEqual(w.data.threshold! * windowSeconds * 1000);
    expect(warnings.every((w) => w.id < disabled.id)).toBe(true);

    // Published once each though two processes sweep, and each decided on by one process only.
    expect(await platformEvents(tenant.id, 'platform.endpoint.failing')).toEqual(warnings.map((w) => w.id));
    expect(announcedByProcesses.filter((a) => a.id === endpointId).flatMap((a) => a.thresholds)).toEqual([0.5, 0.75, 0.9]);
    expect(received(listener).map((e) => e.type)).toEqual(['platform.endpoint.failing', 'platform.endpoint.failing', 'platform.endpoint.failing', 'platform.endpoint.disabled']);
  });

  it('starts again from 0.5 after a success ends the streak', async () => {
    const { tenant, listener, failing, endpointId } = await failingSetup('recovered');
    await publish(tenant, 'order.created');
    const first = await eventually(async () => received(listener).find((e) => e.type === 'platform.endpoint.failing'), 'the first warning', 20_000);
    expect(first.data).toMatchObject({ endpointId, threshold: 0.5 });
    expect((await tenant.call('GET', `/v1/endpoints/${endpointId}`)).body.health).toMatchObject({ failingSince: first.data.failingSince, warnedThreshold: 0.5 });

    // The receiver recovers: a new event gets through at once and ends the streak.
    failing.setResponder(answer(200));
    await publish(tenant, 'order.created');
    await eventually(async () => (await tenant.call('GET', `/v1/endpoints/${endpointId}`)).body.health.failingSince === null, 'the streak ended');
    expect((await tenant.call('GET', `/v1/endpoints/${endpointId}`)).body).toMatchObject({
      status: 'active',
      health: { failingSince: null, warnedThreshold: null, autoDisableAt: null },
    });

    // It fails again: a new streak, warned from the start, then disabled.
    failing.setResponder(answer(503));
    await publish(tenant, 'order.created');
    const disabled = await disabledAt(listener);
    const warnings = await eventually(async () => {
      const w = received(listener).filter((e) => e.type === 'platform.endpoint.failing' && e.data.failingSince !== first.data.failingSince);
      return w.length >= 3 && w;
    }, 'three warnings of the second streak');
    const secondSince = warnings[0]!.data.failingSince!;
    expect(Date.parse(secondSince)).toBeGreaterThan(Date.parse(first.data.failingSince!));
    expect(warnings.map((w) => [w.data.threshold, w.data.failingSince])).toEqual([
      [0.5, secondSince],
      [0.75, secondSince],
      [0.9, secondSince],
    ]);
    // The first streak ended well before 75 %: it got its 0.5 only.
    const all = received(listener);
    expect(all.filter((e) => e.data.failingSince === first.data.failingSince).map((e) => e.data.threshold)).toEqual([0.5]);
    expect(all.at(-1)).toEqual(disabled);
    expect(all).toHaveLength(5);
  });
});

describe('warnFailing with several sweepers at once', () => {
  let t: TestPlatform;
  let tenant: TestTenant;
  const window = 100;

  beforeAll(async () => {
    // The api role runs no sweep of its own: the calls below are the only sweepers.
    t = await startTestPlatform({ role: 'api', env: { AUTO_DISABLE_AFTER_SECONDS: String(window) } });
    tenant = await t.createTenant('contended');
  });
  afterAll(async () => t?.stop());

  const failingFor = (endpointId: string, seconds: number) =>
    t.platform.db('endpoints').where({ id: uuidOf('endpoint', endpointId) }).update({ consecutive_failures: 1, failing_since: t.platform.db.raw('now() - make_interval(secs => :seconds)', { seconds }) });
  const contend = async (endpointId: string) => {
    const results = await Promise.all(Array.from({ length: 6 }, () => warnFailing(t.platform.db, window)));
    return results.flat().filter((w) => w.id === endpointId);
  };

  it('lets exactly one of them announce each threshold; one first seen past 75 % gets 0.5 and 0.75, in order', async () => {
    const endpointId = (await createEndpoint(tenant, { url: 'http://127.0.0.1:9/never' })).id;
    await failingFor(endpointId, 80);
    const first = await contend(endpointId);
    expect(first).toHaveLength(1);
    expect(first[0]).toMatchObject({ id: endpointId, tenantId: tenant.id, thresholds: [0.5, 0.75], lastError: null });

    await failingFor(endpointId, 95);
    expect((await contend(endpointId)).map((w) => w.thresholds)).toEqual([[0.9]]);
    expect(await contend(endpointId)).toEqual([]);
    expect((await tenant.call('GET', `/v1/endpoints/${endpointId}`)).body.health).toMatchObject({ warnedThreshold: 0.9 });
  });

  it('warns no endpoint that is disabled or whose streak is younger than half the window', async () => {
    const young = (await createEndpoint(tenant, { url: 'http://127.0.0.1:9/young' })).id;
    const off = (await createEndpoint(tenant, { url: 'http://127.0.0.1:9/off' })).id;
    await failingFor(young, 49);
    await failingFor(off, 80);
    expect((await tenant.call('PATCH', `/v1/endpoints/${off}`, { body: { status: 'disabled' } })).status).toBe(200);
    const warned = (await warnFailing(t.platform.db, window)).map((w) => w.id);
    expect(warned).not.toContain(young);
    expect(warned).not.toContain(off);
  });
});
