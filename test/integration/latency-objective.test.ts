// The delivery-latency objective counts first attempts "for endpoints that are up": an event that
// waited because its endpoint was paused is left out; one that waited for the platform (no worker
// running) counts, as late. Read from the histogram the SLO rules use.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { uuidOf } from '../../src/domain/ids.js';
import { renderMetrics, resetMetrics } from '../../src/metrics/registry.js';
import { createEndpoint, metricValue } from '../helpers/dispatch.js';
import { eventually, startTestPlatform, type TestPlatform, type TestTenant } from '../helpers/platform.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';

let api: TestPlatform;
let worker: TestPlatform | undefined;
let tenant: TestTenant;
let receiver: Receiver;

beforeAll(async () => {
  api = await startTestPlatform({ role: 'api' });
  tenant = await api.createTenant('objective');
  receiver = await startReceiver();
}, 60_000);

afterAll(async () => {
  await worker?.stop();
  await api?.stop();
  await receiver?.close();
});

const histogram = async (series: string) => metricValue((await renderMetrics()).body, `webhook_first_attempt_delay_seconds_${series}`, series === 'bucket' ? { le: '5' } : {});

describe('first attempts for endpoints that are up', () => {
  it('leaves out what waited for a paused endpoint and counts what waited for the platform', async () => {
    const held = await createEndpoint(tenant, { url: `${receiver.url}/held`, eventTypes: ['held.*'] });
    await createEndpoint(tenant, { url: `${receiver.url}/late`, eventTypes: ['late.*'] });
    expect((await tenant.call('POST', `/v1/endpoints/${held.id}/pause`, { body: { reason: 'maintenance' } })).status).toBe(200);
    const published = await Promise.all(
      ['held.one', 'late.one'].map(async (type) => (await tenant.call('POST', '/v1/events', { body: { type, data: {} } })).body.id as string),
    );
    // Rows hold the events as the uuids their TypeIDs encode.
    const stored = published.map((id) => uuidOf('event', id));
    // Both waited a minute: as if the pause, and the outage of every worker, had lasted that long.
    await api.platform.db('events').whereIn('id', stored).update({ created_at: api.platform.db.raw("created_at - interval '60 seconds'") });
    expect((await tenant.call('POST', `/v1/endpoints/${held.id}/resume`, { body: {} })).status).toBe(200);

    resetMetrics();
    worker = await startTestPlatform({ role: 'worker', database: api.database, queuePrefix: api.queuePrefix, env: api.env });
    await eventually(
      async () => (await api.platform.db('deliveries').whereIn('event_id', stored).where('status', 'succeeded').count({ n: '*' }))[0]!.n == 2,
      'both events delivered',
    );
    // A late attempt is judged beside its slot, once its endpoint is read again; stopping the
    // worker waits for every judgment its attempts left.
    await worker.stop();
    worker = undefined;

    // One first attempt counted (the platform's lateness), and it was late; the held one is not there.
    expect(await histogram('count')).toBe(1);
    expect(await histogram('bucket')).toBe(0);
    expect(receiver.requests.map((r) => r.path).sort()).toEqual(['/held', '/late']);
  }, 60_000);
});
