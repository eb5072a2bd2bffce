import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { uuidOf } from '../../src/domain/ids.js';
import type { SourceType } from '../../src/domain/sources.js';
import {
  ACK_COUNT,
  createEndpoint,
  createSource,
  expectOutcome,
  postCallback,
  readMetrics,
  RECEIPTS,
  receiptsDelta,
  rowsOfEvent,
  sampleOf,
  sign,
  storedFor,
  sumOf,
  type Callback,
  type TestSource,
} from '../helpers/intake.js';
import { eventually, startTestPlatform, type TestPlatform, type TestTenant } from '../helpers/platform.js';
import { automation, communication } from '../helpers/providers.js';

/**
 * One logical event, however many times and however concurrently its callback arrives; message
 * statuses that would move backwards are kept as `stale` and forwarded to nobody.
 * Role `api`: no dispatcher, so the deliveries seen are exactly what intake committed.
 */

let t: TestPlatform;
let tenant: TestTenant;
let all: string;
let messages: string;
let orders: string;
const sources = {} as Record<SourceType, TestSource>;

beforeAll(async () => {
  t = await startTestPlatform({ role: 'api' });
  tenant = await t.createTenant('dedupe');
  all = await createEndpoint(tenant, 'http://127.0.0.1:9/all');
  messages = await createEndpoint(tenant, 'http://127.0.0.1:9/messages', ['message.*']);
  orders = await createEndpoint(tenant, 'http://127.0.0.1:9/orders', ['order.*']);
  for (const type of ['momo-communication', 'momo-automation', 'standard-webhooks'] as const) sources[type] = await createSource(tenant, type);
});
afterAll(async () => {
  await t?.stop();
});

const byEndpoint = (ids: string[]) => ids.sort().map((endpoint_id) => ({ endpoint_id, status: 'pending', dead_reason: null }));

/** Sends every callback at once over real HTTP (separate connections race into the database). */
async function concurrently(sourceId: string, callbacks: Callback[]) {
  const responses = await Promise.all(callbacks.map((cb) => postCallback(t, sourceId, cb)));
  for (const res of responses) expect(res.status, res.text).toBe(200);
  return responses.map((res) => res.body as { status: string; receiptId: string; eventId: string });
}

function expectOneEvent(results: Array<{ status: string; eventId: string; receiptId: string }>) {
  const eventIds = new Set(results.map((r) => r.eventId));
  expect(eventIds.size).toBe(1);
  expect(results.filter((r) => r.status === 'accepted')).toHaveLength(1);
  expect(results.filter((r) => r.status === 'duplicate')).toHaveLength(results.length - 1);
  expect(new Set(results.map((r) => r.receiptId)).size).toBe(results.length);
  return [...eventIds][0]!;
}

describe('20 concurrent copies of one callback', () => {
  const cases: Array<{ type: SourceType; copy: (secret: string) => Callback; endpoints: () => string[] }> = [
    {
      type: 'momo-communication',
      copy: (secret) => sign.communication(secret, communication.messageStatus(`m-${randomUUID()}`, 'delivered')),
      endpoints: () => [all, messages],
    },
    { type: 'momo-automation', copy: (secret) => sign.automation(secret, automation.body(randomUUID())), endpoints: () => [all, orders] },
    {
      type: 'standard-webhooks',
      copy: (secret) => sign.standard(secret, JSON.stringify({ type: 'order.shipped', data: { order: randomUUID() } })),
      endpoints: () => [all, orders],
    },
  ];

  it.each(cases)('$type: 1 event, 20 receipts (1 accepted, 19 duplicate), 1 delivery per endpoint', async ({ type, copy, endpoints }) => {
    const source = sources[type];
    const before = await storedFor(t.platform.db, source.id);
    const cb = copy(source.secret);
    const results = await concurrently(source.id, Array.from({ length: 20 }, () => cb));
    const eventId = expectOneEvent(results);

    const rows = await rowsOfEvent(t.platform.db, eventId);
    expect(rows.receipts).toHaveLength(20);
    expect(rows.receipts.filter((r) => r.outcome === 'accepted')).toHaveLength(1);
    expect(rows.receipts.filter((r) => r.outcome === 'duplicate')).toHaveLength(19);
    expect(new Set(rows.receipts.map((r) => r.id))).toEqual(new Set(results.map((r) => r.receiptId)));
    expect(rows.deliveries).toEqual(byEndpoint(endpoints()));
    const after = await storedFor(t.platform.db, source.id);
    expect(after.events - before.events).toBe(1);
    expect(after.receipts - before.receipts).toBe(20);
    expect(after.deliveries - before.deliveries).toBe(endpoints().length);
  });

  it('momo-communication: 20 concurrent copies each with its own callback timestamp are still 1 event', async () => {
    // Not byte-identical, so every copy goes through the (resource, transition) key under contention.
    const source = sources['momo-communication'];
    const messageId = `m-${randomUUID()}`;
    const base = Date.parse('2026-11-29T10:00:00Z');
    const callbacks = Array.from({ length: 20 }, (_, i) =>
      sign.communication(source.secret, communication.messageStatus(messageId, 'sent', new Date(base + i * 1000).toISOString())),
    );
    const eventId = expectOneEvent(await concurrently(source.id, callbacks));
    const rows = await rowsOfEvent(t.platform.db, eventId);
    expect(rows.receipts).toHaveLength(20);
    expect(rows.deliveries).toEqual(byEndpoint([all, messages]));
  });
});

describe('repeats that are not byte-identical', () => {
  it('momo-communication: the same message status with a new callback timestamp is a duplicate of the original', async () => {
    const source = sources['momo-communication'];
    const messageId = `m-${randomUUID()}`;
    const first = sign.communication(source.secret, communication.messageStatus(messageId, 'delivered', '2026-11-29T10:00:00Z'));
    const again = sign.communication(source.secret, communication.messageStatus(messageId, 'delivered', '2026-11-29T10:05:00Z'));
    const { eventId } = expectOutcome(await postCallback(t, source.id, first), 'accepted');
    const repeat = expectOutcome(await postCallback(t, source.id, again), 'duplicate');
    expect(repeat.eventId).toBe(eventId);

    const rows = await rowsOfEvent(t.platform.db, eventId);
    expect(rows.receipts.map((r) => r.outcome)).toEqual(['accepted', 'duplicate']);
    expect(rows.deliveries).toEqual(byEndpoint([all, messages]));
    // A different status of the same message is a different event.
    const sent = sign.communication(source.secret, communication.messageStatus(`m-${randomUUID()}`, 'sent'));
    expect(expectOutcome(await postCallback(t, source.id, sent), 'accepted').eventId).not.toBe(eventId);
  });

  it('momo-automation: a retry signed at a new time is a duplicate; the same event id under another subscription is not', async () => {
    const source = sources['momo-automation'];
    const id = randomUUID();
    const body = automation.body(id, 'order.created', 'sub_1');
    const { eventId } = expectOutcome(await postCallback(t, source.id, sign.automation(source.secret, body)), 'accepted');
    const retry = sign.automation(source.secret, body, Math.floor(Date.now() / 1000) - 60);
    expect(expectOutcome(await postCallback(t, source.id, retry), 'duplicate').eventId).toBe(eventId);
    // Same id with a re-encoded body (other key order): still the (subscription, id) inbox key.
    const reordered = JSON.stringify(Object.fromEntries(Object.entries(JSON.parse(body) as object).reverse()));
    expect(expectOutcome(await postCallback(t, source.id, sign.automation(source.secret, reordered)), 'duplicate').eventId).toBe(eventId);

    const other = sign.automation(source.secret, automation.body(id, 'order.created', 'sub_2'));
    expect(expectOutcome(await postCallback(t, source.id, other), 'accepted').eventId).not.toBe(eventId);
  });

  it('standard-webhooks: the same webhook-id resent later is a duplicate; another webhook-id with the same body is a new event', async () => {
    const source = sources['standard-webhooks'];
    const body = JSON.stringify({ type: 'order.ping', data: {} });
    const id = `msg_${randomUUID()}`;
    const { eventId } = expectOutcome(await postCallback(t, source.id, sign.standard(source.secret, body, id)), 'accepted');
    const resent = sign.standard(source.secret, body, id, Math.floor(Date.now() / 1000) - 120);
    expect(expectOutcome(await postCallback(t, source.id, resent), 'duplicate').eventId).toBe(eventId);

    // webhook-id is the identity: two messages may carry identical bytes and still be two events.
    const second = expectOutcome(await postCallback(t, source.id, sign.standard(source.secret, body, `msg_${randomUUID()}`)), 'accepted');
    expect(second.eventId).not.toBe(eventId);
    expect((await rowsOfEvent(t.platform.db, second.eventId)).deliveries).toEqual(byEndpoint([all, orders]));
  });
});

describe('message status order', () => {
  it('statuses arriving in reverse order: the first is accepted, the older ones are stale and go nowhere', async () => {
    const source = sources['momo-communication'];
    const messageId = `m-${randomUUID()}`;
    const results: Record<string, { receiptId: string; eventId: string }> = {};
    for (const [status, outcome] of [['delivered', 'accepted'], ['sent', 'stale'], ['accepted', 'stale']] as const) {
      const res = await postCallback(t, source.id, sign.communication(source.secret, communication.messageStatus(messageId, status)));
      results[status] = expectOutcome(res, outcome);
    }

    expect((await rowsOfEvent(t.platform.db, results.delivered!.eventId)).deliveries).toEqual(byEndpoint([all, messages]));
    for (const status of ['sent', 'accepted']) {
      const rows = await rowsOfEvent(t.platform.db, results[status]!.eventId);
      expect(rows.event).toMatchObject({ status, stale: true });
      expect(rows.receipts).toEqual([{ id: results[status]!.receiptId, outcome: 'stale' }]);
      expect(rows.deliveries).toEqual([]);
    }
    const row = await t.platform.db('messages').where({ source_id: source.id, message_id: messageId }).first('status', 'status_final');
    expect(row).toEqual({ status: 'delivered', status_final: true });

    // A stale status sent again is a duplicate of the stale event, still with no work.
    const again = await postCallback(t, source.id, sign.communication(source.secret, communication.messageStatus(messageId, 'sent', '2030-01-01T00:00:00Z')));
    expect(expectOutcome(again, 'duplicate').eventId).toBe(results.sent!.eventId);

    const timeline = await tenant.call('GET', `/v1/messages/${encodeURIComponent(messageId)}`);
    expect(timeline.status).toBe(200);
    expect(timeline.body).toMatchObject({ messageId, status: 'delivered', final: true });
    const events = timeline.body.events as Array<{ id: string; status: string; stale: boolean; receipts: { count: number }; deliveries: unknown[] }>;
    expect(events.map((e) => [e.id, e.status, e.stale, e.receipts.count, e.deliveries.length])).toEqual([
      [results.delivered!.eventId, 'delivered', false, 1, 2],
      [results.sent!.eventId, 'sent', true, 2, 0],
      [results.accepted!.eventId, 'accepted', true, 1, 0],
    ]);
  });

  it('statuses in order all advance the message', async () => {
    const source = sources['momo-communication'];
    const messageId = `m-${randomUUID()}`;
    for (const status of ['accepted', 'sent', 'delivered']) {
      const res = await postCallback(t, source.id, sign.communication(source.secret, communication.messageStatus(messageId, status)));
      const { eventId } = expectOutcome(res, 'accepted');
      expect((await rowsOfEvent(t.platform.db, eventId)).deliveries).toHaveLength(2);
      expect(await t.platform.db('messages').where({ source_id: source.id, message_id: messageId }).first('status')).toEqual({ status });
    }
  });

  it('two final statuses of one message at the same instant: exactly one wins, the other is stale (20 races)', async () => {
    const source = sources['momo-communication'];
    const rounds = Array.from({ length: 20 }, (_, i) => ({ messageId: `race-${i}-${randomUUID()}`, startAt: i % 2 === 0 ? undefined : 'sent' }));
    await Promise.all(
      rounds.map(async ({ messageId, startAt }) => {
        // Half the rounds race on a new message (insert conflict), half on an existing row (update conflict).
        if (startAt) expectOutcome(await postCallback(t, source.id, sign.communication(source.secret, communication.messageStatus(messageId, startAt))), 'accepted');
        const [a, b] = await Promise.all(
          ['delivered', 'failed'].map((status) => postCallback(t, source.id, sign.communication(source.secret, communication.messageStatus(messageId, status)))),
        );
        const outcomes = [a!, b!].map((res) => {
          expect(res.status, res.text).toBe(200);
          return res.body as { status: string; eventId: string };
        });
        expect(outcomes.map((o) => o.status).sort()).toEqual(['accepted', 'stale']);
        const winner = outcomes[0]!.status === 'accepted' ? 0 : 1;
        const winnerStatus = ['delivered', 'failed'][winner];
        const message = await t.platform.db('messages').where({ source_id: source.id, message_id: messageId }).first('status', 'last_event_id');
        // The message names its last event by the uuid the TypeID encodes.
        expect(message).toEqual({ status: winnerStatus, last_event_id: uuidOf('event', outcomes[winner]!.eventId) });
        expect((await rowsOfEvent(t.platform.db, outcomes[winner]!.eventId)).deliveries).toHaveLength(2);
        const loser = await rowsOfEvent(t.platform.db, outcomes[1 - winner]!.eventId);
        expect(loser.deliveries).toEqual([]);
        expect(loser.event.stale).toBe(true);
      }),
    );
  });
});

describe('metrics', () => {
  it('counts every callback by source type and outcome, and times each answer', async () => {
    const before = await readMetrics(t.url);
    const sent: Array<[SourceType, string]> = [];
    const send = async (type: SourceType, cb: Callback, outcome: string, status: number) => {
      const res = await postCallback(t, sources[type].id, cb);
      expect(res.status, res.text).toBe(status);
      if (status === 200) expect(res.body.status).toBe(outcome);
      sent.push([type, outcome]);
    };

    const comm = sources['momo-communication'];
    const messageId = `m-${randomUUID()}`;
    const delivered = sign.communication(comm.secret, communication.messageStatus(messageId, 'delivered'));
    await send('momo-communication', delivered, 'accepted', 200);
    await send('momo-communication', delivered, 'duplicate', 200);
    await send('momo-communication', sign.communication(comm.secret, communication.messageStatus(messageId, 'sent')), 'stale', 200);
    await send('momo-communication', sign.communication(comm.secret, communication.messageStatus(messageId, 'accepted')), 'stale', 200);
    await send('momo-communication', { ...delivered, headers: { 'x-signature': 'f'.repeat(64) } }, 'rejected_signature', 401);
    await send('momo-communication', sign.communication(comm.secret, '{"event":'), 'rejected_malformed', 400);

    const auto = sources['momo-automation'];
    const order = sign.automation(auto.secret, automation.body(randomUUID()));
    await send('momo-automation', order, 'accepted', 200);
    await send('momo-automation', order, 'duplicate', 200);
    await send('momo-automation', sign.automation(auto.secret, automation.body(randomUUID()), Math.floor(Date.now() / 1000) - 3600), 'rejected_signature', 401);
    await send('momo-automation', { ...order, headers: {} }, 'rejected_signature', 401);
    await send('momo-automation', sign.automation(auto.secret, JSON.stringify({ id: randomUUID() })), 'rejected_malformed', 400);
    // The default limit is 1 MiB: one byte more is refused before anything is verified.
    const huge = `{"pad":"${'x'.repeat(1024 * 1024 - 9)}"}`;
    expect(Buffer.byteLength(huge)).toBe(1024 * 1024 + 1);
    await send('momo-automation', sign.automation(auto.secret, huge), 'rejected_malformed', 413);

    const std = sources['standard-webhooks'];
    const shipped = sign.standard(std.secret, JSON.stringify({ type: 'order.shipped', data: {} }));
    await send('standard-webhooks', shipped, 'accepted', 200);
    await send('standard-webhooks', shipped, 'duplicate', 200);
    await send('standard-webhooks', { ...shipped, rawBody: `${String(shipped.rawBody)} ` }, 'rejected_signature', 401);
    await send('standard-webhooks', sign.standard(std.secret, 'not json'), 'rejected_malformed', 400);

    // An unknown source is nobody's receipt: it must not show up under any source type.
    expect((await postCallback(t, 'src_00000000000000000000000000', delivered)).status).toBe(404);

    // The counters move when the response has finished, so wait for the histogram to catch up.
    const after = await eventually(async () => {
      const now = await readMetrics(t.url);
      return sumOf(now, ACK_COUNT) - sumOf(before, ACK_COUNT) >= sent.length && now;
    }, 'every callback timed');
    const expected = new Map<string, number>();
    for (const [type, outcome] of sent) expected.set(`${type}/${outcome}`, (expected.get(`${type}/${outcome}`) ?? 0) + 1);
    for (const type of ['momo-communication', 'momo-automation', 'standard-webhooks'] as const) {
      for (const outcome of ['accepted', 'duplicate', 'stale', 'rejected_signature', 'rejected_malformed', 'unavailable']) {
        expect(receiptsDelta(before, after, type, outcome), `${type} ${outcome}`).toBe(expected.get(`${type}/${outcome}`) ?? 0);
        const labels = { source_type: type, outcome };
        expect(sampleOf(after, ACK_COUNT, labels) - sampleOf(before, ACK_COUNT, labels), `ack ${type} ${outcome}`).toBe(expected.get(`${type}/${outcome}`) ?? 0);
      }
    }
    expect(sumOf(after, RECEIPTS) - sumOf(before, RECEIPTS)).toBe(sent.length);
    expect(sumOf(after, ACK_COUNT) - sumOf(before, ACK_COUNT)).toBe(sent.length);
  });
});
