import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Webhook } from 'standardwebhooks';
import { expectError } from '../helpers/api.js';
import { createEndpoint, getDelivery, publish, settledDelivery } from '../helpers/dispatch.js';
import { eventually, startTestPlatform, type TestPlatform, type TestTenant } from '../helpers/platform.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';
import { answer, apiKeyId, hang, metric, replayOne, rowCounts } from '../helpers/replay.js';
import { sentBody } from '../helpers/database.js';
import { uuidOf } from '../../src/domain/ids.js';

/**
 * POST /v1/deliveries/:id/replay sends the same delivery again through the dispatcher: the same
 * webhook-id and body bytes, marked as a replay, with no new event or delivery, and an audit entry
 * naming who asked and why.
 */
describe('single replay', () => {
  let t: TestPlatform;
  let a: TestTenant;
  let b: TestTenant;
  const receivers: Receiver[] = [];

  const receiver = async (status: number) => {
    const r = await startReceiver(answer(status));
    receivers.push(r);
    return r;
  };
  /** A delivery that went dead with a terminal 400 on a fresh endpoint. */
  const deadDelivery = async (tenant: TestTenant, r: Receiver) => {
    const ep = await createEndpoint(tenant, { url: `${r.url}/hook` });
    const eventId = await publish(tenant);
    const d = await settledDelivery(tenant, eventId);
    expect(d).toMatchObject({ status: 'dead', deadReason: 'terminal' });
    return { ep, eventId, delivery: d };
  };

  beforeAll(async () => {
    t = await startTestPlatform();
    a = await t.createTenant('replayer');
    b = await t.createTenant('other');
  });
  afterAll(async () => {
    await Promise.all(receivers.map((r) => r.close()));
    await t.stop();
  });

  it('requires a reason: no body, no reason, an empty or blank reason all answer 400 and change nothing', async () => {
    const r = await receiver(400);
    const { delivery } = await deadDelivery(a, r);
    const path = `/v1/deliveries/${delivery.id}/replay`;
    expectError(await a.call('POST', path), 400, 'validation_failed');
    expectError(await a.call('POST', path, { body: {} }), 400, 'validation_failed');
    expectError(await a.call('POST', path, { body: { reason: '' } }), 400, 'validation_failed');
    expectError(await a.call('POST', path, { body: { reason: '   ' } }), 400, 'validation_failed');
    expectError(await a.call('POST', path, { body: { reason: 'ok', extra: true } }), 400, 'validation_failed');
    expect(await getDelivery(a, delivery.id)).toMatchObject({ status: 'dead', attemptCount: 1 });
    expect(await t.platform.db('audit_log').where({ target_id: delivery.id })).toEqual([]);
  });

  it("answers 404 for an unknown delivery and for another tenant's delivery, which stays untouched", async () => {
    const r = await receiver(400);
    const { delivery } = await deadDelivery(a, r);
    expectError(await replayOne(a, 'dlv_01h455vb4pex5vsknk084sn02q'), 404, 'not_found');
    expectError(await replayOne(b, delivery.id), 404, 'not_found');
    expect(await getDelivery(a, delivery.id)).toMatchObject({ status: 'dead', attemptCount: 1 });
    expect(await t.platform.db('audit_log').where({ target_id: delivery.id })).toEqual([]);
    expect(r.requests).toHaveLength(1);
  });

  it('replays a dead delivery: same webhook-id and body bytes, webhook-replay true, trigger replay, no new rows, audited', async () => {
    const r = await receiver(400);
    const { ep, eventId, delivery } = await deadDelivery(a, r);
    const original = r.requests[0]!;
    expect(original.headers['webhook-replay']).toBe('false');
    const before = await rowCounts(t, a.id);
    const replaysBefore = await metric(t, 'webhook_replays_total', { kind: 'single' });

    r.setResponder(answer(200));
    const sentAt = Date.now();
    const res = await replayOne(a, delivery.id, 'receiver fixed its validation bug');
    expect(res.status, res.text).toBe(202);
    expect(res.body).toEqual({ status: 'replaying', deliveryId: delivery.id });

    const replayed = await eventually(async () => r.requests[1], 'the replayed request');
    expect(replayed.headers['webhook-id']).toBe(eventId);
    expect(replayed.headers['webhook-delivery-id']).toBe(delivery.id);
    expect(replayed.headers['webhook-replay']).toBe('true');
    expect(replayed.headers['webhook-attempt']).toBe('2');
    expect(Buffer.from(replayed.body).equals(Buffer.from(original.body))).toBe(true);
    // Events are stored under the uuid their TypeID encodes.
    const stored = await t.platform.db('events').where({ id: uuidOf('event', eventId) }).first(sentBody(t.platform.db));
    expect(replayed.body).toBe(stored.body);
    // Signed afresh with the endpoint's secret, over the same bytes.
    new Webhook(ep.secret).verify(replayed.body, {
      'webhook-id': String(replayed.headers['webhook-id']),
      'webhook-timestamp': String(replayed.headers['webhook-timestamp']),
      'webhook-signature': String(replayed.headers['webhook-signature']),
    });

    const after = await eventually(async () => {
      const d = await getDelivery(a, delivery.id);
      return d.status === 'succeeded' && d;
    }, 'replayed delivery succeeded');
    expect(after.attempts!.map((x) => [x.attemptNumber, x.trigger, x.statusCode, x.outcome])).toEqual([
      [1, 'initial', 400, 'terminal'],
      [2, 'replay', 200, 'success'],
    ]);
    expect(after).toMatchObject({ deadReason: null, lastStatusCode: 200 });
    expect(await rowCounts(t, a.id)).toEqual({ ...before, attempts: before.attempts + 1 });
    expect(r.requests).toHaveLength(2);

    const audit = await a.call('GET', `/v1/audit-log?action=delivery.replayed&targetId=${delivery.id}`);
    expect(audit.status).toBe(200);
    expect(audit.body.data).toEqual([
      {
        id: expect.stringMatching(/^aud_/),
        actor: { type: 'api_key', id: await apiKeyId(t, a.id) },
        action: 'delivery.replayed',
        target: { type: 'delivery', id: delivery.id },
        reason: 'receiver fixed its validation bug',
        details: {},
        createdAt: expect.any(String),
      },
    ]);
    const at = new Date(audit.body.data[0].createdAt).getTime();
    expect(at).toBeGreaterThanOrEqual(sentAt - 1_000);
    expect(at).toBeLessThanOrEqual(Date.now() + 1_000);
    expect(await metric(t, 'webhook_replays_total', { kind: 'single' })).toBe(replaysBefore + 1);
  });

  it('replays a succeeded delivery the same way', async () => {
    const r = await receiver(200);
    const ep = await createEndpoint(a, { url: `${r.url}/ok` });
    const eventId = await publish(a);
    const d = await settledDelivery(a, eventId);
    expect(d.status).toBe('succeeded');
    const before = await rowCounts(t, a.id);

    expect((await replayOne(a, d.id)).status).toBe(202);
    await eventually(async () => r.requests.length === 2, 'the replayed request');
    const [first, second] = r.requests as [(typeof r.requests)[0], (typeof r.requests)[0]];
    expect(second.headers['webhook-id']).toBe(first.headers['webhook-id']);
    expect(second.body).toBe(first.body);
    expect([first.headers['webhook-replay'], second.headers['webhook-replay']]).toEqual(['false', 'true']);
    const after = await eventually(async () => {
      const x = await getDelivery(a, d.id);
      return x.attempts!.length === 2 && x.status === 'succeeded' && x;
    }, 'second success recorded');
    expect(after.attempts!.map((x) => x.trigger)).toEqual(['initial', 'replay']);
    expect(await rowCounts(t, a.id)).toEqual({ ...before, attempts: before.attempts + 1 });
    expect(ep.id).toBe(after.endpointId);
  });

  it('five concurrent replays of one delivery: one is accepted, the others get 409, one request is sent', async () => {
    const r = await receiver(400);
    const { delivery } = await deadDelivery(a, r);
    // The replay's request is answered only once all five have their answers: a replayed delivery
    // that had already succeeded could be replayed again, which a slow host once let happen here.
    let release!: () => void;
    const allAnswered = new Promise<void>((resolve) => (release = resolve));
    r.setResponder(async (req, res, i) => {
      await allAnswered;
      await answer(200)(req, res, i);
    });
    const answers = await Promise.all(Array.from({ length: 5 }, (_, i) => replayOne(a, delivery.id, `click ${i}`)));
    release();
    expect(answers.map((x) => x.status).sort()).toEqual([202, 409, 409, 409, 409]);
    await eventually(async () => (await getDelivery(a, delivery.id)).status === 'succeeded', 'the one replay succeeded');
    expect(await t.platform.db('audit_log').where({ target_id: delivery.id, action: 'delivery.replayed' })).toHaveLength(1);
    expect(r.requests).toHaveLength(2);
  });

  it('answers 409 while the delivery is waiting for a retry (pending) and while it is in flight', async () => {
    // A 503 with a one-minute base delay leaves the delivery pending for at least 30 s.
    const slow = await receiver(503);
    await createEndpoint(a, { url: `${slow.url}/busy`, retryPolicy: { baseDelayMs: 60_000, maxDelayMs: 60_000 } });
    const pendingEvent = await publish(a);
    const pending = await eventually(async () => {
      const list = await a.call('GET', `/v1/deliveries?eventId=${pendingEvent}`);
      const d = list.body.data[0];
      return d?.status === 'pending' && d.attemptCount === 1 && d;
    }, 'delivery pending a retry');
    expectError(await replayOne(a, pending.id), 409, 'delivery_in_progress');

    const hanging = await receiver(200);
    hanging.setResponder(hang);
    await createEndpoint(a, { url: `${hanging.url}/hang` });
    const flightEvent = await publish(a);
    const inFlight = await eventually(async () => {
      const list = await a.call('GET', `/v1/deliveries?eventId=${flightEvent}`);
      const d = list.body.data[0];
      return d?.status === 'in_flight' && d;
    }, 'delivery in flight');
    expectError(await replayOne(a, inFlight.id), 409, 'delivery_in_progress');

    expect(await t.platform.db('audit_log').whereIn('target_id', [pending.id, inFlight.id])).toEqual([]);
    expect((await getDelivery(a, pending.id)).attempts!.map((x) => x.trigger)).toEqual(['initial']);
  });

  it('answers 409 endpoint_disabled while the endpoint is disabled, and replays once it is active again', async () => {
    const r = await receiver(400);
    const { ep, delivery } = await deadDelivery(a, r);
    expect((await a.call('PATCH', `/v1/endpoints/${ep.id}`, { body: { status: 'disabled' } })).status).toBe(200);
    expectError(await replayOne(a, delivery.id), 409, 'endpoint_disabled');
    expect(await getDelivery(a, delivery.id)).toMatchObject({ status: 'dead', attemptCount: 1 });

    expect((await a.call('PATCH', `/v1/endpoints/${ep.id}`, { body: { status: 'active' } })).status).toBe(200);
    r.setResponder(answer(200));
    expect((await replayOne(a, delivery.id)).status).toBe(202);
    await eventually(async () => (await getDelivery(a, delivery.id)).status === 'succeeded', 'replay after re-enable');
    expect(r.requests).toHaveLength(2);
  });

  it('gives a delivery that ran out of attempts a fresh attempt budget', async () => {
    const r = await receiver(500);
    await createEndpoint(a, { url: `${r.url}/flaky`, retryPolicy: { maxAttempts: 2, baseDelayMs: 100, maxDelayMs: 200 } });
    const eventId = await publish(a);
    const dead = await settledDelivery(a, eventId);
    expect(dead).toMatchObject({ status: 'dead', deadReason: 'max_attempts', attemptCount: 2 });

    // Fails once more, then recovers: only a fresh budget of two attempts gets there.
    const failOnceMore = r.requests.length;
    r.setResponder((_req, res, index) => {
      res.writeHead(index === failOnceMore ? 500 : 200).end();
    });
    expect((await replayOne(a, dead.id)).status).toBe(202);
    const after = await eventually(async () => {
      const d = await getDelivery(a, dead.id);
      return (d.status === 'succeeded' || d.status === 'dead') && d.attempts!.some((x) => x.trigger === 'replay') && d;
    }, 'replayed delivery settled', 10_000);
    expect(after.status).toBe('succeeded');
    expect(after.attempts!.map((x) => [x.attemptNumber, x.trigger, x.outcome])).toEqual([
      [1, 'initial', 'retry'],
      [2, 'retry', 'terminal'],
      [3, 'replay', 'retry'],
      [4, 'retry', 'success'],
    ]);
    expect(r.requests.map((x) => x.headers['webhook-attempt'])).toEqual(['1', '2', '3', '4']);
    // Every try after the replay is marked as one, the retry included.
    expect(r.requests.map((x) => x.headers['webhook-replay'])).toEqual(['false', 'false', 'true', 'true']);
    expect(new Set(r.requests.map((x) => x.headers['webhook-id']))).toEqual(new Set([eventId]));
  });

  it('gives a delivery that outlived its maximum age a fresh one', async () => {
    const r = await receiver(500);
    await createEndpoint(a, { url: `${r.url}/old`, retryPolicy: { maxEventAgeSeconds: 1, baseDelayMs: 400, maxDelayMs: 400 } });
    const eventId = await publish(a);
    const dead = await settledDelivery(a, eventId);
    expect(dead).toMatchObject({ status: 'dead', deadReason: 'max_age' });

    // The replay's first try fails again; its retry must fit in a new maximum age counted from the replay.
    const failOnceMore = r.requests.length;
    r.setResponder((_req, res, index) => {
      res.writeHead(index === failOnceMore ? 500 : 200).end();
    });
    expect((await replayOne(a, dead.id)).status).toBe(202);
    const after = await eventually(async () => {
      const d = await getDelivery(a, dead.id);
      return d.attempts!.some((x) => x.trigger === 'replay') && (d.status === 'succeeded' || d.status === 'dead') && d;
    }, 'replayed delivery settled', 10_000);
    expect(after).toMatchObject({ status: 'succeeded', deadReason: null });
  });
});
