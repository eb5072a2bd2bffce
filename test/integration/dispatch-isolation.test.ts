// One customer's endpoint that hangs, with thousands of deliveries waiting, must not slow anyone
// else down. The healthy endpoint's delivery time is measured twice on the same platform: before
// the hanging endpoint has a backlog and with it, and must stay prompt and similar. Events are
// written in bulk so the measurement is the dispatcher's, not the publishing API's.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEndpoint, insertPendingBacklog, statusCounts } from '../helpers/dispatch.js';
import { eventually, startTestPlatform, type TestPlatform } from '../helpers/platform.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';

const BACKLOG = 2_500;
const HEALTHY = 200;

describe('isolation between endpoints', () => {
  let t: TestPlatform;
  let hanging: Receiver;
  let healthy: Receiver;
  beforeAll(async () => {
    t = await startTestPlatform({ env: { ATTEMPT_TIMEOUT_MS: '2000' } });
    hanging = await startReceiver(() => {}); // reads the request, never answers
    healthy = await startReceiver();
  });
  afterAll(async () => {
    await hanging.close();
    await healthy.close();
    await t.stop();
  });

  /** Ms from committing HEALTHY events for the healthy endpoint until the receiver has them all. */
  async function timeHealthyBatch(tenantId: string, endpointId: string): Promise<number> {
    const before = healthy.requests.length;
    const started = Date.now();
    const ids = await insertPendingBacklog(t, tenantId, endpointId, HEALTHY);
    await eventually(async () => healthy.requests.length >= before + HEALTHY, 'healthy batch delivered', 40_000, 20);
    const elapsed = healthy.requests.at(-1)!.at - started;
    const got = new Set(healthy.requests.slice(before).map((r) => String(r.headers['webhook-id'])));
    expect(ids.every((id) => got.has(id))).toBe(true);
    return elapsed;
  }

  it(`delivers ${HEALTHY} events promptly while another endpoint hangs with ${BACKLOG} deliveries waiting`, { timeout: 60_000 }, async () => {
    const stuck = await t.createTenant('stuck');
    const stuckEndpoint = await createEndpoint(stuck, { url: `${hanging.url}/hook` });
    const fine = await t.createTenant('fine');
    const fineEndpoint = await createEndpoint(fine, { url: `${healthy.url}/hook`, maxConcurrency: 50 });

    const baseline = await timeHealthyBatch(fine.id, fineEndpoint.id);

    // The backlog, as if published over a long outage.
    await insertPendingBacklog(t, stuck.id, stuckEndpoint.id, BACKLOG);
    // The hanging endpoint is busy to its limit before the measured batch starts.
    await eventually(async () => hanging.requests.length >= 10, 'hanging endpoint saturated (maxConcurrency 10)');

    const loaded = await timeHealthyBatch(fine.id, fineEndpoint.id);

    const stuckCounts = await statusCounts(t, stuckEndpoint.id);
    // The backlog was really there during the measurement, and at most its concurrency was admitted.
    expect((stuckCounts.pending ?? 0) + (stuckCounts.queued ?? 0) + (stuckCounts.in_flight ?? 0)).toBe(BACKLOG);
    expect((stuckCounts.queued ?? 0) + (stuckCounts.in_flight ?? 0)).toBeLessThanOrEqual(10);
    // Redis carries only what is runnable now, not the backlog: once the healthy batch is recorded
    // (its last slots may still be writing results when the receiver has everything), only the
    // hanging endpoint's 10 attempts remain.
    await eventually(async () => {
      const c = await statusCounts(t, fineEndpoint.id);
      return (c.pending ?? 0) + (c.queued ?? 0) + (c.in_flight ?? 0) === 0;
    }, 'healthy batch recorded');
    const counts = await Promise.all(t.platform.dispatcher!.jobQueues.map((q) => q.getJobCounts('waiting', 'active', 'delayed', 'prioritized')));
    expect(counts.flatMap((c) => Object.values(c)).reduce((a, b) => a + b, 0)).toBeLessThanOrEqual(10);

    console.info(`isolation: ${HEALTHY} healthy deliveries took ${baseline} ms alone, ${loaded} ms beside a hanging backlog of ${BACKLOG}`);
    // Prompt, and similar to the time without the backlog. Without isolation the hanging
    // endpoint's attempts would hold the worker's slots for ATTEMPT_TIMEOUT_MS each:
    // 2,500 × 2 s / 200 slots ≈ 25 s.
    expect(loaded).toBeLessThan(5_000);
    expect(loaded).toBeLessThan(baseline * 1.5 + 1_000);
  });
});
