// Backlogs yield to live work (src/outbound/backlog-pacing.ts). Tenant B publishes a live stream;
// tenant A's backlog, accepted a minute ago (late), appears beside it. What a user sees: A's
// receiver gets the backlog at a pace, not all at once, while B's events keep arriving; the pace
// shows on /metrics; and once B stops, the rest of A's backlog drains unpaced, none of it lost.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEndpoint, insertPendingBacklog, publish } from '../helpers/dispatch.js';
import { eventually, startTestPlatform, type TestPlatform } from '../helpers/platform.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';
import { metric } from '../helpers/replay.js';

const BACKLOG = 2_000;
/** How long A's first requests are counted for, from the first of them. */
const WINDOW_MS = 1_500;

describe('backlog pacing beside live work', () => {
  let t: TestPlatform;
  let drain: Receiver;
  let live: Receiver;
  beforeAll(async () => {
    t = await startTestPlatform();
    drain = await startReceiver();
    live = await startReceiver();
  });
  afterAll(async () => {
    await drain.close();
    await live.close();
    await t.stop();
  });

  const pacedPerSecond = () => metric(t, 'webhook_backlog_paced_per_second');

  it("paces another tenant's backlog while live events flow, and lets it go when they stop", { timeout: 60_000 }, async () => {
    const a = await t.createTenant('drain');
    const b = await t.createTenant('live');
    const aEndpoint = await createEndpoint(a, { url: `${drain.url}/a`, maxConcurrency: 10 });
    await createEndpoint(b, { url: `${live.url}/b` });

    // B's live stream: one event every 50 ms until the test says stop.
    let streaming = true;
    const sent: string[] = [];
    const stream = (async () => {
      while (streaming) {
        sent.push(await publish(b, 'order.created', { n: sent.length }));
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    })();
    try {
      await eventually(async () => live.requests.length >= 10 || undefined, "B's first live events");

      await insertPendingBacklog(t, a.id, aEndpoint.id, BACKLOG, new Date(Date.now() - 60_000));
      const first = await eventually(async () => drain.requests[0], "A's first backlog request", 10_000, 5);
      const pace = await pacedPerSecond();
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, first.at + WINDOW_MS - Date.now())));
      const inWindow = drain.requests.filter((r) => r.at <= first.at + WINDOW_MS).length;
      console.info(`backlog pacing: pace ${pace}/s; ${inWindow} of A's requests in the first ${WINDOW_MS} ms`);
      // From the floor of 50/s, growing by a tenth per 250 ms at most: about 120 in 1.5 s. Unpaced, a
      // local receiver takes thousands a second.
      expect(inWindow).toBeLessThan(400);
      expect(pace).toBeGreaterThan(0);
      // B's events kept arriving meanwhile, before A's backlog was through.
      const bDuring = live.requests.filter((r) => r.at > first.at && r.at <= first.at + WINDOW_MS).length;
      expect(bDuring).toBeGreaterThan(5);
      expect(drain.eventIds().size).toBeLessThan(BACKLOG);
    } finally {
      streaming = false;
      await stream;
    }
    // Without live work the drain runs unpaced: the rest arrives, every event of it.
    await eventually(async () => drain.eventIds().size >= BACKLOG || undefined, "A's whole backlog", 40_000, 100);
    await eventually(async () => (await pacedPerSecond()) === 0 || undefined, 'the pace let go');
    await eventually(async () => sent.every((id) => live.requests.some((r) => r.headers['webhook-id'] === id)) || undefined, "every one of B's events");
  });
});
