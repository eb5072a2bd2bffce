import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { idOfUuid, uuidOf } from '../../src/domain/ids.js';
import { createEndpoint, createSource, postCallback, sign, storedFor, type TestSource } from '../helpers/intake.js';
import { eventually, startTestPlatform, type TestPlatform, type TestTenant } from '../helpers/platform.js';
import { automation } from '../helpers/providers.js';

/**
 * Group commit at intake: callbacks that arrive while earlier ones are being written share one
 * statement and one commit. Each is still answered only for what was committed, and a batch cannot
 * blur one callback into another. Role `api`: the rows seen are exactly what intake wrote.
 */

let t: TestPlatform;
let tenant: TestTenant;
let endpoints: string[];

beforeAll(async () => {
  t = await startTestPlatform({ role: 'api' });
  tenant = await t.createTenant('group-commit');
  endpoints = [await createEndpoint(tenant, 'http://127.0.0.1:9/a'), await createEndpoint(tenant, 'http://127.0.0.1:9/b')];
});
afterAll(async () => {
  await t?.stop();
});

/** How many transactions wrote a source's receipts: rows written by one statement share its xmin. */
async function writingTransactions(sourceId: string): Promise<number> {
  const { rows } = await t.platform.db.raw<{ rows: Array<{ n: number }> }>(
    'SELECT count(DISTINCT xmin::text)::int AS n FROM receipts WHERE source_id = ?',
    [sourceId],
  );
  return rows[0]!.n;
}

describe('intake group commit', () => {
  it('200 distinct callbacks at once, then 100 byte-identical copies at once: every row right, far fewer commits than callbacks', async () => {
    const source: TestSource = await createSource(tenant, 'momo-automation');
    const ids = Array.from({ length: 200 }, (_, i) => `evt_group_${i}`);
    const callbacks = ids.map((id) => sign.automation(source.secret, automation.body(id, 'order.created', 'sub_1', { n: id })));

    // Make the database busy: a lock holds the first statements, and what arrives meanwhile queues.
    const db = t.platform.db;
    const blocker = await db.transaction();
    await blocker.raw('LOCK TABLE receipts IN SHARE MODE');
    const sent = Promise.all(callbacks.map((cb) => postCallback(t, source.id, cb)));
    await eventually(async () => {
      const { rows } = await db.raw<{ rows: Array<{ n: number }> }>(
        `SELECT count(*)::int AS n FROM pg_locks WHERE NOT granted AND relation = 'receipts'::regclass`,
      );
      return rows[0]!.n >= 1;
    }, 'an intake statement waiting on the lock');
    await new Promise((r) => setTimeout(r, 1_000));
    await blocker.commit();
    const first = await sent;
    for (const res of first) expect(res.status, res.text).toBe(200);
    expect(first.map((r) => r.body.status)).toEqual(ids.map(() => 'accepted'));
    expect(new Set(first.map((r) => r.body.eventId)).size).toBe(200);
    // One statement per callback would be 200 transactions; the 200 that waited went in batches.
    // Counted before the copies, which arrive unblocked and may each go alone on a fast commit.
    expect(await writingTransactions(source.id)).toBeLessThan(50);

    const copies = await Promise.all(callbacks.slice(0, 100).map((cb) => postCallback(t, source.id, cb)));
    for (const [i, res] of copies.entries()) {
      expect(res.status, res.text).toBe(200);
      expect(res.body).toMatchObject({ status: 'duplicate', eventId: first[i]!.body.eventId });
    }

    // Each answer names its own event: the body stored under an answered id is that callback's.
    const { rows } = await t.platform.db.raw<{ rows: Array<{ id: string; data_n: string }> }>(
      `SELECT id, (event_body(events)::jsonb -> 'data' ->> 'n') AS data_n FROM events WHERE source_id = ?`,
      [source.id],
    );
    // Rows name each event by its uuid; the answers by its TypeID.
    const dataById = new Map(rows.map((r) => [idOfUuid('event', r.id), r.data_n]));
    first.forEach((res, i) => expect(dataById.get(res.body.eventId)).toBe(ids[i]));

    expect(await storedFor(t.platform.db, source.id)).toMatchObject({ receipts: 300, events: 200, deliveries: 400 });
    const perEndpoint = await t.platform.db('deliveries').whereIn('endpoint_id', endpoints.map((id) => uuidOf('endpoint', id))).where({ tenant_id: uuidOf('tenant', tenant.id) }).select('endpoint_id').count({ n: '*' }).groupBy('endpoint_id');
    expect(perEndpoint.map((r) => Number(r.n))).toEqual([200, 200]);
  });
});
