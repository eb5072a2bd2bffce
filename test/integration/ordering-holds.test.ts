// What holds a message's line, and what it does not: Retry-After and an open circuit hold it (and
// only it), a provider's own sequence decides the order of what is waiting, and a replay re-enters
// the line at its event's place: it is delivered as-is, after newer events, marked webhook-replay,
// and what is still waiting of the same message waits behind it.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { statusCounts } from '../helpers/dispatch.js';
import { postCallback, sign } from '../helpers/intake.js';
import { expectInOrder, FAIL, OK, orderedEndpoint, publishPerMessage, startMessageReceiver, type Hold, type MessageReceiver } from '../helpers/ordering.js';
import { eventually, startTestPlatform, type TestPlatform, type TestTenant } from '../helpers/platform.js';

const receivers: MessageReceiver[] = [];
async function receiver(hold?: Hold): Promise<MessageReceiver> {
  const r = await startMessageReceiver(hold);
  receivers.push(r);
  return r;
}


/** Arrivals of one message as [eventId, ok, replay] triples, in arrival order. */
const lineOf = (r: MessageReceiver, messageId: string) => r.arrivals.filter((a) => a.messageId === messageId).map((a) => [a.eventId, a.ok, a.replay]);

let t: TestPlatform;
beforeAll(async () => {
  // A low circuit threshold and a short cooldown make the circuit observable within a test.
  t = await startTestPlatform({ env: { CIRCUIT_FAILURE_THRESHOLD: '3', CIRCUIT_COOLDOWN_SECONDS: '1' } });
});
afterAll(async () => {
  for (const r of receivers) await r.close();
  await t.stop();
});

describe('the line holds through retries', () => {
  it('Retry-After holds the rest of that message, and only that message', async () => {
    const tenant = await t.createTenant();
    const r = await receiver();
    let first = true;
    r.setVerdict((a) => {
      if (a.messageId === 'slow' && first) {
        first = false;
        return { status: 429, headers: { 'retry-after': '2' } };
      }
      return OK;
    });
    await orderedEndpoint(tenant, r.url);
    const slow = (await publishPerMessage(tenant, ['slow'], ['s.1', 's.2', 's.3'])).get('slow')!;
    const refused = await eventually(async () => r.arrivals.find((a) => a.messageId === 'slow'), 'the 429');
    // Published while the first message's line is held by the Retry-After.
    const other = await publishPerMessage(tenant, ['other'], ['o.1', 'o.2', 'o.3']);
    await eventually(async () => r.delivered().size === 6, 'all 6 delivered', 10_000);

    expect(lineOf(r, 'slow')).toEqual([
      [slow[0], false, false],
      [slow[0], true, false],
      [slow[1], true, false],
      [slow[2], true, false],
    ]);
    const retried = r.arrivals.filter((a) => a.eventId === slow[0])[1]!;
    expect(retried.at - refused.at).toBeGreaterThanOrEqual(1_990);
    // The other message did not wait for the first one's Retry-After.
    expectInOrder(other, r.arrivals);
    expect(r.arrivals.find((a) => a.messageId === 'other')!.at).toBeLessThan(retried.at);
  });

  it('an open circuit holds the line: the half-open probe is the head, then the rest follow in order', async () => {
    const tenant = await t.createTenant();
    const r = await receiver();
    r.setVerdict((_a, i) => (i < 3 ? FAIL : OK)); // three failures in a row open the circuit (threshold 3)
    // Backoff alone would retry within ~100 ms (plus admission's 250 ms tick); a gap of a second
    // is the circuit's cooldown.
    await orderedEndpoint(tenant, r.url, { retryPolicy: { baseDelayMs: 100, maxDelayMs: 100 } });
    const [x1, x2, x3] = (await publishPerMessage(tenant, ['cb'], ['x.1', 'x.2', 'x.3'])).get('cb')!;
    await eventually(async () => r.delivered().size === 3, 'all 3 delivered', 10_000);

    expect(lineOf(r, 'cb')).toEqual([
      [x1, false, false],
      [x1, false, false],
      [x1, false, false],
      [x1, true, false],
      [x2, true, false],
      [x3, true, false],
    ]);
    expect(r.arrivals[3]!.at - r.arrivals[2]!.at).toBeGreaterThanOrEqual(900);
  });
});

describe('provider sequence', () => {
  /** A momo-automation callback about one order, carrying the provider's version of it. */
  const orderUpdate = (version: number) =>
    JSON.stringify({
      id: randomUUID(),
      event: 'order.updated',
      subject: { id: 'ord_7', type: 'order', version },
      actor: { id: 'user_1' },
      subscription: { id: 'sub_1' },
      data: { version },
    });

  it('orders what is waiting by the provider’s version, not by arrival; a late lower version is still delivered', async () => {
    const tenant = await t.createTenant();
    const source = await tenant.call('POST', '/v1/sources', { body: { type: 'momo-automation', name: 'automation' } });
    expect(source.status).toBe(201);
    let release: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => (release = resolve));
    // The first delivery is held at the receiver while versions 4, 2 and 3 arrive behind it.
    const r = await receiver((_a, i) => (i === 0 ? gate : 5));
    await orderedEndpoint(tenant, r.url);
    const accept = async (version: number) => {
      const res = await postCallback(t, source.body.id, sign.automation(source.body.secret, orderUpdate(version)));
      expect(res.status, res.text).toBe(200);
      expect(res.body.status).toBe('accepted');
      return res.body.eventId as string;
    };
    const v1 = await accept(1);
    await eventually(async () => r.arrivals.length === 1, 'version 1 in flight');
    const v4 = await accept(4);
    const v2 = await accept(2);
    const v3 = await accept(3);
    release();
    await eventually(async () => r.delivered().size === 4, 'versions 1-4 delivered');
    expect(lineOf(r, 'ord_7')).toEqual([v1, v2, v3, v4].map((id) => [id, true, false]));

    // Version 0 after version 4 was delivered: nothing is waiting to sort it against, so it is
    // delivered as it comes (late), not dropped. Receivers that keep state compare versions.
    const v0 = await accept(0);
    await eventually(async () => r.delivered().size === 5, 'version 0 delivered');
    expect(lineOf(r, 'ord_7').at(-1)).toEqual([v0, true, false]);
  });
});

describe('replay and the line', () => {
  it('replaying an older event after newer ones were delivered sends it as-is, marked webhook-replay', async () => {
    const tenant = await t.createTenant();
    const r = await receiver();
    await orderedEndpoint(tenant, r.url);
    const [e1, e2, e3] = (await publishPerMessage(tenant, ['rp'], ['r.1', 'r.2', 'r.3'])).get('rp')!;
    await eventually(async () => r.delivered().size === 3, '3 delivered');
    const originalBody = r.receiver.requests[0]!.body;

    // The replay's first attempt fails; an event published right after the replay waits for it.
    let replays = 0;
    r.setVerdict((a) => (a.replay && replays++ === 0 ? FAIL : OK));
    const list = await tenant.call('GET', `/v1/deliveries?eventId=${e1}`);
    const replay = await tenant.call('POST', `/v1/deliveries/${list.body.data[0].id}/replay`, { body: { reason: 'receiver lost it' } });
    expect(replay.status, replay.text).toBe(202);
    const e4 = (await publishPerMessage(tenant, ['rp'], ['r.4'], 'late')).get('rp')![0];
    await eventually(async () => r.delivered().size === 4, 'the fourth event delivered');

    expect(lineOf(r, 'rp')).toEqual([
      [e1, true, false],
      [e2, true, false],
      [e3, true, false],
      [e1, false, true],
      [e1, true, true],
      [e4, true, false],
    ]);
    // As-is: the same webhook-id and the same bytes as the original delivery.
    const replayed = r.receiver.requests.filter((q) => q.headers['webhook-replay'] === 'true');
    expect(replayed.map((q) => q.headers['webhook-id'])).toEqual([e1, e1]);
    expect(replayed.every((q) => q.body === originalBody)).toBe(true);
  });

  it('a bulk replay of a message’s dead deliveries delivers them in their original order', async () => {
    const tenant = await t.createTenant();
    const r = await receiver();
    r.setVerdict(() => FAIL);
    const endpointId = await orderedEndpoint(tenant, r.url, { retryPolicy: { maxAttempts: 1 } });
    const expected = await publishPerMessage(tenant, ['bulk'], ['b.1', 'b.2', 'b.3']);
    // Each goes dead after its one attempt, which releases the next: all three end dead.
    await eventually(async () => (await statusCounts(t, endpointId)).dead === 3, 'three dead deliveries');
    expect(r.arrivals.map((a) => a.eventId)).toEqual(expected.get('bulk'));

    // The receiver recovers, except that the first replayed attempt fails: the rest must wait.
    const patched = await tenant.call('PATCH', `/v1/endpoints/${endpointId}`, { body: { retryPolicy: { maxAttempts: 3, baseDelayMs: 100, maxDelayMs: 100 } } });
    expect(patched.status, patched.text).toBe(200);
    let replays = 0;
    r.setVerdict((a) => (a.replay && replays++ === 0 ? FAIL : OK));
    const bulk = await tenant.call('POST', '/v1/replays', { body: { filter: { status: 'dead', endpointId }, reason: 'receiver back' } });
    expect(bulk.status, bulk.text).toBe(202);
    expect(bulk.body.count).toBe(3);
    await eventually(async () => r.delivered().size === 3, 'all three replayed');

    const [b1, b2, b3] = expected.get('bulk')!;
    expect(lineOf(r, 'bulk').slice(3)).toEqual([
      [b1, false, true],
      [b1, true, true],
      [b2, true, true],
      [b3, true, true],
    ]);
  });
});
