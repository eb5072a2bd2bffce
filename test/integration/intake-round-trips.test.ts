import type { Knex } from 'knex';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEndpoint, createSource, postCallback, sign, storedFor, type TestSource } from '../helpers/intake.js';
import { startTestPlatform, type TestPlatform, type TestTenant } from '../helpers/platform.js';
import { automation } from '../helpers/providers.js';

/**
 * What a callback costs in statements: a new one is one statement (the byte-identical check rides
 * in intake_accept), a repeat this process took recently is the receipt-only statement, and a
 * repeat another process took is still recognised by the accept statement and answered with the
 * stored event. The statements run for real; the test only counts them on the way to PostgreSQL.
 */

let first: TestPlatform;
let second: TestPlatform;
let tenant: TestTenant;
let source: TestSource;

/** Counts named statements sent through a knex pool, by name, while it is installed. */
function countNamedStatements(db: Knex): { counts: Map<string, number>; reset(): void } {
  const counts = new Map<string, number>();
  const wrapped = new WeakSet<object>();
  const acquire = db.client.acquireConnection.bind(db.client);
  db.client.acquireConnection = async () => {
    const conn = (await acquire()) as pg.PoolClient;
    if (!wrapped.has(conn)) {
      wrapped.add(conn);
      const query = conn.query.bind(conn) as (...args: unknown[]) => unknown;
      (conn as { query: unknown }).query = (config: unknown, ...rest: unknown[]) => {
        const name = (config as { name?: string } | null)?.name;
        if (name) counts.set(name, (counts.get(name) ?? 0) + 1);
        return query(config, ...rest);
      };
    }
    return conn;
  };
  return { counts, reset: () => counts.clear() };
}

beforeAll(async () => {
  first = await startTestPlatform({ role: 'api' });
  // Same key, so the second process can open the source's stored secret.
  second = await startTestPlatform({ role: 'api', database: first.database, env: { SECRETS_KEY: first.env.SECRETS_KEY! } });
  tenant = await first.createTenant('round-trips');
  await createEndpoint(tenant, 'http://127.0.0.1:9/a');
  source = await createSource(tenant, 'momo-automation');
});
afterAll(async () => {
  await second?.stop();
  await first?.stop();
});

describe('intake round trips', () => {
  it('a new callback is one statement; its repeat here is the receipt-only statement; its repeat elsewhere is recognised by the accept statement', async () => {
    const onFirst = countNamedStatements(first.platform.db);
    const onSecond = countNamedStatements(second.platform.db);
    const callback = sign.automation(source.secret, automation.body('evt_round_trip_1', 'order.created', 'sub_1', { n: 1 }));

    const accepted = await postCallback(first, source.id, callback);
    expect(accepted.status, accepted.text).toBe(200);
    expect(accepted.body.status).toBe('accepted');
    expect(Object.fromEntries(onFirst.counts)).toEqual({ intake_accept_many: 1 });

    onFirst.reset();
    const repeatHere = await postCallback(first, source.id, callback);
    expect(repeatHere.body).toMatchObject({ status: 'duplicate', eventId: accepted.body.eventId });
    expect(Object.fromEntries(onFirst.counts)).toEqual({ intake_repeats: 1 });

    // The second process never saw this body: it parses it and the accept statement finds the digest.
    const repeatElsewhere = await postCallback(second, source.id, callback);
    expect(repeatElsewhere.body).toMatchObject({ status: 'duplicate', eventId: accepted.body.eventId });
    expect(onSecond.counts.get('intake_accept_many')).toBe(1);
    expect(onSecond.counts.has('intake_repeats')).toBe(false);
    // Now it knows the body too.
    onSecond.reset();
    await postCallback(second, source.id, callback);
    expect(Object.fromEntries(onSecond.counts)).toEqual({ intake_repeats: 1 });

    expect(await storedFor(first.platform.db, source.id)).toMatchObject({ receipts: 4, events: 1, deliveries: 1 });
    const outcomes = await first.platform.db('receipts').where({ source_id: source.id }).orderBy('id').pluck('outcome');
    expect(outcomes).toEqual(['accepted', 'duplicate', 'duplicate', 'duplicate']);
  });

  it('the same event sent again with other bytes is a duplicate by its key, in the same one statement', async () => {
    const onFirst = countNamedStatements(first.platform.db);
    const original = await postCallback(first, source.id, sign.automation(source.secret, automation.body('evt_round_trip_2', 'order.created', 'sub_1', { n: 2 })));
    expect(original.body.status).toBe('accepted');
    onFirst.reset();
    // Same provider event id, a different body: not byte-identical, the dedupe key decides.
    const reworded = await postCallback(first, source.id, sign.automation(source.secret, automation.body('evt_round_trip_2', 'order.created', 'sub_1', { n: 2, extra: true })));
    expect(reworded.body).toMatchObject({ status: 'duplicate', eventId: original.body.eventId });
    expect(Object.fromEntries(onFirst.counts)).toEqual({ intake_accept_many: 1 });
  });
});
