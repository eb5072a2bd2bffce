// Pause and resume, judged by what real receivers saw: a paused endpoint starts nothing (attempts in
// flight finish), keeps its waiting work and new events pending, loses only what outlives its max
// event age, and on resume gets everything, each message's events in order. Audit entries, the
// operational events and the gauge say so too.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEndpoint, deliveryOfEvent, metricValue, publish, statusCounts } from '../helpers/dispatch.js';
import { dispatchedMarker } from '../helpers/marker.js';
import { expectInOrder, messageIds, orderedEndpoint, publishPerMessage, startMessageReceiver, type MessageReceiver } from '../helpers/ordering.js';
import { eventually, startTestPlatform, type TestPlatform, type TestTenant } from '../helpers/platform.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';

const pausedGauge = async (t: TestPlatform) => metricValue((await t.call('GET', '/metrics')).text, 'webhook_endpoints_paused');

describe('pausing an endpoint', () => {
  let t: TestPlatform;
  let tenant: TestTenant;
  let ops: Receiver;
  const receivers: MessageReceiver[] = [];
  beforeAll(async () => {
    t = await startTestPlatform();
    tenant = await t.createTenant('pause');
    ops = await startReceiver();
    await createEndpoint(tenant, { url: `${ops.url}/ops`, eventTypes: ['platform.endpoint.paused', 'platform.endpoint.resumed'] });
  });
  afterAll(async () => {
    for (const r of receivers) await r.close();
    await ops.close();
    await t.stop();
  });

  it('holds a 200-event backlog for 10 s, then delivers all of it in order, none dead', async () => {
    const receiver = await startMessageReceiver(() => 25);
    receivers.push(receiver);
    const endpointId = await orderedEndpoint(tenant, receiver.url, { eventTypes: ['pause.*'], maxConcurrency: 4 });
    const expected = await publishPerMessage(tenant, messageIds('pm', 40), ['pause.a', 'pause.b', 'pause.c', 'pause.d', 'pause.e'], 'backlog');
    await eventually(async () => receiver.arrivals.length >= 10, 'the drain is under way');

    const paused = await tenant.call('POST', `/v1/endpoints/${endpointId}/pause`, { body: { reason: 'receiver maintenance' } });
    expect(paused.status, paused.text).toBe(200);
    expect(paused.body.status).toBe('paused');
    const pausedAt = Date.now();

    // Attempts in flight finish and are recorded; admitted work returns to pending unsent.
    await eventually(async () => {
      const c = await statusCounts(t, endpointId);
      return !c.queued && !c.in_flight && receiver.inFlight() === 0;
    }, 'nothing of the endpoint queued or in flight');
    const quietFrom = Date.now();
    const sentBeforeQuiet = receiver.arrivals.length;
    expect(sentBeforeQuiet).toBeLessThan(200);

    // New events still fan out to it, and wait.
    const during = await publishPerMessage(tenant, messageIds('pm', 40).slice(0, 10), ['pause.f'], 'during');
    for (const [messageId, ids] of during) expected.get(messageId)!.push(...ids);
    for (const ids of during.values()) expect((await deliveryOfEvent(tenant, ids[0]!))?.status).toBe('pending');
    expect(await eventually(async () => ((await pausedGauge(t)) === 1 ? 1 : undefined), 'the gauge counts the paused endpoint')).toBe(1);

    // The pause lasts 10 s; then admission has demonstrably had its rounds (a marker event arrived
    // elsewhere) and the paused receiver has had nothing since its in-flight attempts ended.
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, pausedAt + 10_000 - Date.now())));
    await dispatchedMarker(t);
    expect(receiver.arrivals.filter((a) => a.at >= quietFrom)).toEqual([]);
    const held = await statusCounts(t, endpointId);
    expect(held.dead ?? 0).toBe(0);
    expect(held.pending).toBe(210 - held.succeeded!);

    const resumed = await tenant.call('POST', `/v1/endpoints/${endpointId}/resume`);
    expect(resumed.status, resumed.text).toBe(200);
    expect(resumed.body.status).toBe('active');

    await eventually(async () => receiver.delivered().size === 210, 'all 210 events delivered', 60_000);
    expectInOrder(expected, receiver.arrivals);
    // The last answers are recorded a moment after the receiver sent them.
    const counts = await eventually(async () => {
      const c = await statusCounts(t, endpointId);
      return !c.in_flight && c;
    }, 'every attempt recorded');
    expect(counts).toEqual({ succeeded: 210 });
    await eventually(async () => (await pausedGauge(t)) === 0, 'the gauge back to 0');

    const audit = await tenant.call('GET', `/v1/audit-log?targetId=${endpointId}`);
    const actions = audit.body.data.map((e: { action: string }) => e.action);
    expect(actions).toEqual(expect.arrayContaining(['endpoint.paused', 'endpoint.resumed']));
    const pauseEntry = audit.body.data.find((e: { action: string }) => e.action === 'endpoint.paused');
    expect(pauseEntry.reason).toBe('receiver maintenance');
    expect(pauseEntry.actor.type).toBe('api_key');

    const opsEvents = await eventually(async () => {
      const bodies = ops.requests.map((r) => JSON.parse(r.body) as { type: string; data: { endpointId: string; reason?: string; at: string } });
      const mine = bodies.filter((b) => b.data.endpointId === endpointId);
      return mine.length >= 2 && mine;
    }, 'platform.endpoint.paused and .resumed at the subscriber');
    const pausedEvent = opsEvents.find((e) => e.type === 'platform.endpoint.paused')!;
    expect(pausedEvent.data.reason).toBe('receiver maintenance');
    expect(Date.parse(pausedEvent.data.at)).not.toBeNaN();
    expect(opsEvents.find((e) => e.type === 'platform.endpoint.resumed')?.data.reason).toBeUndefined();
  }, 120_000);

  it('still dead-letters what outlives its max event age while paused, as max_age', async () => {
    const receiver = await startMessageReceiver(() => 5);
    receivers.push(receiver);
    const ep = await createEndpoint(tenant, { url: receiver.url, eventTypes: ['aging.*'], retryPolicy: { maxEventAgeSeconds: 2 } });
    expect((await tenant.call('PATCH', `/v1/endpoints/${ep.id}`, { body: { status: 'paused' } })).body.status).toBe('paused');
    const ids = [await publish(tenant, 'aging.one'), await publish(tenant, 'aging.two')];
    for (const id of ids) expect((await deliveryOfEvent(tenant, id))?.status).toBe('pending');

    for (const id of ids) {
      const dead = await eventually(async () => {
        const d = await deliveryOfEvent(tenant, id);
        return d?.status === 'dead' && d;
      }, 'the delivery past its max age is dead');
      expect(dead.deadReason).toBe('max_age');
      expect(dead.attemptCount).toBe(0);
    }
    expect(receiver.arrivals).toEqual([]);
    expect((await tenant.call('GET', `/v1/endpoints/${ep.id}`)).body.status).toBe('paused');
  });

  it('answers 404 for another tenant; the routes are documented and need a manage portal link', async () => {
    const ep = await createEndpoint(tenant, { url: 'http://127.0.0.1:9/none', eventTypes: ['none.*'] });
    const other = await t.createTenant('other');
    const refused = await other.call('POST', `/v1/endpoints/${ep.id}/pause`);
    expect(refused.status, refused.text).toBe(404);
    const spec = await t.call('GET', '/openapi.json');
    const pause = spec.body.paths['/v1/endpoints/{id}/pause'].post;
    expect(pause['x-portal-capability']).toBe('manage');
    expect(spec.body.paths['/v1/endpoints/{id}/resume'].post.operationId).toBe('resumeEndpoint');
  });
});

// Role `api`: no dispatcher, so the test moves deliveries itself and can hold one at the moment
// between admission (queued in Redis) and its claim, which a pause may fall into.
describe('a delivery admitted before the pause and claimed after it', () => {
  let t: TestPlatform;
  let tenant: TestTenant;
  beforeAll(async () => {
    t = await startTestPlatform({ role: 'api' });
    tenant = await t.createTenant('pause-claim');
  });
  afterAll(async () => {
    await t.stop();
  });

  it('goes back to pending unsent, with no attempt counted, and the sweep leaves it waiting', async () => {
    const ep = await createEndpoint(tenant, { url: 'http://127.0.0.1:9/held', eventTypes: ['held.*'], maxConcurrency: 5 });
    const ids = [await publish(tenant, 'held.one'), await publish(tenant, 'held.two')];
    const round = await t.platform.lifecycle.admit();
    const admitted = round.queued.filter((d) => d.endpoint_id === ep.id).map((d) => d.id);
    expect(admitted).toHaveLength(2);

    expect((await tenant.call('POST', `/v1/endpoints/${ep.id}/pause`)).status).toBe(200);
    for (const id of admitted) expect((await t.platform.lifecycle.claim(id, 30_000))?.status).toBe('pending');
    await t.platform.lifecycle.sweep();
    for (const id of ids) {
      const d = await tenant.call('GET', `/v1/deliveries/${(await deliveryOfEvent(tenant, id))!.id}`);
      expect(d.body).toMatchObject({ status: 'pending', attemptCount: 0, deadReason: null });
      expect(d.body.attempts).toEqual([]);
    }
    // Paused: admission starts nothing.
    expect((await t.platform.lifecycle.admit()).queued.filter((d) => d.endpoint_id === ep.id)).toEqual([]);

    expect((await tenant.call('POST', `/v1/endpoints/${ep.id}/resume`)).status).toBe(200);
    const resumed = (await t.platform.lifecycle.admit()).queued.filter((d) => d.endpoint_id === ep.id);
    expect(resumed.map((d) => d.id).sort()).toEqual([...admitted].sort());
  });
});
