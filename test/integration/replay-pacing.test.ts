import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEndpoint, publishMany, slowResponder } from '../helpers/dispatch.js';
import { eventually, startTestPlatform, type TestPlatform, type TestTenant } from '../helpers/platform.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';
import { answer, bulkReplay, completed, settledOn } from '../helpers/replay.js';

/**
 * A bulk replay reaches the customer as a steady stream at REPLAY_RATE_PER_SECOND, not as a spike,
 * and each endpoint's own rate limit and concurrency still hold on top of that pace.
 */
describe('bulk replay pacing', () => {
  const rate = 10;
  let t: TestPlatform;
  let tenant: TestTenant;
  const receivers: Receiver[] = [];

  /** An endpoint with `count` dead deliveries (each answered 400 once), its receiver then answering with `after`. */
  const deadBacklog = async (count: number, type: string, opts: { rateLimitPerSecond?: number; maxConcurrency?: number } = {}) => {
    const r = await startReceiver(answer(400));
    receivers.push(r);
    const ep = await createEndpoint(tenant, { url: `${r.url}/${type}`, eventTypes: [type], ...opts });
    await publishMany(tenant, count, 8, type);
    await settledOn(t, ep.id, count, 20_000);
    r.requests.length = 0;
    return { r, ep: ep.id };
  };
  const replayed = (r: Receiver, n: number) => eventually(async () => r.requests.length >= n && r.requests, `${n} replayed requests`, 20_000);

  beforeAll(async () => {
    t = await startTestPlatform({ env: { REPLAY_RATE_PER_SECOND: String(rate) } });
    tenant = await t.createTenant('pacing');
  });
  afterAll(async () => {
    await Promise.all(receivers.map((r) => r.close()));
    await t.stop();
  });

  it(`spreads 30 deliveries over about 3 s at ${rate}/s instead of sending them at once`, async () => {
    const { r, ep } = await deadBacklog(30, 'paced.thing');
    r.setResponder(answer(200));
    const postedAt = Date.now();
    const res = await bulkReplay(tenant, { filter: { endpointId: ep } });
    expect(res.body.count).toBe(30);

    const got = await replayed(r, 30);
    // The n-th delivery is due n / rate seconds after the replay's transaction began, so the n-th to
    // arrive never comes before postedAt + n × 100 ms, however late a loaded machine sends the
    // others. Unpaced, all 30 arrive within a few hundred milliseconds.
    const early = got.map((x, i) => ({ n: i + 1, afterMs: x.at - postedAt })).filter(({ n, afterMs }) => afterMs < (n * 1_000) / rate - 5);
    expect(early).toEqual([]);
    expect(new Set(got.map((x) => x.headers['webhook-id'])).size).toBe(30);
    expect(await completed(tenant, res.body.id)).toMatchObject({ total: 30, done: 30, failed: 0 });
  });

  it("keeps the endpoint's rateLimitPerSecond when it is below the replay rate", async () => {
    const limit = 4;
    const { r, ep } = await deadBacklog(12, 'limited.thing', { rateLimitPerSecond: limit });
    r.setResponder(answer(200));
    const res = await bulkReplay(tenant, { filter: { endpointId: ep } });
    expect(res.body.count).toBe(12);

    const got = await replayed(r, 12);
    // A token bucket of `limit` refilled at `limit`/s: 12 requests need at least (12 - 4) / 4 = 2 s,
    // where the replay pace alone would take 1.2 s.
    expect(got.at(-1)!.at - got[0]!.at).toBeGreaterThanOrEqual(1_800);
    await completed(tenant, res.body.id);
  });

  it("keeps the endpoint's maxConcurrency", async () => {
    const { r, ep } = await deadBacklog(8, 'narrow.thing', { maxConcurrency: 2 });
    // 500 ms answers at 10 new requests a second would overlap about five at a time without the limit.
    const slow = slowResponder(500);
    r.setResponder(slow);
    const res = await bulkReplay(tenant, { filter: { endpointId: ep } });
    expect(res.body.count).toBe(8);
    await replayed(r, 8);
    expect(await completed(tenant, res.body.id)).toMatchObject({ total: 8, done: 8, failed: 0 });
    expect(slow.maxInFlight).toBeLessThanOrEqual(2);
  });
});
