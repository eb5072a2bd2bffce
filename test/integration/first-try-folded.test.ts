// A first try that succeeded is stored in its delivery rather than as a row of `attempts`
// (db/functions/attempt_stored_in_delivery.sql); every reader lists it as the attempt it was
// (db/functions/delivery_attempts.sql). Asserted: where the rows are, what the API answers, what
// endpoint statistics and retention count.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { claimDelivery, recordAttempt } from '../../src/delivery/sql/attempts.js';
import { removeDeliveries } from '../../src/store/retention-store.js';
import { createEndpoint, deliveryOfEvent, getDelivery, publish, settledDelivery, type Delivery } from '../helpers/dispatch.js';
import { eventually, startTestPlatform, type TestPlatform, type TestTenant } from '../helpers/platform.js';
import { startReceiver, type Receiver, type Responder } from '../helpers/receiver.js';
import { replayOne } from '../helpers/replay.js';

const thanks: Responder = (_req, res) => void res.writeHead(200, { 'content-type': 'text/plain' }).end('thanks');
const listedId = (deliveryId: string) => `att_${deliveryId.slice('dlv_'.length)}`;

describe('a first try that succeeded', () => {
  let t: TestPlatform;
  const receivers: Receiver[] = [];
  const receiver = async (responder: Responder) => {
    const r = await startReceiver(responder);
    receivers.push(r);
    return r;
  };
  beforeAll(async () => {
    t = await startTestPlatform();
  });
  afterAll(async () => {
    await t.stop();
    for (const r of receivers) await r.close();
  });

  async function delivered(tenant: TestTenant, r: Receiver): Promise<{ delivery: Delivery; endpointId: string }> {
    const endpoint = await createEndpoint(tenant, { url: r.url });
    const delivery = await settledDelivery(tenant, await publish(tenant));
    expect(delivery.status).toBe('succeeded');
    return { delivery, endpointId: endpoint.id };
  }
  const rowsOf = async (deliveryId: string) => Number((await t.platform.db('attempts').where({ delivery_id: deliveryId }).count({ n: '*' }))[0]!.n);

  it('is stored in its delivery, and listed as the attempt it was by the API, the statistics and retention', async () => {
    const tenant = await t.createTenant();
    const r = await receiver(thanks);
    const since = new Date(Date.now() - 60_000).toISOString();
    const { delivery, endpointId } = await delivered(tenant, r);

    expect(await rowsOf(delivery.id)).toBe(0);
    expect(await t.platform.db('deliveries').where({ id: delivery.id }).first('first_try_status_code', 'first_try_excerpt')).toEqual({
      first_try_status_code: 200,
      first_try_excerpt: 'thanks',
    });
    expect(delivery.attempts).toEqual([
      {
        id: listedId(delivery.id), attemptNumber: 1, trigger: 'initial', startedAt: expect.any(String), durationMs: expect.any(Number),
        statusCode: 200, outcome: 'success', errorClass: null, error: null, responseExcerpt: 'thanks', nextAttemptAt: null,
      },
    ]);
    expect(Date.parse(delivery.attempts![0]!.startedAt)).toBeLessThanOrEqual(r.requests[0]!.at);
    // What the listing says of it is what the writers' rule stores in a delivery.
    const { rows } = await t.platform.db.raw<{ rows: Array<{ stored: boolean }> }>(
      'SELECT attempt_stored_in_delivery(a.trigger, a.attempt_number, a.outcome) AS stored FROM delivery_attempts(?) a',
      [delivery.id],
    );
    expect(rows).toEqual([{ stored: true }]);

    const until = new Date(Date.now() + 60_000).toISOString();
    expect((await tenant.call('GET', `/v1/endpoints/${endpointId}/stats?since=${since}&until=${until}`)).body).toMatchObject({
      attempts: 1, succeeded: 1, failed: 0, byStatusClass: { '2xx': 1, '5xx': 0 },
    });
    const counted = await removeDeliveries(
      t.platform.db,
      { ids: { lower: delivery.id, upper: `${delivery.id}0` } },
      { succeeded: new Date(Date.now() + 60_000), dead: new Date(Date.now() + 60_000), audit: new Date(0) },
      { dryRun: true, batch: 10 },
    );
    expect(counted).toEqual({ deliveries: 1, attempts: 1 });
  });

  it('is stored in its delivery by the single-result path too (record_attempt_v2)', async () => {
    const api = await startTestPlatform({ role: 'api' }); // no worker: the test plays it
    try {
      const tenant = await api.createTenant();
      const { id: endpointId } = await createEndpoint(tenant, { url: 'http://127.0.0.1:9/never' });
      const eventId = await publish(tenant);
      const { id } = await eventually(() => deliveryOfEvent(tenant, eventId), 'the delivery');
      await api.platform.db('deliveries').where({ id }).update({ status: 'queued' });
      expect(await claimDelivery(api.platform.db, id, 30_000)).toMatchObject({ id, status: 'in_flight', attempt_count: 1 });
      const startedAt = new Date(Date.now() - 20);
      const recorded = await recordAttempt(
        api.platform.db,
        {
          deliveryId: id, endpointId, attemptNumber: 1, trigger: 'initial', startedAt, durationMs: 12, statusCode: 204, outcome: 'success',
          errorClass: null, errorMessage: null, responseExcerpt: null, next: { status: 'succeeded' }, endpointFailure: false,
        },
        { circuitFailureThreshold: 5, circuitCooldownSeconds: 30 },
      );
      expect(recorded.applied).toBe(true);
      expect(Number((await api.platform.db('attempts').where({ delivery_id: id }).count({ n: '*' }))[0]!.n)).toBe(0);
      expect((await getDelivery(tenant, id)).attempts).toEqual([
        expect.objectContaining({ id: listedId(id), attemptNumber: 1, trigger: 'initial', startedAt: startedAt.toISOString(), durationMs: 12, statusCode: 204, outcome: 'success' }),
      ]);
    } finally {
      await api.stop();
    }
  });

  it('is a row like any other when it failed: the first try and the retry that succeeded', async () => {
    const tenant = await t.createTenant();
    const r = await receiver((_req, res, i) => void res.writeHead(i === 0 ? 503 : 200).end());
    const { delivery } = await delivered(tenant, r);
    expect(delivery.attempts!.map((a) => [a.attemptNumber, a.trigger, a.outcome, a.statusCode])).toEqual([
      [1, 'initial', 'retry', 503],
      [2, 'retry', 'success', 200],
    ]);
    expect(await rowsOf(delivery.id)).toBe(2);
    expect(await t.platform.db('deliveries').where({ id: delivery.id }).first('first_try_started_at')).toEqual({ first_try_started_at: null });
  });

  it('comes first, then a replay’s attempt, stored as a row, each in the order they started', async () => {
    const tenant = await t.createTenant();
    const r = await receiver(thanks);
    const { delivery } = await delivered(tenant, r);
    expect((await replayOne(tenant, delivery.id)).status).toBe(202);
    const replayed = await eventually(async () => {
      const d = await getDelivery(tenant, delivery.id);
      return d.status === 'succeeded' && d.attempts?.length === 2 ? d : undefined;
    }, 'the replay recorded');
    expect(replayed.attempts!.map((a) => [a.id, a.attemptNumber, a.trigger, a.outcome])).toEqual([
      [listedId(delivery.id), 1, 'initial', 'success'],
      [expect.stringMatching(/^att_/), 2, 'replay', 'success'],
    ]);
    expect(await rowsOf(delivery.id)).toBe(1);
    expect(r.requests.filter((q) => q.headers['webhook-delivery-id'] === delivery.id)).toHaveLength(2);
  });
});
