// Per-message ordering as a receiver experiences it: an endpoint with `ordering: "per-message"`
// receives each message's events in acceptance order, one at a time per message, even when a third
// of its answers are failures, while different messages proceed in parallel; a dead delivery
// releases the next; events without a messageId are not held at all.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { statusCounts } from '../helpers/dispatch.js';
import { postCallback, sign } from '../helpers/intake.js';
import {
  expectInOrder,
  FAIL,
  messageIds,
  OK,
  orderViolations,
  publishPerMessage,
  startMessageReceiver,
  type Hold,
  type MessageReceiver,
  orderedEndpoint,
} from '../helpers/ordering.js';
import { eventually, startTestPlatform, type TestPlatform, type TestTenant } from '../helpers/platform.js';
import { communication } from '../helpers/providers.js';

const receivers: MessageReceiver[] = [];
async function receiver(hold?: Hold): Promise<MessageReceiver> {
  const r = await startMessageReceiver(hold);
  receivers.push(r);
  return r;
}


/** ~30 % of attempts fail with 500, at random (each attempt independently). */
const flaky = () => (Math.random() < 0.3 ? FAIL : OK);

let t: TestPlatform;
beforeAll(async () => {
  t = await startTestPlatform();
});
afterAll(async () => {
  for (const r of receivers) await r.close();
  await t.stop();
});

describe('ordered delivery under random failures', () => {
  it('20 messages × 4 published events: each message in acceptance order, all delivered, messages in parallel', async () => {
    const tenant = await t.createTenant();
    const r = await receiver(() => 5 + Math.floor(Math.random() * 20));
    r.setVerdict(flaky);
    const endpointId = await orderedEndpoint(tenant, r.url);

    const expected = await publishPerMessage(tenant, messageIds('pub', 20), ['parcel.created', 'parcel.packed', 'parcel.shipped', 'parcel.delivered']);
    await eventually(async () => r.delivered().size === 80 && (await statusCounts(t, endpointId)).succeeded === 80, 'all 80 delivered', 30_000, 50);

    expectInOrder(expected, r.arrivals);
    // The failures really happened (so retries were exercised), and nothing went dead.
    expect(r.arrivals.filter((a) => !a.ok).length).toBeGreaterThan(5);
    expect(await statusCounts(t, endpointId)).toEqual({ succeeded: 80 });
    // One at a time per message, but several messages at once (up to maxConcurrency 8).
    expect(r.maxInFlightPerMessage()).toBe(1);
    expect(r.maxMessagesInFlight()).toBeGreaterThan(1);
    expect(r.maxInFlight()).toBeLessThanOrEqual(8);
  });

  it('20 messages × 3 momo-communication statuses (accepted → sent → delivered): same guarantees', async () => {
    const tenant = await t.createTenant();
    const source = await tenant.call('POST', '/v1/sources', { body: { type: 'momo-communication', name: 'sms' } });
    expect(source.status, source.text).toBe(201);
    const r = await receiver(() => 5 + Math.floor(Math.random() * 20));
    r.setVerdict(flaky);
    const endpointId = await orderedEndpoint(tenant, r.url);

    const expected = new Map<string, string[]>();
    await Promise.all(
      messageIds('sms', 20).map(async (messageId) => {
        const ids: string[] = [];
        expected.set(messageId, ids);
        for (const status of ['accepted', 'sent', 'delivered']) {
          const res = await postCallback(t, source.body.id, sign.communication(source.body.secret, communication.messageStatus(messageId, status)));
          expect(res.status, res.text).toBe(200);
          expect(res.body.status).toBe('accepted');
          ids.push(res.body.eventId as string);
        }
      }),
    );
    await eventually(async () => r.delivered().size === 60 && (await statusCounts(t, endpointId)).succeeded === 60, 'all 60 delivered', 30_000, 50);

    expectInOrder(expected, r.arrivals);
    expect(r.arrivals.filter((a) => !a.ok).length).toBeGreaterThan(3);
    expect(r.maxInFlightPerMessage()).toBe(1);
    expect(r.maxMessagesInFlight()).toBeGreaterThan(1);
    expect(await statusCounts(t, endpointId)).toEqual({ succeeded: 60 });
  });

  it('the checker catches disorder: an unordered endpoint given the same work is caught by it', async () => {
    // Guards the guard: with `ordering: "none"` the same assertions must fail, or the tests above
    // would prove nothing. Each message's first attempt is refused and every request is held
    // 300 ms, so the next event (published right after) arrives before the refused one is retried.
    const tenant = await t.createTenant();
    const r = await receiver(() => 300);
    const refused = new Set<string>();
    r.setVerdict((a) => (refused.has(a.messageId!) ? OK : (refused.add(a.messageId!), FAIL)));
    const res = await tenant.call('POST', '/v1/endpoints', { body: { url: r.url, maxConcurrency: 8 } });
    expect(res.status).toBe(201);
    const expected = await publishPerMessage(tenant, messageIds('ctl', 4), ['a.1', 'a.2', 'a.3', 'a.4']);
    await eventually(async () => r.delivered().size === 16, 'all 16 delivered', 20_000);
    expect(orderViolations(expected, r.arrivals)).not.toEqual([]);
    expect(r.maxInFlightPerMessage()).toBeGreaterThan(1);
  });
});

describe('dead releases the next', () => {
  it('a delivery that goes dead after maxAttempts lets the later events of its message through, in order', async () => {
    const tenant = await t.createTenant();
    const r = await receiver();
    // The receiver rejects one event every time; everything else is accepted.
    r.setVerdict((a) => (a.messageId === 'm-dead' && a.type === 'step.2' ? FAIL : OK));
    const endpointId = await orderedEndpoint(tenant, r.url, { retryPolicy: { maxAttempts: 2, baseDelayMs: 100, maxDelayMs: 200 } });
    const expected = await publishPerMessage(tenant, ['m-dead', 'm-other'], ['step.1', 'step.2', 'step.3', 'step.4']);
    const [e1, poison, e3, e4] = expected.get('m-dead')!;
    await eventually(async () => r.delivered().size === 7 && (await statusCounts(t, endpointId)).succeeded === 7, '7 delivered', 15_000);

    const seen = r.arrivals.filter((a) => a.messageId === 'm-dead').map((a) => [a.eventId, a.ok]);
    expect(seen).toEqual([
      [e1, true],
      [poison, false],
      [poison, false],
      [e3, true],
      [e4, true],
    ]);
    expectInOrder(new Map([['m-other', expected.get('m-other')!]]), r.arrivals);
    const list = await tenant.call('GET', `/v1/deliveries?eventId=${poison}`);
    expect(list.body.data).toEqual([expect.objectContaining({ status: 'dead', deadReason: 'max_attempts', attemptCount: 2 })]);
    expect(await statusCounts(t, endpointId)).toEqual({ succeeded: 7, dead: 1 });
  });
});

describe('events without a messageId are unordered', () => {
  it('flow in parallel through an ordered endpoint, up to its concurrency', async () => {
    const tenant = await t.createTenant();
    // Each request is held 500 ms, far longer than publishing all eight at once takes: if they were
    // serialised like a message's events, the receiver would never hold more than one.
    const r = await receiver(() => 500);
    await orderedEndpoint(tenant, r.url, { maxConcurrency: 4 });
    const ids = await Promise.all(
      Array.from({ length: 8 }, async (_, i) => {
        const res = await tenant.call('POST', '/v1/events', { body: { type: 'ping', data: { i } }, headers: { 'idempotency-key': `free-${i}` } });
        expect(res.status).toBe(202);
        return res.body.id as string;
      }),
    );
    await eventually(async () => r.delivered().size === 8, 'all 8 delivered', 10_000);
    expect(r.maxInFlight()).toBe(4);
    expect(r.delivered()).toEqual(new Set(ids));
    // A message's events through the same endpoint still go one at a time, in order.
    const expected = await publishPerMessage(tenant, ['held'], ['h.1', 'h.2', 'h.3']);
    await eventually(async () => r.delivered().size === 11, 'the message delivered', 10_000);
    expect(r.maxInFlightPerMessage()).toBe(1);
    expectInOrder(expected, r.arrivals);
  });
});
