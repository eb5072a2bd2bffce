// A message's status only moves forward, also when its callbacks race each other: two final
// statuses at the same instant never both win, a late lower status never wins, and what an ordered
// endpoint receives of one message never goes backwards either.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { idOfUuid } from '../../src/domain/ids.js';
import { messageStatus } from '../../src/domain/message-status.js';
import { statusCounts } from '../helpers/dispatch.js';
import { postCallback, readMetrics, receiptsDelta, sign } from '../helpers/intake.js';
import { messageIds, startMessageReceiver, type MessageReceiver } from '../helpers/ordering.js';
import { eventually, startTestPlatform, type TestPlatform, type TestTenant } from '../helpers/platform.js';
import { communication } from '../helpers/providers.js';

const rank = (status: string) => messageStatus(status)!.rank;

let t: TestPlatform;
const receivers: MessageReceiver[] = [];

beforeAll(async () => {
  t = await startTestPlatform();
});
afterAll(async () => {
  for (const r of receivers) await r.close();
  await t.stop();
});

interface Setup {
  tenant: TestTenant;
  sourceId: string;
  endpointId: string;
  r: MessageReceiver;
  callback(messageId: string, status: string): ReturnType<typeof postCallback>;
  /** Status per event id of this source (the receiver sees event ids). */
  statusOfEvents(): Promise<Map<string, string>>;
}

/** A tenant of its own per test: a momo-communication source and one endpoint with a receiver. */
async function setup(ordering: 'none' | 'per-message'): Promise<Setup> {
  const tenant = await t.createTenant();
  const src = await tenant.call('POST', '/v1/sources', { body: { type: 'momo-communication', name: 'sms' } });
  expect(src.status).toBe(201);
  const r = await startMessageReceiver(() => 2);
  receivers.push(r);
  const ep = await tenant.call('POST', '/v1/endpoints', { body: { url: r.url, ordering, maxConcurrency: 16 } });
  expect(ep.status).toBe(201);
  const sourceId = src.body.id as string;
  return {
    tenant,
    sourceId,
    endpointId: ep.body.id as string,
    r,
    callback: (messageId, status) => postCallback(t, sourceId, sign.communication(src.body.secret, communication.messageStatus(messageId, status))),
    statusOfEvents: async () => {
      const rows: Array<{ id: string; status: string }> = await t.platform.db('events').where({ source_id: sourceId }).select('id', 'status');
      // Stored as the uuid the TypeID encodes; the receiver sees the TypeID.
      return new Map(rows.map((row) => [idOfUuid('event', row.id), row.status]));
    },
  };
}

describe('concurrent final statuses', () => {
  it('delivered, failed and undelivered at the same instant: exactly one wins, the others are stale and go nowhere', async () => {
    const { tenant, endpointId, r, callback, statusOfEvents } = await setup('none');
    const fresh = messageIds('fresh', 20); // the race also creates the message row
    const known = messageIds('known', 20); // the race updates an existing row (status `sent`)
    for (const m of known) expect((await callback(m, 'sent')).body.status).toBe('accepted');
    const before = await readMetrics(t.url);

    const results = await Promise.all(
      [...fresh, ...known].map(async (m) => {
        const answers = await Promise.all(['delivered', 'failed', 'undelivered'].map((s) => callback(m, s)));
        for (const a of answers) expect(a.status, a.text).toBe(200);
        return { m, answers: answers.map((a, i) => ({ status: ['delivered', 'failed', 'undelivered'][i]!, outcome: a.body.status as string, eventId: a.body.eventId as string })) };
      }),
    );

    const timelines = await Promise.all(results.map(({ m }) => tenant.call('GET', `/v1/messages/${m}`)));
    for (const [i, { m, answers }] of results.entries()) {
      const winners = answers.filter((a) => a.outcome === 'accepted');
      expect(winners, m).toHaveLength(1);
      expect(answers.filter((a) => a.outcome === 'stale'), m).toHaveLength(2);
      const timeline = timelines[i]!;
      expect(timeline.status).toBe(200);
      expect({ status: timeline.body.status, final: timeline.body.final }).toEqual({ status: winners[0]!.status, final: true });
      // Stale events are kept as evidence with no deliveries; the winner has exactly one.
      for (const a of answers) {
        const event = timeline.body.events.find((e: { id: string }) => e.id === a.eventId);
        expect({ stale: event.stale, deliveries: event.deliveries.length }).toEqual(a.outcome === 'accepted' ? { stale: false, deliveries: 1 } : { stale: true, deliveries: 0 });
      }
    }
    const after = await readMetrics(t.url);
    expect(receiptsDelta(before, after, 'momo-communication', 'stale')).toBe(80);
    expect(receiptsDelta(before, after, 'momo-communication', 'accepted')).toBe(40);

    // The endpoint gets `sent` for the known ones and one final status per message, nothing else.
    await eventually(async () => (await statusCounts(t, endpointId)).succeeded === 60, '60 deliveries succeeded');
    expect(r.arrivals).toHaveLength(60);
    const statuses = await statusOfEvents();
    const finals = r.arrivals.filter((a) => statuses.get(a.eventId) !== 'sent');
    expect(finals.map((a) => a.messageId).sort()).toEqual([...fresh, ...known].sort());
  });
});

describe('racing statuses never move a message backwards', () => {
  it('accepted, sent and delivered at once: the rank only grows, delivered always wins, an ordered endpoint sees it grow', async () => {
    const { sourceId, endpointId, r, callback, statusOfEvents } = await setup('per-message');
    const ids = messageIds('race', 100);
    const index = new Map(ids.map((m, i) => [m, i]));

    // Watch every message's rank while the callbacks race: no observation may be lower than the last.
    const seen = new Map<string, number>();
    const backwards: string[] = [];
    let watching = true;
    const watcher = (async () => {
      while (watching) {
        const rows: Array<{ message_id: string; status_rank: number }> = await t.platform.db('messages').where({ source_id: sourceId }).whereIn('message_id', ids).select('message_id', 'status_rank');
        for (const row of rows) {
          if (row.status_rank < (seen.get(row.message_id) ?? 0)) backwards.push(`${row.message_id}: ${seen.get(row.message_id)} -> ${row.status_rank}`);
          seen.set(row.message_id, row.status_rank);
        }
      }
    })();

    // Per message the three callbacks leave together, in a rotating order.
    const orders = [['accepted', 'sent', 'delivered'], ['delivered', 'sent', 'accepted'], ['sent', 'accepted', 'delivered']];
    const results = await Promise.all(
      ids.map(async (m) => {
        const order = orders[index.get(m)! % orders.length]!;
        const answers = await Promise.all(order.map((s) => callback(m, s)));
        return order.map((s, i) => ({ status: s, outcome: answers[i]!.body.status as string }));
      }),
    );
    watching = false;
    await watcher;
    expect(backwards).toEqual([]);

    let forwarded = 0;
    for (const [i, answers] of results.entries()) {
      expect(answers.find((a) => a.status === 'delivered')!.outcome, ids[i]).toBe('accepted');
      for (const a of answers) expect(['accepted', 'stale']).toContain(a.outcome);
      forwarded += answers.filter((a) => a.outcome === 'accepted').length;
    }
    const final: Array<{ status: string }> = await t.platform.db('messages').where({ source_id: sourceId }).whereIn('message_id', ids).select('status');
    expect(final.map((f) => f.status)).toEqual(ids.map(() => 'delivered'));

    // What the ordered endpoint received of each message grows in rank, arrival after arrival.
    await eventually(async () => (await statusCounts(t, endpointId)).succeeded === forwarded, 'every accepted status delivered', 20_000);
    const statuses = await statusOfEvents();
    for (const m of ids) {
      const ranks = r.arrivals.filter((a) => a.messageId === m).map((a) => rank(statuses.get(a.eventId)!));
      expect(ranks, m).toEqual([...ranks].sort((a, b) => a - b));
      expect(new Set(ranks).size, m).toBe(ranks.length);
      expect(ranks.at(-1), m).toBe(3);
    }
  });
});
