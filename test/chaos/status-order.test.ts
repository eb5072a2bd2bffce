// Statuses of 100 messages (accepted, sent, delivered) arrive in random order, 50 at a time, the
// way a provider without ordering guarantees sends them. A message's status may only move forward;
// a status older than what the message already reached is stale: recorded, forwarded to nobody.
// One endpoint takes everything unordered, another asks for per-message order.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { idOfUuid, uuidOf } from '../../src/domain/ids.js';
import { allSettled, countRows, mapConcurrent, measured, seededRandom, shuffle } from '../helpers/chaos.js';
import { request } from '../helpers/http.js';
import { createSource } from '../helpers/intake.js';
import { expectNoViolations, metricsOf } from '../helpers/invariants.js';
import { eventually, startTestPlatform, type TestPlatform } from '../helpers/platform.js';
import { communication } from '../helpers/providers.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';

const MESSAGES = 100;
const STATUSES = ['accepted', 'sent', 'delivered'] as const;
const rank = (s: string) => STATUSES.indexOf(s as (typeof STATUSES)[number]) + 1;

interface Sent {
  messageId: string;
  status: string;
  startedAt: number;
  answeredAt: number;
  outcome: 'accepted' | 'stale' | 'duplicate';
  eventId: string;
}

describe('message statuses in random order', () => {
  let t: TestPlatform;
  let unordered: Receiver;
  let ordered: Receiver;

  beforeAll(async () => {
    t = await startTestPlatform();
    unordered = await startReceiver();
    ordered = await startReceiver();
  });
  afterAll(async () => {
    await unordered?.close();
    await ordered?.close();
    await t?.stop();
  });

  it('no status moves backwards and no stale status is forwarded', { timeout: 90_000 }, async () => {
    const tenant = await t.createTenant();
    const source = await createSource(tenant, 'momo-communication');
    for (const [r, ordering] of [[unordered, 'none'], [ordered, 'per-message']] as const) {
      const res = await tenant.call('POST', '/v1/endpoints', { body: { url: `${r.url}/hook`, ordering } });
      expect(res.status, res.text).toBe(201);
    }
    const run = `m-${Date.now().toString(36)}`;
    const callbacks = shuffle(
      Array.from({ length: MESSAGES }, (_, m) => STATUSES.map((status) => ({ messageId: `${run}-${m}`, status }))).flat(),
      seededRandom('status-order'),
    );
    const sent: Sent[] = await mapConcurrent(callbacks, 50, async ({ messageId, status }) => {
      const body = communication.messageStatus(messageId, status);
      const startedAt = Date.now();
      const res = await request(t.url, 'POST', `/inbound/${source.id}`, { rawBody: body, headers: communication.headers(source.secret, body) });
      expect(res.status, res.text).toBe(200);
      return { messageId, status, startedAt, answeredAt: Date.now(), outcome: res.body.status, eventId: res.body.eventId };
    });

    // Every callback is a distinct transition: accepted or stale, never a duplicate.
    expect(sent.filter((s) => s.outcome === 'duplicate')).toEqual([]);
    const stale = sent.filter((s) => s.outcome === 'stale');
    const forwarded = sent.filter((s) => s.outcome === 'accepted');
    // Linearizable forward-only: once a higher status was acknowledged as accepted, a lower one
    // sent afterwards can only be stale.
    const backwards = sent.filter((y) =>
      y.outcome === 'accepted' && sent.some((x) => x.messageId === y.messageId && x.outcome === 'accepted' && rank(x.status) > rank(y.status) && x.answeredAt < y.startedAt),
    );
    expect(backwards).toEqual([]);

    // Each message ends at the highest status it was sent, pointing at that event (stored as its
    // uuid, named here by the TypeID the intake answered with).
    type MessageRow = { message_id: string; status: string; status_rank: number; last_event_id: string };
    const messages: MessageRow[] = (
      await t.platform.db('messages').where({ source_id: source.id }).select('message_id', 'status', 'status_rank', 'last_event_id')
    ).map((m: MessageRow) => ({ ...m, last_event_id: idOfUuid('event', m.last_event_id) }));
    expect(messages).toHaveLength(MESSAGES);
    const deliveredEvent = new Map(sent.filter((s) => s.status === 'delivered').map((s) => [s.messageId, s.eventId]));
    for (const m of messages) expect(m).toEqual({ message_id: m.message_id, status: 'delivered', status_rank: 3, last_event_id: deliveredEvent.get(m.message_id) });
    // Stale events are stored as evidence, flagged, with no delivery at all.
    expect(await countRows(t.platform.db, 'events', { stale: true })).toBe(stale.length);
    const staleIds = new Set(stale.map((s) => s.eventId));

    await eventually(() => allSettled(t.platform.db, forwarded.length * 2), 'every forwarded status delivered to both endpoints', 60_000, 100);
    for (const r of [unordered, ordered]) {
      expect(r.requests.filter((req) => staleIds.has(String(req.headers['webhook-id'])))).toEqual([]);
      expect(r.eventIds()).toEqual(new Set(forwarded.map((s) => s.eventId)));
    }
    // The per-message endpoint saw each message's statuses in increasing order.
    const seen = new Map<string, number[]>();
    for (const req of ordered.requests) {
      const { messageId, data } = JSON.parse(req.body) as { messageId: string; data: { status: string } };
      const ranks = seen.get(messageId) ?? [];
      if (!ranks.includes(rank(data.status))) ranks.push(rank(data.status));
      seen.set(messageId, ranks);
    }
    const outOfOrder = [...seen].filter(([, ranks]) => ranks.some((r, i) => i > 0 && r <= ranks[i - 1]!));
    expect(outOfOrder).toEqual([]);

    // An endpoint registered afterwards is owed none of it (deliveries are made when an event is
    // accepted), only what comes after it.
    const late = await tenant.call('POST', '/v1/endpoints', { body: { url: `${ordered.url}/late` } });
    expect(late.status, late.text).toBe(201);
    expect(await countRows(t.platform.db, 'deliveries', { endpoint_id: uuidOf('endpoint', late.body.id) })).toBe(0);
    const after = communication.messageStatus(`${run}-after`, 'accepted');
    const res = await request(t.url, 'POST', `/inbound/${source.id}`, { rawBody: after, headers: communication.headers(source.secret, after) });
    expect(res.body.status).toBe('accepted');
    await eventually(() => allSettled(t.platform.db, forwarded.length * 2 + 3), 'the later event delivered to all three endpoints', 30_000, 100);
    expect(ordered.requests.filter((r) => r.path === '/late').map((r) => r.headers['webhook-id'])).toEqual([res.body.eventId]);

    const stats = await expectNoViolations({ db: t.platform.db, receivers: [unordered, ordered], metricsText: [await metricsOf(t.url)] });
    measured('status-order', { callbacks: sent.length, forwarded: forwarded.length, stale: stale.length, deliveries: stats.deliveries, redeliveries: stats.redeliveries });
  });
});
