// A first try that succeeded may be stored in its delivery rather than in `attempts` (migration
// 20261204000045): every reader lists it as the attempt it was (db/functions/delivery_attempts.sql).
// The rows are folded here as a release that folds first tries stores them; what is asserted is
// what the API answers and what retention counts.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { removeDeliveries } from '../../src/store/retention-store.js';
import { foldFirstTry } from '../helpers/database.js';
import { createEndpoint, getDelivery, publish, settledDelivery, type Delivery } from '../helpers/dispatch.js';
import { eventually, startTestPlatform, type TestPlatform, type TestTenant } from '../helpers/platform.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';
import { replayOne } from '../helpers/replay.js';

describe('a first try folded into its delivery', () => {
  let t: TestPlatform;
  let receiver: Receiver;
  beforeAll(async () => {
    t = await startTestPlatform();
    receiver = await startReceiver((_req, res) => void res.writeHead(200, { 'content-type': 'text/plain' }).end('thanks'));
  });
  afterAll(async () => {
    await t.stop();
    await receiver.close();
  });

  /** A delivery that succeeded on its first try, and its endpoint. */
  async function delivered(tenant: TestTenant): Promise<{ delivery: Delivery; endpointId: string }> {
    const endpoint = await createEndpoint(tenant, { url: receiver.url });
    const delivery = await settledDelivery(tenant, await publish(tenant));
    expect(delivery).toMatchObject({ status: 'succeeded', attemptCount: 1 });
    expect(delivery.attempts).toHaveLength(1);
    return { delivery, endpointId: endpoint.id };
  }

  it('is listed as the attempt it was, by the delivery, the endpoint statistics and retention', async () => {
    const tenant = await t.createTenant();
    const { delivery, endpointId } = await delivered(tenant);
    const window = `since=${new Date(Date.now() - 3_600_000).toISOString()}&until=${new Date(Date.now() + 60_000).toISOString()}`;
    const statsBefore = await tenant.call('GET', `/v1/endpoints/${endpointId}/stats?${window}`);
    expect(statsBefore.body).toMatchObject({ attempts: 1, succeeded: 1 });

    expect(await foldFirstTry(t.platform.db, delivery.id)).toBe(1);
    expect(await t.platform.db('attempts').where({ delivery_id: delivery.id }).count({ n: '*' })).toEqual([{ n: 0 }]);

    const after = await getDelivery(tenant, delivery.id);
    // The same attempt, under the id the delivery's own suffix gives it.
    expect(after.attempts).toEqual([{ ...delivery.attempts![0]!, id: `att_${delivery.id.slice('dlv_'.length)}` }]);
    expect(after.attempts![0]).toMatchObject({ attemptNumber: 1, trigger: 'initial', outcome: 'success', statusCode: 200, responseExcerpt: 'thanks' });
    expect((await tenant.call('GET', `/v1/endpoints/${endpointId}/stats?${window}`)).body).toEqual(statsBefore.body);

    const counted = await removeDeliveries(
      t.platform.db,
      { ids: { lower: delivery.id, upper: `${delivery.id}0` } },
      { succeeded: new Date(Date.now() + 60_000), dead: new Date(Date.now() + 60_000), audit: new Date(0) },
      { dryRun: true, batch: 10 },
    );
    expect(counted).toEqual({ deliveries: 1, attempts: 1 });
  });

  it('is not another tenant’s', async () => {
    const tenant = await t.createTenant();
    const { delivery } = await delivered(tenant);
    await foldFirstTry(t.platform.db, delivery.id);
    const other = await t.createTenant();
    expect((await other.call('GET', `/v1/deliveries/${delivery.id}`)).status).toBe(404);
  });

  it('comes first, then a replay’s attempt, each in the order they started', async () => {
    const tenant = await t.createTenant();
    const { delivery } = await delivered(tenant);
    await foldFirstTry(t.platform.db, delivery.id);
    expect((await replayOne(tenant, delivery.id)).status).toBe(202);
    const replayed = await eventually(async () => {
      const d = await getDelivery(tenant, delivery.id);
      return d.status === 'succeeded' && d.attempts?.length === 2 ? d : undefined;
    }, 'the replay recorded');
    expect(replayed.attempts!.map((a) => [a.id, a.attemptNumber, a.trigger, a.outcome])).toEqual([
      [`att_${delivery.id.slice('dlv_'.length)}`, 1, 'initial', 'success'],
      [expect.stringMatching(/^att_/), 2, 'replay', 'success'],
    ]);
    expect(receiver.requests.filter((r) => r.headers['webhook-delivery-id'] === delivery.id)).toHaveLength(2);
  });
});
