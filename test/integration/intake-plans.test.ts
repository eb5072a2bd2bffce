import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '../../src/domain/ids.js';
import { createEndpoint, createSource, type TestSource } from '../helpers/intake.js';
import { startTestPlatform, type TestPlatform, type TestTenant } from '../helpers/platform.js';

/**
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
  session.on('notice', (n) => plans.push(n.message ?? ''));
  await session.query(`LOAD 'auto_explain'`);
  await session.query('SET auto_explain.log_min_duration = 0');
  await session.query('SET auto_explain.log_nested_statements = on');
  await session.query('SET auto_explain.log_level = notice');
});
afterAll(async () => {
  await session?.end();
  await t?.stop();
});

function acceptItem(n: number, eventId: string) {
  return {
    receiptId: newId('receipt'), eventId, deliveryIds: [newId('delivery'), newId('delivery')],
    tenantId: tenant.id, sourceId: source.id, origin: 'callback', bodyDigest: `digest-${n}`, receivedAt: new Date(),
    type: 'order.created', messageId: `ord_${n}`, dedupeKey: `key-${n}`, status: null, statusRank: null, statusFinal: null,
    sequence: null, body: JSON.stringify({ n }),
  };
}

/** The plans logged for statements whose text contains `marker`. */
const plansOf = (marker: string) => plans.filter((p) => p.includes(marker));

describe('intake statement plans', () => {
  it('callbacks, repeats and published events check their event and find their endpoints with one reusable plan each', async () => {
    const eventIds: string[] = [];
    // More calls than the five custom plans PostgreSQL makes before it may choose a generic one.
    for (let n = 0; n < 7; n++) {
      const eventId = newId('event');
      eventIds.push(eventId);
      const { rows } = await session.query('SELECT * FROM intake_accept_many($1::jsonb, 86400)', [JSON.stringify([acceptItem(n, eventId)])]);
      expect(rows).toMatchObject([{ outcome: 'accepted', event_id: eventId, endpoint_count: 2, pending: 2 }]);
      const repeat = await session.query('SELECT * FROM intake_record_repeats($1::text[], $2::text[], $3::text[], $4::text[], $5::text[])', [
        [newId('receipt')], [tenant.id], [source.id], ['callback'], [`digest-${n}`],
      ]);
      expect(repeat.rows).toMatchObject([{ event_id: eventId }]);
      const published = newId('event');
      eventIds.push(published);
      const { rows: pub } = await session.query(
        'SELECT outcome, pending FROM publish_event($1, $2::text[], $3, $4, $5, NULL, NULL, NULL, $6, now(), 86400)',
        [published, [newId('delivery'), newId('delivery')], tenant.id, 'api', 'order.created', JSON.stringify({ n })],
      );
      expect(pub).toEqual([{ outcome: 'created', pending: 2 }]);
    }

    const eventChecks = plansOf('FOR KEY SHARE OF x').filter((p) => /"events" x/.test(p));
    const targetLookups = plansOf('fan_out_target');
    // Two deliveries and a receipt per callback, one check per repeat, two deliveries per published event.
    expect(eventChecks.length).toBe(7 * 6);
    expect(targetLookups.length).toBe(7 * 2);
    for (const plan of [...eventChecks, ...targetLookups]) {
      expect(plan).toContain('$1');
      for (const id of [tenant.id, ...eventIds]) expect(plan).not.toContain(id);
    }
    // The reusable check still reads only the event's own partition.
    expect(eventChecks[eventChecks.length - 1]).toMatch(/Subplans Removed: \d+/);
    expect(targetLookups[targetLookups.length - 1]).toContain('endpoints_tenant');
  });
});
