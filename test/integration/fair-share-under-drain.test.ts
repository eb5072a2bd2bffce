// A tenant with live events is never queued behind another tenant's backlog (issue 26, part 1).
// Tenant A's backlog on a slow-ish receiver holds every slot of the worker (WORKER_CONCURRENCY
// below the sum of A's endpoints' maxConcurrency), and each of those slots would hand itself on
// to A's next delivery for hundreds of attempts. B publishes live events one at a time. What a
// user sees: each of B's events arrives while A's backlog is still draining, and while it waits,
// A's receiver gets at most a couple of requests per worker slot (each slot finishes the attempt
// it has, and the next round gives B a slot) instead of the rest of A's backlog.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEndpoint, insertPendingBacklog, publish } from '../helpers/dispatch.js';
import { eventually, startTestPlatform, type TestPlatform } from '../helpers/platform.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';

const SLOTS = 4;
/** Slots one process may run: SLOTS admitted to it locally, and as many jobs taken from Redis. */
const PROCESS_SLOTS = 2 * SLOTS;
/** A's backlog per endpoint: at SLOTS attempts of RECEIVER_MS at a time, ~7 s to drain. */
const BACKLOG = 300;
const RECEIVER_MS = 40;
const LIVE_EVENTS = 5;

describe('fair share of a full worker under a drain', () => {
  let t: TestPlatform;
  let slow: Receiver;
  let live: Receiver;
  beforeAll(async () => {
    t = await startTestPlatform({ env: { WORKER_CONCURRENCY: String(SLOTS) } });
    slow = await startReceiver((_req, res) => {
      setTimeout(() => res.writeHead(200).end('ok'), RECEIVER_MS);
    });
    live = await startReceiver();
  });
  afterAll(async () => {
    await slow.close();
    await live.close();
    await t.stop();
  });

  /**
   * Publishes LIVE_EVENTS events of `tenant` one at a time while a backlog drains on the slow
   * receiver; for each, how many of the backlog's requests the slow receiver got between the
   * 202 and the live event's arrival, and how many backlog deliveries were still unanswered then.
   */
  async function liveDuringDrain(tenant: Parameters<typeof publish>[0], liveReceiver: Receiver, backlogTotal: number) {
    const seen: Array<{ backlogRequestsWhileWaiting: number; backlogLeft: number }> = [];
    for (let i = 0; i < LIVE_EVENTS; i++) {
      const id = await publish(tenant, 'order.created', { live: i });
      const backlogBefore = slow.requests.length;
      const arrived = await eventually(async () => liveReceiver.requests.find((r) => r.headers['webhook-id'] === id), `live event ${i} arrived`, 20_000, 5);
      const backlogWhileWaiting = slow.requests.filter((r) => r.at <= arrived.at).length - backlogBefore;
      seen.push({ backlogRequestsWhileWaiting: backlogWhileWaiting, backlogLeft: backlogTotal - slow.requests.filter((r) => r.at <= arrived.at).length });
    }
    return seen;
  }

  it('another tenant\'s live events get a slot after the attempts in flight, not after the backlog', { timeout: 40_000 }, async () => {
    slow.requests.length = 0;
    const a = await t.createTenant('backlog');
    const b = await t.createTenant('live');
    // Two endpoints of 4: together they could use twice the worker's slots.
    const aEndpoints = [await createEndpoint(a, { url: `${slow.url}/a0`, maxConcurrency: SLOTS }), await createEndpoint(a, { url: `${slow.url}/a1`, maxConcurrency: SLOTS })];
    await createEndpoint(b, { url: `${live.url}/b`, maxConcurrency: SLOTS });
    for (const ep of aEndpoints) await insertPendingBacklog(t, a.id, ep.id, BACKLOG);
    // Every slot is A's before B publishes anything.
    await eventually(async () => slow.requests.length >= 4 * SLOTS, 'backlog holding every slot');

    const seen = await liveDuringDrain(b, live, 2 * BACKLOG);
    console.info(`fair share: backlog requests while each live event waited ${seen.map((s) => s.backlogRequestsWhileWaiting).join(', ')}`);
    for (const s of seen) {
      // Each slot finishes what it is sending and at most one more hand-off that started before the
      // round saw B waiting; without the fair share B waited for a chain to end: the whole backlog.
      expect(s.backlogRequestsWhileWaiting).toBeLessThanOrEqual(2 * PROCESS_SLOTS);
      expect(s.backlogLeft).toBeGreaterThan(0);
    }
    // A keeps draining to the end: yielding a slot loses none of A's deliveries.
    await eventually(async () => slow.eventIds().size >= 2 * BACKLOG, 'backlog drained', 30_000, 100);
  });

  it('within a tenant, an endpoint with live events is not queued behind its sibling\'s backlog', { timeout: 40_000 }, async () => {
    slow.requests.length = 0;
    const a = await t.createTenant('siblings');
    // One endpoint that alone could take every slot of the worker twice over.
    const busy = await createEndpoint(a, { url: `${slow.url}/busy`, maxConcurrency: 2 * SLOTS, eventTypes: ['order.created'] });
    await createEndpoint(a, { url: `${live.url}/sibling`, maxConcurrency: SLOTS, eventTypes: ['live.created'] });
    await insertPendingBacklog(t, a.id, busy.id, 2 * BACKLOG);
    await eventually(async () => slow.requests.length >= 4 * SLOTS, 'backlog holding every slot');

    const seen: Array<{ backlogRequestsWhileWaiting: number; backlogLeft: number }> = [];
    for (let i = 0; i < LIVE_EVENTS; i++) {
      const id = await publish(a, 'live.created', { live: i });
      const backlogBefore = slow.requests.length;
      const arrived = await eventually(async () => live.requests.find((r) => r.headers['webhook-id'] === id), `live event ${i} arrived`, 20_000, 5);
      const upTo = slow.requests.filter((r) => r.at <= arrived.at).length;
      seen.push({ backlogRequestsWhileWaiting: upTo - backlogBefore, backlogLeft: 2 * BACKLOG - upTo });
    }
    console.info(`fair share (siblings): backlog requests while each live event waited ${seen.map((s) => s.backlogRequestsWhileWaiting).join(', ')}`);
    for (const s of seen) {
      expect(s.backlogRequestsWhileWaiting).toBeLessThanOrEqual(2 * PROCESS_SLOTS);
      expect(s.backlogLeft).toBeGreaterThan(0);
    }
  });
});
