// A first try that succeeded is stored in its delivery rather than as a row of `attempts`
// (db/functions/attempt_stored_in_delivery.sql); every reader lists it as the attempt it was
// (db/functions/delivery_attempts.sql). Asserted: where the rows are, what the API answers, what
// endpoint statistics and retention count.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ClaimedDelivery } from '../../src/delivery/index.js';
import { claimDelivery, recordAttempt, recordEgressFailure } from '../../src/delivery/sql/attempts.js';
import { sweep } from '../../src/delivery/sql/sweep.js';
import { uuidOf } from '../../src/domain/ids.js';
import { removeDeliveries } from '../../src/store/retention-store.js';
import { countWhereIn } from '../helpers/backdate.js';
import { createEndpoint, deliveryOfEvent, getDelivery, publish, settledDelivery, type Delivery } from '../helpers/dispatch.js';
import { eventually, startTestPlatform, type TestPlatform, type TestTenant } from '../helpers/platform.js';
import { startReceiver, type Receiver, type Responder } from '../helpers/receiver.js';
import { replayOne } from '../helpers/replay.js';

const thanks: Responder = (_req, res) => void res.writeHead(200, { 'content-type': 'text/plain' }).end('thanks');
const listedId = (deliveryId: string) => `att_${deliveryId.slice('dlv_'.length)}`;
/** The uuid right after a delivery's stored one: [stored, next) holds that delivery alone. */
const nextUuid = (uuid: string) =>
  (BigInt(`0x${uuid.replaceAll('-', '')}`) + 1n).toString(16).padStart(32, '0').replace(/^(.{8})(.{4})(.{4})(.{4})/, '$1-$2-$3-$4-');

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
  const rowsOf = (deliveryId: string) => countWhereIn(t.platform.db, 'attempts', 'delivery_id', [uuidOf('delivery', deliveryId)]);

  it('is stored in its delivery, and listed as the attempt it was by the API, the statistics and retention', async () => {
    const tenant = await t.createTenant();
    const r = await receiver(thanks);
    const since = new Date(Date.now() - 60_000).toISOString();
    const { delivery, endpointId } = await delivered(tenant, r);

    expect(await rowsOf(delivery.id)).toBe(0);
    expect(await t.platform.db('deliveries').where({ id: uuidOf('delivery', delivery.id) }).first('first_try_status_code', 'first_try_excerpt')).toEqual({
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
      [uuidOf('delivery', delivery.id)],
    );
    expect(rows).toEqual([{ stored: true }]);

    const until = new Date(Date.now() + 60_000).toISOString();
    expect((await tenant.call('GET', `/v1/endpoints/${endpointId}/stats?since=${since}&until=${until}`)).body).toMatchObject({
      attempts: 1, succeeded: 1, failed: 0, byStatusClass: { '2xx': 1, '5xx': 0 },
    });
    const counted = await removeDeliveries(
      t.platform.db,
      { ids: { lower: uuidOf('delivery', delivery.id), upper: nextUuid(uuidOf('delivery', delivery.id)) } },
      { succeeded: new Date(Date.now() + 60_000), dead: new Date(Date.now() + 60_000), audit: new Date(0) },
      { dryRun: true, batch: 10 },
    );
    expect(counted).toEqual({ deliveries: 1, attempts: 1 });
  });

  describe('recorded by the single-result path (record_attempt_v4), the test playing the worker', () => {
    let api: TestPlatform;
    beforeAll(async () => {
      api = await startTestPlatform({ role: 'api' }); // no worker of its own
    });
    afterAll(async () => api.stop());

    /** A delivery of a new event, claimed as a worker claims it. */
    async function claimed(tenant: TestTenant, endpointId: string) {
      const eventId = await publish(tenant);
      const { id } = await eventually(() => deliveryOfEvent(tenant, eventId), 'the delivery');
      return claimAgain(id, endpointId);
    }
    async function claimAgain(id: string, endpointId: string) {
      await api.platform.db('deliveries').where({ id: uuidOf('delivery', id) }).update({ status: 'queued', next_attempt_at: new Date() });
      const c = await claimDelivery(api.platform.db, id, 30_000);
      expect(c).toMatchObject({ id, status: 'in_flight', endpoint: { id: endpointId } });
      return c!;
    }
    /** Its success, recorded as deliver.ts records one: the claim's number and trigger. */
    async function succeed(c: ClaimedDelivery, startedAt: Date) {
      const recorded = await recordAttempt(
        api.platform.db,
        {
          deliveryId: c.id, endpointId: c.endpoint.id, attemptNumber: c.attempt_count, leaseToken: c.lease_token, trigger: c.next_trigger, startedAt, durationMs: 12,
          statusCode: 204, outcome: 'success', errorClass: null, errorMessage: null, responseExcerpt: null, next: { status: 'succeeded' },
          endpointFailure: false,
        },
        { circuitFailureThreshold: 5, circuitCooldownSeconds: 30 },
      );
      expect(recorded.applied).toBe(true);
    }
    const rows = (id: string) => countWhereIn(api.platform.db, 'attempts', 'delivery_id', [uuidOf('delivery', id)]);

    it('stores a first try that succeeded in its delivery', async () => {
      const tenant = await api.createTenant();
      const { id: endpointId } = await createEndpoint(tenant, { url: 'http://127.0.0.1:9/never' });
      const c = await claimed(tenant, endpointId);
      const startedAt = new Date(Date.now() - 20);
      await succeed(c, startedAt);
      expect(await rows(c.id)).toBe(0);
      expect((await getDelivery(tenant, c.id)).attempts).toEqual([
        expect.objectContaining({ id: listedId(c.id), attemptNumber: 1, trigger: 'initial', startedAt: startedAt.toISOString(), durationMs: 12, statusCode: 204, outcome: 'success' }),
      ]);
    });

    it('stores it there after an egress failure too: the attempt given back, the next one is still the first', async () => {
      const tenant = await api.createTenant();
      const { id: endpointId } = await createEndpoint(tenant, { url: 'http://127.0.0.1:9/never' });
      const c = await claimed(tenant, endpointId);
      expect(await recordEgressFailure(api.platform.db, { deliveryId: c.id, attemptNumber: c.attempt_count, leaseToken: c.lease_token, nextAt: new Date(), lastError: 'proxy down' })).toBe(true);
      const again = await claimAgain(c.id, endpointId);
      expect(again).toMatchObject({ attempt_count: 1, next_trigger: 'initial' });
      await succeed(again, new Date());
      expect(await rows(c.id)).toBe(0);
      expect((await getDelivery(tenant, c.id)).attempts!.map((a) => [a.id, a.attemptNumber, a.outcome])).toEqual([[listedId(c.id), 1, 'success']]);
    });

    it('keeps a success after a lost first try as a row: it is not the first try', async () => {
      const tenant = await api.createTenant();
      const { id: endpointId } = await createEndpoint(tenant, { url: 'http://127.0.0.1:9/never' });
      const c = await claimed(tenant, endpointId);
      // The worker died: its lease runs out and the sweep records the try as lost.
      await api.platform.db('deliveries').where({ id: uuidOf('delivery', c.id) }).update({ lease_until: new Date(Date.now() - 1_000) });
      await api.platform.db('delivery_queue').where({ delivery_id: uuidOf('delivery', c.id) }).update({ lease_until: new Date(Date.now() - 1_000) });
      expect(await sweep(api.platform.db, { defaultMaxAttempts: 5, autoDisableAfterSeconds: 3_600 })).toMatchObject({ lostInFlight: 1 });
      const again = await claimAgain(c.id, endpointId);
      expect(again).toMatchObject({ attempt_count: 2, next_trigger: 'retry' });
      await succeed(again, new Date());
      expect(await rows(c.id)).toBe(2);
      expect((await getDelivery(tenant, c.id)).attempts!.map((a) => [a.attemptNumber, a.trigger, a.outcome, a.errorClass])).toEqual([
        [1, 'initial', 'retry', 'worker_lost'],
        [2, 'retry', 'success', null],
      ]);
    });
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
    expect(await t.platform.db('deliveries').where({ id: uuidOf('delivery', delivery.id) }).first('first_try_started_at')).toEqual({ first_try_started_at: null });
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
