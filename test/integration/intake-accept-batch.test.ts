import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { idOfUuid, newId, uuidOf } from '../../src/domain/ids.js';
import { createEndpoint, createSource, type TestSource } from '../helpers/intake.js';
import { startTestPlatform, type TestPlatform, type TestTenant } from '../helpers/platform.js';
import { reportPlans } from '../helpers/plans.js';

/**
 * The accept statement, called as the api process calls it (a JSON batch), straight on a session of
 * its own: what one batch decides and writes, and how its statements are planned.
 *
 * The intake statements are planned once per connection, not once per callback: PostgreSQL's own
 * plan log (auto_explain, sent to this session as notices) shows every plan that ran inside them,
 * and a plan made for one call names that call's values where a reusable one names `$1`. Without
 * migration 20261202000026 the foreign-key checks into `events` and the fan-out look-up show the
 * event and tenant they were planned for.
 */

let t: TestPlatform;
let tenant: TestTenant;
let source: TestSource;
let session: pg.Client;
const plans: string[] = [];

beforeAll(async () => {
  t = await startTestPlatform({ role: 'api' });
  tenant = await t.createTenant('plans');
  await createEndpoint(tenant, 'http://127.0.0.1:9/a');
  await createEndpoint(tenant, 'http://127.0.0.1:9/b');
  source = await createSource(tenant, 'momo-automation');
  session = new pg.Client({ connectionString: t.database.url });
  await session.connect();
  await reportPlans(session, plans);
});
afterAll(async () => {
  await session?.end();
  await t?.stop();
});

/** A new delivery id as the intake and publish functions take it: the uuid its TypeID encodes. */
const deliveryId = () => uuidOf('delivery', newId('delivery'));
/** The tenant as the intake and publish functions take it and its rows store it: its uuid. */
const tenantKey = () => uuidOf('tenant', tenant.id);
/** An event as its rows store it, and as the intake and publish functions take and return it: its uuid. */
const eventKey = (id: string) => uuidOf('event', id);
/** An event id read from a row, named by its TypeID as the test made it. */
const eventOf = (uuid: string | null) => (uuid === null ? null : idOfUuid('event', uuid));

function acceptItem(n: number, eventId: string, overrides: Record<string, unknown> = {}) {
  return {
    receiptId: newId('receipt'), eventId: eventKey(eventId), envelopeId: eventId, deliveryIds: [deliveryId(), deliveryId()],
    tenantId: tenantKey(), sourceId: source.id, origin: 'callback', bodyDigest: `digest-${n}`, receivedAt: new Date(),
    type: 'order.created', messageId: `ord_${n}`, dedupeKey: `key-${n}`, status: null, statusRank: null, statusFinal: null,
    sequence: null, data: JSON.stringify({ n }), ...overrides,
  };
}

describe('one batch', () => {
  it('is decided callback by callback in order, and written at the end: repeats, key duplicates, stale statuses and too few ids', async () => {
    const [a, b, c, d, e] = Array.from({ length: 5 }, () => newId('event'));
    const status = (value: string, rank: number, final = false) => ({ messageId: 'msg_batch', status: value, statusRank: rank, statusFinal: final });
    const batch = [
      acceptItem(100, a!),
      acceptItem(100, newId('event')), // byte for byte the first: same digest, same key
      acceptItem(101, newId('event'), { dedupeKey: 'key-100' }), // another body, the first's key
      // As release 0.3.0's api gives it during a deploy: the whole envelope, stored as sent.
      acceptItem(102, b!, { ...status('sent', 2), data: undefined, body: `{ "id": "${b!}", "data": {"n": 102} }` }),
      acceptItem(103, c!, status('accepted', 1)), // lower than what the message reached one callback earlier
      acceptItem(104, d!, { deliveryIds: [deliveryId()] }), // two endpoints, one id
      acceptItem(105, e!, status('delivered', 3, true)),
    ];
    const { rows } = await session.query('SELECT * FROM intake_accept_many($1::jsonb, 86400)', [JSON.stringify(batch)]);
    expect(rows.map((r) => ({ ...r, event_id: eventOf(r.event_id) }))).toEqual([
      { outcome: 'accepted', event_id: a, endpoint_count: 2, pending: 2, dead_disabled: 0 },
      // Both copies meet the first on its key (its receipt, which the byte-identical check reads, is
      // written with the batch's), so both had their endpoints looked up.
      { outcome: 'duplicate', event_id: a, endpoint_count: 2, pending: 0, dead_disabled: 0 },
      { outcome: 'duplicate', event_id: a, endpoint_count: 2, pending: 0, dead_disabled: 0 },
      { outcome: 'accepted', event_id: b, endpoint_count: 2, pending: 2, dead_disabled: 0 },
      { outcome: 'stale', event_id: c, endpoint_count: 2, pending: 0, dead_disabled: 0 },
      { outcome: 'need_ids', event_id: null, endpoint_count: 2, pending: 0, dead_disabled: 0 },
      { outcome: 'accepted', event_id: e, endpoint_count: 2, pending: 2, dead_disabled: 0 },
    ]);

    const ids = [a, b, c, d, e];
    // Rows store each event under its uuid (which sorts as its TypeID does); read back, each is named by its TypeID.
    const keys = ids.map((id) => eventKey(id!));
    // The payload is stored as given, and the envelope around it is not stored at all; a whole
    // envelope given instead is stored as given.
    const events = await session.query('SELECT id, stale, body, data FROM events WHERE id = ANY($1) ORDER BY id', [keys]);
    const stored = new Map([
      [a, { body: null, data: '{"n":100}' }],
      [b, { body: `{ "id": "${b!}", "data": {"n": 102} }`, data: null }],
      [c, { body: null, data: '{"n":103}' }],
      [e, { body: null, data: '{"n":105}' }],
    ]);
    expect(events.rows.map((r) => ({ ...r, id: eventOf(r.id) }))).toEqual([a, b, c, e].sort().map((id) => ({ id, stale: id === c, ...stored.get(id) })));
    const deliveries = await session.query(
      `SELECT d.event_id, count(*)::int AS n, count(q.delivery_id)::int AS queued FROM deliveries d
         LEFT JOIN delivery_queue q ON q.delivery_id = d.id WHERE d.event_id = ANY($1) GROUP BY 1 ORDER BY 1`,
      [keys],
    );
    expect(deliveries.rows.map((r) => ({ ...r, event_id: eventOf(r.event_id) }))).toEqual([a, b, e].sort().map((event_id) => ({ event_id, n: 2, queued: 2 })));
    const receipts = await session.query(
      `SELECT event_id, outcome, count(*)::int AS n FROM receipts WHERE event_id = ANY($1) GROUP BY 1, 2 ORDER BY 1, 2`,
      [keys],
    );
    expect(receipts.rows.map((r) => ({ ...r, event_id: eventOf(r.event_id) }))).toEqual(
      [
        { event_id: a, outcome: 'accepted', n: 1 },
        { event_id: a, outcome: 'duplicate', n: 2 },
        { event_id: b, outcome: 'accepted', n: 1 },
        { event_id: c, outcome: 'stale', n: 1 },
        { event_id: e, outcome: 'accepted', n: 1 },
      ].sort((x, y) => (x.event_id! + x.outcome).localeCompare(y.event_id! + y.outcome)),
    );
    const message = await session.query(`SELECT status, status_rank, status_final, last_event_id FROM messages WHERE message_id = 'msg_batch'`);
    expect(message.rows).toEqual([{ status: 'delivered', status_rank: 3, status_final: true, last_event_id: eventKey(e!) }]);
    const unclaimed = await session.query(`SELECT key FROM event_keys WHERE key = 'key-104'`);
    expect(unclaimed.rows).toEqual([]);
  });
});

/** The plans logged for statements whose text contains `marker`. */
const plansOf = (marker: string) => plans.filter((p) => p.includes(marker));

describe('intake statement plans', () => {
  it('receipts check their event, and callbacks and published events find their endpoints, with one reusable plan each', async () => {
    plans.length = 0;
    const eventIds: string[] = [];
    // More calls than the five custom plans PostgreSQL makes before it may choose a generic one.
    for (let n = 0; n < 7; n++) {
      const eventId = newId('event');
      eventIds.push(eventId);
      const { rows } = await session.query('SELECT * FROM intake_accept_many($1::jsonb, 86400)', [JSON.stringify([acceptItem(n, eventId)])]);
      expect(rows).toMatchObject([{ outcome: 'accepted', event_id: eventKey(eventId), endpoint_count: 2, pending: 2 }]);
      const repeat = await session.query('SELECT * FROM intake_record_repeats($1::text[], $2::text[], $3::text[], $4::text[], $5::text[])', [
        [newId('receipt')], [tenantKey()], [source.id], ['callback'], [`digest-${n}`],
      ]);
      expect(repeat.rows).toMatchObject([{ event_id: eventKey(eventId) }]);
      const published = newId('event');
      eventIds.push(published);
      const { rows: pub } = await session.query('SELECT outcome, pending FROM publish_events($1::jsonb, 86400)', [
        JSON.stringify([publishItem({ event_id: eventKey(published), envelope_id: published, data: JSON.stringify({ n }) })]),
      ]);
      expect(pub).toEqual([{ outcome: 'created', pending: 2 }]);
    }

    const eventChecks = plansOf('FOR KEY SHARE OF x').filter((p) => /"events" x/.test(p));
    const targetLookups = plansOf('fan_out_target');
    // A receipt per callback and one per repeat. Deliveries have no key to their event (migration
    // 20261205000049): fan-out writes both in one statement.
    expect(eventChecks.length).toBe(7 * 2);
    expect(targetLookups.length).toBe(7 * 2);
    for (const plan of [...eventChecks, ...targetLookups]) {
      expect(plan).toContain('$1');
      // The events are passed as uuids, and named in their bodies by their TypeIDs: neither form may show.
      for (const id of [tenantKey(), ...eventIds, ...eventIds.map(eventKey)]) expect(plan).not.toContain(id);
    }
    // The reusable check still reads only the event's own partition.
    expect(eventChecks[eventChecks.length - 1]).toMatch(/Subplans Removed: \d+/);
    expect(targetLookups[targetLookups.length - 1]).toContain('endpoints_tenant');
  });
});

/**
 * One event as the api gives it to publish_events, to the tenant's two endpoints unless told
 * otherwise: named by its uuid, as its rows store it, and by the TypeID its body names.
 */
function publishItem(fields: Record<string, unknown>): Record<string, unknown> {
  const id = newId('event');
  return {
    event_id: eventKey(id), envelope_id: id, delivery_ids: [deliveryId(), deliveryId()], tenant_id: tenantKey(), origin: 'api',
    type: 'order.created', message_id: null, idempotency_key: null, request_hash: null, data: '{}',
    created_at: new Date().toISOString(), trace_parent: null, ...fields,
  };
}

describe('a publish batch', () => {
  it('decides each event in turn: a key repeated in the batch is a duplicate, too few ids write nothing, places follow the batch', async () => {
    const ordered = (await tenant.call('POST', '/v1/endpoints', { body: { url: 'http://127.0.0.1:9/o', eventTypes: ['ord.*'], ordering: 'per-message' } })).body.id as string;
    const items = [
      publishItem({ idempotency_key: 'k-batch', request_hash: 'hash-first' }),
      publishItem({ delivery_ids: [deliveryId()] }),
      publishItem({ idempotency_key: 'k-batch', request_hash: 'hash-second' }),
      // The tenant's first two endpoints take every type: three targets.
      publishItem({ type: 'ord.placed', message_id: 'm-batch', delivery_ids: [deliveryId(), deliveryId(), deliveryId()] }),
      publishItem({ type: 'ord.placed', message_id: 'm-batch', delivery_ids: [deliveryId(), deliveryId(), deliveryId()] }),
    ];
    const ids = items.map((i) => i.event_id as string);
    const { rows } = await session.query('SELECT * FROM publish_events($1::jsonb, 86400)', [JSON.stringify(items)]);
    expect(rows.map((r) => [r.ord, r.outcome, r.endpoint_count, r.pending, r.id])).toEqual([
      [1, 'created', 2, 2, ids[0]],
      [2, 'need_ids', 2, 0, null],
      [3, 'duplicate', 2, 0, ids[0]],
      [4, 'created', 3, 3, ids[3]],
      [5, 'created', 3, 3, ids[4]],
    ]);
    // The duplicate answers with the first event's hash, so the api can tell a conflicting request.
    expect(rows[2].request_hash).toBe('hash-first');
    expect(Number(rows[3].seq)).toBeLessThan(Number(rows[4].seq));

    const { rows: events } = await session.query('SELECT id FROM events WHERE id = ANY($1) ORDER BY id', [ids]);
    expect(events.map((e) => e.id)).toEqual([ids[0], ids[3], ids[4]].sort());
    const { rows: deliveries } = await session.query(
      `SELECT d.event_id, d.endpoint_id, d.status, d.order_key, d.order_seq, q.status AS queued
         FROM deliveries d LEFT JOIN delivery_queue q ON q.delivery_id = d.id WHERE d.event_id = ANY($1) ORDER BY d.order_seq, d.id`,
      [ids],
    );
    expect(deliveries.filter((d) => d.event_id === ids[0])).toHaveLength(2);
    expect(deliveries).toHaveLength(8);
    expect(deliveries.every((d) => d.status === 'pending' && d.queued === 'pending')).toBe(true);
    // Each event of the message drew its place while the batch held the message's row, in batch order.
    const places = deliveries.filter((d) => idOfUuid('endpoint', d.endpoint_id) === ordered);
    expect(places.map((d) => [d.event_id, d.order_key])).toEqual([[ids[3], 'api:m-batch'], [ids[4], 'api:m-batch']]);
    expect(Number(places[0].order_seq)).toBeLessThan(Number(places[1].order_seq));
    const { rows: message } = await session.query('SELECT last_event_id FROM messages WHERE tenant_id = $1 AND message_id = $2', [tenantKey(), 'm-batch']);
    expect(message).toEqual([{ last_event_id: ids[4] }]);
  });
});

describe('deleting the tenant', () => {
  it('removes every row that names it: deliveries through their endpoints, receipts through their events', async () => {
    const { rows: tables } = await session.query(
      `SELECT c.table_name FROM information_schema.columns c JOIN pg_class r ON r.relname = c.table_name
        WHERE c.table_schema = current_schema() AND c.column_name = 'tenant_id' AND r.relkind IN ('r', 'p') AND NOT r.relispartition
        ORDER BY 1`,
    );
    const counts = async () => {
      const found: Record<string, number> = {};
      for (const { table_name: table } of tables) {
        const { rows } = await session.query(`SELECT count(*)::int AS n FROM ${table} WHERE tenant_id = $1`, [tenantKey()]);
        found[table] = rows[0].n;
      }
      return found;
    };
    const before = await counts();
    for (const table of ['events', 'receipts', 'deliveries', 'delivery_queue', 'messages', 'endpoints', 'sources']) expect(before[table], table).toBeGreaterThan(0);
    await session.query('DELETE FROM tenants WHERE id = $1', [tenantKey()]);
    expect(Object.values(await counts()).every((n) => n === 0), JSON.stringify(await counts())).toBe(true);
  });
});

