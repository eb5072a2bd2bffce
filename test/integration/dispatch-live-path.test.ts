import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEndpoint, publish } from '../helpers/dispatch.js';
import { eventually, startTestPlatform, type TestPlatform } from '../helpers/platform.js';
import { metric } from '../helpers/replay.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';

/**
 * The live path: a fresh event for an endpoint with a free slot is put in flight by the admission
 * round its commit wakes, in the process that admitted it, with no Redis job on the way. Across
 * processes the api announces new work on Redis, and a lost announcement costs a polling interval,
 * never a delivery.
 */

let receiver: Receiver;

beforeAll(async () => {
  receiver = await startReceiver();
});
afterAll(async () => {
  await receiver?.close();
});

/** Counts jobs the dispatcher hands to Redis, by watching its queues' addBulk. */
function countQueuedJobs(t: TestPlatform): { jobs: number } {
  const seen = { jobs: 0 };
  for (const queue of t.platform.dispatcher!.jobQueues) {
    const addBulk = queue.addBulk.bind(queue);
    queue.addBulk = (jobs) => {
      seen.jobs += jobs.length;
      return addBulk(jobs);
    };
  }
  return seen;
}

describe('one process (npm start)', () => {
  let t: TestPlatform;
  beforeAll(async () => {
    t = await startTestPlatform({ role: 'all' });
  });
  afterAll(async () => {
    await t?.stop();
  });

  it('30 events one after another to an idle endpoint: each delivered with no Redis job', async () => {
    const tenant = await t.createTenant('live');
    const path = `live-${Date.now()}`;
    await createEndpoint(tenant, { url: `${receiver.url}/${path}`, eventTypes: ['live.*'], maxConcurrency: 4 });
    const queued = countQueuedJobs(t);
    const admittedRounds = () => metric(t, 'webhook_admission_rounds_total', { outcome: 'admitted' });
    const roundsBefore = await admittedRounds();
    for (let i = 0; i < 30; i++) {
      const id = await publish(tenant, 'live.created', { i });
      await eventually(async () => receiver.requests.some((r) => r.path === `/${path}` && r.headers['webhook-id'] === id), `event ${i} delivered`, 5_000, 5);
    }
    expect(receiver.requests.filter((r) => r.path === `/${path}`)).toHaveLength(30);
    expect(queued.jobs).toBe(0);
    // Each event came after the last had arrived: most went in flight through a round of their own.
    expect(await admittedRounds()).toBeGreaterThanOrEqual(roundsBefore + 5);
    // The last attempt is recorded just after its request arrived.
    await eventually(async () => {
      const { rows } = await t.platform.db.raw(`SELECT count(*)::int AS n FROM deliveries d JOIN events e ON e.id = d.event_id WHERE e.type = 'live.created' AND d.status = 'succeeded'`);
      return rows[0].n === 30;
    }, 'all 30 recorded as succeeded');
  });
});

describe('api and worker apart', () => {
  let worker: TestPlatform;
  let api: TestPlatform;
  let deafApi: TestPlatform;
  beforeAll(async () => {
    worker = await startTestPlatform({ role: 'worker' });
    // One deployment: the same database, secrets key and (for the announced api) Redis prefix.
    const shared = { database: worker.database, env: { SECRETS_KEY: worker.env.SECRETS_KEY! } };
    api = await startTestPlatform({ role: 'api', ...shared, queuePrefix: worker.queuePrefix });
    // Announces on another channel: nobody hears it, as if every announcement were lost.
    deafApi = await startTestPlatform({ role: 'api', ...shared, queuePrefix: `${worker.queuePrefix}x` });
  });
  afterAll(async () => {
    await deafApi?.stop();
    await api?.stop();
    await worker?.stop();
  });

  it('the worker hears the announcement and delivers; with every announcement lost, polling still delivers', async () => {
    const tenant = await api.createTenant('apart');
    const heardPath = `heard-${Date.now()}`;
    const lostPath = `lost-${Date.now()}`;
    await createEndpoint(tenant, { url: `${receiver.url}/${heardPath}`, eventTypes: ['heard.*'] });
    await createEndpoint(tenant, { url: `${receiver.url}/${lostPath}`, eventTypes: ['lost.*'] });
    const heard = await Promise.all(Array.from({ length: 10 }, (_, i) => publish(tenant, 'heard.created', { i })));
    const deafTenant = { ...tenant, call: (method: string, p: string, o?: Parameters<typeof tenant.call>[2]) => deafApi.call(method, p, { ...o, token: tenant.apiKey }) };
    const lost = await Promise.all(Array.from({ length: 10 }, (_, i) => publish(deafTenant, 'lost.created', { i })));
    const arrived = (path: string, ids: string[]) => ids.every((id) => receiver.requests.some((r) => r.path === `/${path}` && r.headers['webhook-id'] === id));
    await eventually(async () => arrived(heardPath, heard), 'announced events delivered', 10_000);
    await eventually(async () => arrived(lostPath, lost), 'unannounced events delivered by polling', 10_000);
  });
});
