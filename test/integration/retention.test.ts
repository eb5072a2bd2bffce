// Retention on real PostgreSQL, against data back-dated by its ids (TypeIDs carry their creation
// time) into the partitions of days long past: what has expired leaves, by whole partitions where a
// whole day has, and nothing unfinished or inside its window is touched; the API keeps answering
// across a dropped partition.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import type { Knex } from 'knex';
import pg from 'pg';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { loadConfig } from '../../src/config/index.js';
import { createDb } from '../../src/infra/db.js';
import { renderMetrics } from '../../src/metrics/registry.js';
import { Retention, type RetentionReport } from '../../src/ops/retention.js';
import { expectError } from '../helpers/api.js';
import { countWhereIn, dayMs, daysAgo, idAt, insertOldEvent, partitionName as dayName, type OldEvent } from '../helpers/backdate.js';
import { eventDaysLock, removeDeliveries } from '../../src/store/retention-store.js';
import { ensurePartitions } from '../../src/store/partitions-store.js';
import { uuidFloor } from '../../src/domain/retention.js';
import { previewBackfill } from '../../src/store/backfill-store.js';
import { TenantScope } from '../../src/store/tenant-scope.js';
import { idOfUuid, newId, uuidOf } from '../../src/domain/ids.js';
import { metricValue } from '../helpers/dispatch.js';
import { eventually, startTestPlatform, type TestPlatform, type TestTenant } from '../helpers/platform.js';
import { standard } from '../helpers/providers.js';
import { advisoryLockWaiters, attemptsListed, partitionMakersWaitingFor } from '../helpers/database.js';

const run = promisify(execFile);

let t: TestPlatform;
let tenant: TestTenant;
let db: Knex;
let source: { id: string; secret: string };
let epA: string;
let epB: string;

const partitionNames = async () => (await db('partition_bounds').pluck('name')) as string[];
/** Delivery ids as the database stores them: the uuids their TypeIDs encode. */
const stored = (deliveryIds: string[]) => deliveryIds.map((id) => uuidOf('delivery', id));
/** Event ids as the database stores them, likewise. */
const storedEvents = (eventIds: string[]) => eventIds.map((id) => uuidOf('event', id));

async function runRetention(): Promise<RetentionReport> {
  return eventually(() => t.platform.retention.run({ dryRun: false }), 'the retention lock');
}

beforeAll(async () => {
  t = await startTestPlatform({ env: { RETENTION_DAYS: '30', DEAD_LETTER_RETENTION_DAYS: '45', MAX_EVENT_AGE_SECONDS: '86400' } });
  db = t.platform.db;
  // The worker's own run at start would race the old rows the tests insert (on a loaded host it
  // removed one before the dry run counted it): let it end, and stop its timer. The tests run
  // retention themselves.
  await t.platform.retention.stop();
  tenant = await t.createTenant('retention');
  source = (await tenant.call('POST', '/v1/sources', { body: { type: 'standard-webhooks', name: 'old' } })).body;
  // Never reached: every old delivery is finished or waits an hour for its next try.
  epA = (await tenant.call('POST', '/v1/endpoints', { body: { url: 'http://127.0.0.1:9/a' } })).body.id;
  epB = (await tenant.call('POST', '/v1/endpoints', { body: { url: 'http://127.0.0.1:9/b' } })).body.id;
});
afterAll(async () => {
  await t?.stop();
});

describe('retention', () => {
  let expired: OldEvent; // 40 days old, both deliveries succeeded: a whole day that has expired
  let held: OldEvent; // 41 days old: one delivery succeeded, one still pending (a replay, say)
  let dead: OldEvent; // 60 days old: one dead 40 days ago (inside 45 days), one dead 50 days ago
  let recent: OldEvent; // 1 day old

  beforeAll(async () => {
    const base = { tenantId: tenant.id, sourceId: source.id };
    expired = await insertOldEvent(db, { ...base, at: daysAgo(40), dedupeKey: 'msg_expired', deliveries: [{ endpointId: epA, status: 'succeeded' }, { endpointId: epB, status: 'succeeded' }] });
    held = await insertOldEvent(db, { ...base, at: daysAgo(41), dedupeKey: 'msg_held', deliveries: [{ endpointId: epA, status: 'succeeded' }, { endpointId: epB, status: 'pending' }] });
    dead = await insertOldEvent(db, {
      ...base, at: daysAgo(60), dedupeKey: 'msg_dead',
      deliveries: [{ endpointId: epA, status: 'dead', updatedAt: daysAgo(40) }, { endpointId: epB, status: 'dead', updatedAt: daysAgo(50) }],
    });
    recent = await insertOldEvent(db, { ...base, at: daysAgo(1), dedupeKey: 'msg_recent', deliveries: [{ endpointId: epA, status: 'succeeded' }] });
  });

  it('a dry run, in process and as `npm run retention -- --dry-run`, reports what would go and changes nothing', async () => {
    const before = { names: await partitionNames(), deliveries: await db('deliveries').count({ n: '*' }), attempts: await attemptsListed(db).count({ n: '*' }) };
    const dry = await eventually(() => t.platform.retention.run({ dryRun: true }), 'the retention lock');
    expect(dry.removed).toMatchObject({ events: 1, receipts: 1, event_keys: 1, deliveries: 4, attempts: 4 });
    expect(dry.partitions).toEqual(expect.arrayContaining([dayName('attempts', daysAgo(40)), dayName('events', daysAgo(40)), dayName('receipts', daysAgo(40))]));

    const { stdout } = await run(process.execPath, ['--import', 'tsx', 'src/main.ts', 'retention', '--dry-run'], { env: { ...process.env, ...t.env, LOG_LEVEL: 'silent' } });
    expect(stdout).toContain('dry run: nothing changed');
    expect(stdout).toMatch(/events\s+would remove 1 rows/);
    expect(stdout).toMatch(/deliveries\s+would remove 4 rows/);
    expect(stdout).toContain(`kept         ${dayName('attempts', daysAgo(41))}`);

    expect({ names: await partitionNames(), deliveries: await db('deliveries').count({ n: '*' }), attempts: await attemptsListed(db).count({ n: '*' }) }).toEqual(before);
    expect(await countWhereIn(db, 'events', 'id', storedEvents([expired.eventId]))).toBe(1);
  });

  it('removes what expired, whole partitions where a whole day did, and nothing unfinished or inside its window', async () => {
    const report = await runRetention();
    expect(report.removed).toMatchObject({ events: 1, receipts: 1, event_keys: 1, deliveries: 4, attempts: 4 });

    // The expired day: every row and its partitions gone.
    const names = await partitionNames();
    for (const table of ['events', 'receipts', 'attempts']) expect(names).not.toContain(dayName(table, daysAgo(40)));
    expect(await countWhereIn(db, 'events', 'id', storedEvents([expired.eventId]))).toBe(0);
    expect(await countWhereIn(db, 'deliveries', 'id', stored(expired.deliveryIds))).toBe(0);
    expect(await countWhereIn(db, 'event_keys', 'event_id', storedEvents([expired.eventId]))).toBe(0);

    // The day held back by a pending delivery: its succeeded delivery went (with its attempt), the
    // pending one, its attempt, the event, its receipt and its key all stayed.
    expect(names).toContain(dayName('attempts', daysAgo(41)));
    expect(names).toContain(dayName('events', daysAgo(41)));
    expect(await db('deliveries').whereIn('id', stored(held.deliveryIds)).pluck('status')).toEqual(['pending']);
    expect(await countWhereIn(db, 'attempts', 'delivery_id', stored(held.deliveryIds))).toBe(1);
    expect(await countWhereIn(db, 'receipts', 'event_id', storedEvents([held.eventId]))).toBe(1);
    expect(await countWhereIn(db, 'event_keys', 'event_id', storedEvents([held.eventId]))).toBe(1);

    // Dead letters are kept DEAD_LETTER_RETENTION_DAYS from their death: 40 days stays, 50 goes.
    expect(await db('deliveries').whereIn('id', stored(dead.deliveryIds)).pluck('id')).toEqual(stored([dead.deliveryIds[0]!]));
    expect(await countWhereIn(db, 'events', 'id', storedEvents([dead.eventId, recent.eventId]))).toBe(2);

    const text = (await renderMetrics()).body;
    expect(metricValue(text, 'webhook_retention_removed_total', { table: 'events' })).toBeGreaterThanOrEqual(1);
    expect(metricValue(text, 'webhook_retention_removed_total', { table: 'deliveries' })).toBeGreaterThanOrEqual(4);
  });

  it('the API keeps working across the dropped partition; an expired event answers 404 expired', async () => {
    expectError(await tenant.call('GET', `/v1/events/${expired.eventId}`), 404, 'expired');
    expect((await tenant.call('GET', `/v1/events/${held.eventId}`)).status).toBe(200);
    expectError(await tenant.call('GET', '/v1/events/evt_01h0000000000000000000nope'), 404, 'not_found');
    const listed = await tenant.call('GET', '/v1/events?limit=100');
    expect(listed.status).toBe(200);
    const ids = (listed.body.data as Array<{ id: string }>).map((e) => e.id);
    expect(ids).toEqual(expect.arrayContaining([held.eventId, dead.eventId, recent.eventId]));
    expect(ids).not.toContain(expired.eventId);
    expect((await tenant.call('GET', `/v1/deliveries?limit=100`)).status).toBe(200);
  });

  it('a key stays unique across partitions while its event is kept; after retention a repeat is a new event', async () => {
    const send = (id: string) => {
      const body = JSON.stringify({ type: 'order.created', data: { id } });
      return t.call('POST', `/inbound/${source.id}`, { rawBody: body, headers: standard.headers(source.secret, id, body) });
    };
    // The 41-day-old event's key, today (another partition): the same logical event.
    const repeat = await send('msg_held');
    expect(repeat.status).toBe(200);
    expect(repeat.body).toMatchObject({ status: 'duplicate', eventId: held.eventId });
    // The removed event's key: nothing remembers it, so it is accepted as a new event.
    const again = await send('msg_expired');
    expect(again.body.status).toBe('accepted');
    expect(again.body.eventId).not.toBe(expired.eventId);
  });

  it('drops a partition that a run detached but did not get to drop', async () => {
    const at = daysAgo(90);
    await ensurePartitions(db, at, new Date(at.getTime() + 1), 'day');
    const name = dayName('attempts', at);
    // As a process dying between the two steps leaves it. A plain DETACH locks attempts, then
    // deliveries (for the foreign key), while the platform recording an attempt here locks them the
    // other way round: deliveries are locked first, so the two wait for each other instead of deadlocking.
    await db.transaction(async (trx) => {
      await trx.raw('LOCK TABLE deliveries IN SHARE ROW EXCLUSIVE MODE');
      await trx.raw(`ALTER TABLE attempts DETACH PARTITION ${name}`);
    });
    expect((await db.raw('SELECT to_regclass(?) AS t', [name])).rows[0].t).not.toBeNull();
    const report = await runRetention();
    expect(report.partitions).toContain(name);
    expect((await db.raw('SELECT to_regclass(?) AS t', [name])).rows[0].t).toBeNull();
  });

  /**
   * Makes the partitions of the day `at` while a transaction of the platform's shape holds its first
   * write (`held`, by default an update of deliveries): once the creation waits to lock `waitsFor`,
   * `next` runs in the transaction, then it commits. Answers how many partitions were made.
   */
  async function creatingWhileHeld(
    at: Date,
    next: (trx: Knex.Transaction) => Promise<unknown>,
    { held = 'UPDATE deliveries SET updated_at = updated_at WHERE false', waitsFor = 'deliveries' } = {},
  ): Promise<number> {
    let made: Promise<number> | undefined;
    // Connections of its own: the platform's loops queue behind the creation's lock and may hold
    // every connection of the platform's pool until the transaction commits.
    const own = createDb({ url: t.database.url, poolMax: 3, timeoutMs: 30_000 });
    try {
      await own.transaction(async (trx) => {
        // Recording a result, admission and hand-offs update their deliveries first (the update
        // needs no row here)...
        await trx.raw(held);
        made = ensurePartitions(own, at, new Date(at.getTime() + 1), 'day');
        await eventually(async () => (await partitionMakersWaitingFor(own, waitsFor)) > 0, `partition creation waiting for ${waitsFor}`);
        await next(trx);
      });
      return await made!;
    } finally {
      await own.destroy();
    }
  }

  it('a partition created while a result is being recorded: one waits for the other, neither deadlocks', async () => {
    // Only the attempts partition of that day is missing, as when it is the one left to create.
    const at = daysAgo(-60);
    await ensurePartitions(db, at, new Date(at.getTime() + 1), 'day');
    const name = dayName('attempts', at);
    await db.raw(`DROP TABLE ${name}`);
    // ...then its attempt is logged. Had the creation held attempts exclusively while it waited for
    // deliveries, this would wait for it while it waited for us, and PostgreSQL would abort one.
    expect(await creatingWhileHeld(at, (trx) => trx.raw('INSERT INTO attempts SELECT * FROM attempts WHERE false'))).toBe(1);
    expect(await partitionNames()).toContain(name);
  });

  it('a day of events created while admission holds deliveries and reads events: neither waits for the other in a cycle', async () => {
    const at = daysAgo(-61);
    // ...then admission reads their events. Had the creation held events while it waited for
    // deliveries, this would wait for it while it waited for us, and PostgreSQL would abort one.
    // (Event ids are stored as uuids: this one names no event.)
    await creatingWhileHeld(at, (trx) => trx.raw("SELECT 1 FROM events WHERE id = '00000000-0000-0000-0000-000000000000'"));
    expect(await partitionNames()).toEqual(expect.arrayContaining(['events', 'receipts', 'attempts'].map((table) => dayName(table, at))));
  });

  it("a day of events created while a duplicate callback's receipt checks its event: neither waits for the other in a cycle", async () => {
    const at = daysAgo(-62);
    // A duplicate's receipt is written first, and its key into events checked after: the opposite
    // order to a new event's. The creation waits for receipts holding nothing the check waits for
    // (events only SHARE UPDATE EXCLUSIVE); had it held events exclusively, as a partition created
    // with PARTITION OF did, the check would wait for it, and fail here after 100 ms.
    await creatingWhileHeld(at, async (trx) => {
      await trx.raw("SET LOCAL lock_timeout = '100ms'");
      // Event ids are stored as uuids: this one names no event.
      await trx.raw("SELECT 1 FROM events WHERE id = '00000000-0000-0000-0000-000000000000' FOR KEY SHARE");
    }, {
      held: 'INSERT INTO receipts SELECT * FROM receipts WHERE false',
      waitsFor: 'receipts',
    });
    expect(await partitionNames()).toEqual(expect.arrayContaining(['events', 'receipts', 'attempts'].map((table) => dayName(table, at))));
  });

  it('a day of events is made while deliveries are being written: it takes no lock on them', async () => {
    const at = daysAgo(-63);
    const own = createDb({ url: t.database.url, poolMax: 2, timeoutMs: 30_000 });
    try {
      await own.transaction(async (trx) => {
        await trx.raw('UPDATE deliveries SET updated_at = updated_at WHERE false');
        // Called directly, so a wait for deliveries would end in lock_not_available after 200 ms.
        const { rows } = await db.raw("SELECT ensure_time_partitions_v2('events', ?, ?, 'day') AS made", [at, new Date(at.getTime() + 1)]);
        expect(rows).toEqual([{ made: 1 }]);
      });
    } finally {
      await own.destroy();
    }
  });

  it('a day of events and of attempts is made while both are read and written: no reader or writer waits', async () => {
    const at = daysAgo(-64);
    // A column setting of the parent, which PARTITION OF would copy too (put back below).
    await db.raw('ALTER TABLE events ALTER COLUMN data SET STORAGE MAIN');
    const own = createDb({ url: t.database.url, poolMax: 2, timeoutMs: 30_000 });
    try {
      await own.transaction(async (trx) => {
        // What claims, hand-offs and the API hold on events, and attempts' writers on attempts.
        await trx.raw('SELECT 1 FROM events LIMIT 0');
        await trx.raw('INSERT INTO attempts SELECT * FROM attempts WHERE false');
        // Called directly: a wait for either would end in lock_not_available after 200 ms.
        for (const table of ['events', 'attempts']) {
          const { rows } = await db.raw("SELECT ensure_time_partitions_v2(?, ?, ?, 'day') AS made", [table, at, new Date(at.getTime() + 1)]);
          expect(rows, table).toEqual([{ made: 1 }]);
        }
      });
      const storage = await db.raw<{ rows: Array<{ storage: string }> }>(
        "SELECT attstorage AS storage FROM pg_attribute WHERE attrelid = ?::regclass AND attname = 'data'",
        [dayName('events', at)],
      );
      expect(storage.rows).toEqual([{ storage: 'm' }]);
    } finally {
      await own.destroy();
      await db.raw('ALTER TABLE events ALTER COLUMN data SET STORAGE EXTENDED');
    }
    const { rows } = await db.raw<{ rows: Array<{ name: string; local: boolean }> }>(
      `SELECT c.conname AS name, c.conislocal AS local FROM pg_constraint c WHERE c.conrelid = ?::regclass ORDER BY 1`,
      [dayName('events', at)],
    );
    // Made as CREATE TABLE ... PARTITION OF would: every constraint the parent's, none of its own.
    expect(rows.map((r) => r.name).sort()).toEqual([`${dayName('events', at)}_pkey`, 'events_origin_check', 'events_source_id_fkey', 'events_tenant_id_fkey'].sort());
    expect(rows.every((r) => !r.local)).toBe(true);
  });

  it('shutdown ends a run waiting to create a partition, without waiting out its tries', async () => {
    const at = daysAgo(-2); // inside the days kept ahead
    const name = dayName('attempts', at);
    await db.raw(`DROP TABLE ${name}`);
    const logged: Array<{ level: number; msg: string }> = [];
    const logger = pino({ level: 'info' }, { write: (line: string) => void logged.push(JSON.parse(line)) });
    const retention = new Retention({ db, policy: t.config.retention, logger });
    const own = createDb({ url: t.database.url, poolMax: 2, timeoutMs: 30_000 });
    try {
      await own.transaction(async (trx) => {
        // A result being recorded holds off the new partition's key into deliveries: each try gives
        // way after 200 ms, and the tries go on with backoff for about a minute.
        await trx.raw('UPDATE deliveries SET updated_at = updated_at WHERE false');
        retention.start({ remove: true });
        await eventually(async () => (await partitionMakersWaitingFor(own, 'deliveries')) > 0, 'the run waiting to create the partition');
        await retention.stop();
        // Stopped while the lock is still held: the partition is not there yet.
        expect(await partitionNames()).not.toContain(name);
      });
    } finally {
      await own.destroy();
    }
    expect(logged.filter((l) => l.level >= 40)).toEqual([]);
    expect(logged.map((l) => l.msg)).toContain('retention run stopped by shutdown; the next run goes on');
    await ensurePartitions(db, at, new Date(at.getTime() + 1), 'day');
    expect(await partitionNames()).toContain(name);
  });

  it('keeps partitions ahead of need', async () => {
    const names = await partitionNames();
    for (const days of [0, 1, 7]) expect(names).toContain(dayName('events', daysAgo(-days)));
  });
});

describe('retention limits', () => {
  it('refuses a maximum event age that would outlive RETENTION_DAYS, in configuration and on an endpoint', async () => {
    expect(() => loadConfig({ ...t.env, RETENTION_DAYS: '1', MAX_EVENT_AGE_SECONDS: '86401' })).toThrow(
      /MAX_EVENT_AGE_SECONDS: must not exceed RETENTION_DAYS \(1 days = 86400 seconds\)/,
    );
    const res = await tenant.call('POST', '/v1/endpoints', { body: { url: 'http://127.0.0.1:9/c', retryPolicy: { maxEventAgeSeconds: 30 * 86_400 + 1 } } });
    expectError(res, 400, 'validation_failed');
    expect(res.body.error.message).toContain('RETENTION_DAYS');
    const patched = await tenant.call('PATCH', `/v1/endpoints/${epA}`, { body: { retryPolicy: { maxEventAgeSeconds: 40 * 86_400 } } });
    expectError(patched, 400, 'validation_failed');
  });

  it("counts the window by PostgreSQL's clock, as replay does, not by a process clock running a day ahead", async () => {
    // Finished 29.5 days ago by PostgreSQL's clock: inside RETENTION_DAYS (30), so a replay takes
    // it; a cutoff from this process's clock, a day ahead, would fall after it.
    const inside = await insertOldEvent(db, {
      tenantId: tenant.id, sourceId: source.id, at: daysAgo(31), dedupeKey: 'msg_skew',
      deliveries: [{ endpointId: epA, status: 'succeeded', updatedAt: daysAgo(29.5) }],
    });
    vi.useFakeTimers({ toFake: ['Date'], now: Date.now() + dayMs, shouldAdvanceTime: true });
    try {
      await runRetention();
    } finally {
      vi.useRealTimers();
    }
    expect(await db('deliveries').where({ id: uuidOf('delivery', inside.deliveryIds[0]!) }).first('status')).toEqual({ status: 'succeeded' });
    expect(await db('events').where({ id: uuidOf('event', inside.eventId) }).first('id')).toEqual({ id: uuidOf('event', inside.eventId) });
  });

  it('a dead letter can be replayed within DEAD_LETTER_RETENTION_DAYS of its death, not after', async () => {
    const old = await insertOldEvent(db, {
      tenantId: tenant.id, sourceId: source.id, at: daysAgo(50), dedupeKey: 'msg_replay',
      deliveries: [{ endpointId: epA, status: 'dead', updatedAt: daysAgo(46) }, { endpointId: epB, status: 'dead', updatedAt: daysAgo(10) }],
    });
    const replay = (id: string) => tenant.call('POST', `/v1/deliveries/${id}/replay`, { body: { reason: 'retention test' } });
    expectError(await replay(old.deliveryIds[0]!), 409, 'expired');
    const preview = await tenant.call('POST', '/v1/replays', { body: { filter: { endpointId: epA }, reason: 'preview', dryRun: true } });
    expect(preview.body.sample.map((d: { id: string }) => d.id)).not.toContain(old.deliveryIds[0]);
    expect((await replay(old.deliveryIds[1]!)).status).toBe(202);
    expect(await db('deliveries').where({ id: uuidOf('delivery', old.deliveryIds[0]!) }).first('status')).toEqual({ status: 'dead' });
  });
});

describe('a backfill that writes deliveries of a day retention is dropping', () => {
  it('is waited for, and its deliveries keep the day (deliveries have no foreign key to their event)', async () => {
    const at = daysAgo(70);
    const old = await insertOldEvent(db, { tenantId: tenant.id, sourceId: source.id, at, dedupeKey: 'msg_backfilled', deliveries: [] });
    // A backfill's transaction, as startBackfill opens it: the shared lock first. Retention, started
    // now, waits for it before it checks the day; meanwhile the backfill writes a delivery of the
    // day's event (which retention, not waiting, would have found no reference to, and dropped).
    const backfill = new pg.Client({ connectionString: t.database.url });
    await backfill.connect();
    try {
      await backfill.query('BEGIN');
      await backfill.query('SELECT pg_advisory_xact_lock_shared($1::bigint)', [eventDaysLock]);
      const report = runRetention();
      await eventually(async () => (await advisoryLockWaiters(db, eventDaysLock)) > 0, 'retention waiting for the backfill');
      const deliveryId = newId('delivery');
      await backfill.query(
        `INSERT INTO deliveries (id, tenant_id, event_id, endpoint_id, status, next_attempt_at, deadline_at)
         VALUES ($1, $2, $3, $4, 'pending', now() + interval '1 hour', now() + interval '1 day')`,
        [uuidOf('delivery', deliveryId), uuidOf('tenant', tenant.id), uuidOf('event', old.eventId), uuidOf('endpoint', epA)],
      );
      await backfill.query('COMMIT');
      const { held } = await report;
      expect(held).toContainEqual({ partition: dayName('events', at), reason: 'a delivery of one of its events is still kept' });
      expect(await partitionNames()).toContain(dayName('events', at));
      const kept = await db('deliveries as d').join('events as e', 'e.id', 'd.event_id').where('d.id', uuidOf('delivery', deliveryId)).select('e.id');
      expect(kept).toEqual([{ id: uuidOf('event', old.eventId) }]);
    } finally {
      await backfill.end();
    }
  });
});

describe('a backfill while retention removes a day of events', () => {
  it('is not held by the removal, and reads none of that day from the moment it begins', async () => {
    // Past RETENTION_DAYS (30) but newer than any day the tests above removed: the events
    // watermark is still below it, so a backfill's window reaches it until retention begins.
    const at = daysAgo(35);
    const old = await insertOldEvent(db, { tenantId: tenant.id, sourceId: source.id, at, dedupeKey: 'msg_removing', deliveries: [] });
    const ep = (await tenant.call('POST', '/v1/endpoints', { body: { url: 'http://127.0.0.1:9/d' } })).body.id;
    const scope = TenantScope.forSystem(db, tenant.id);
    const previewed = async () => {
      const preview = await previewBackfill(scope, ep, { since: daysAgo(40), until: new Date(), reason: 'retention test' }, 100);
      if (typeof preview === 'string') throw new Error(preview);
      // Read as stored: the uuids the events' TypeIDs encode.
      return preview.sample.map((e) => idOfUuid('event', e.id));
    };
    expect(await previewed()).toContain(old.eventId);

    // The removal's first step, the day's keys, waits for a row lock held here.
    const blocker = new pg.Client({ connectionString: t.database.url });
    await blocker.connect();
    let report: Promise<RetentionReport> | undefined;
    try {
      await blocker.query('BEGIN');
      await blocker.query('SELECT 1 FROM event_keys WHERE event_id = $1 FOR UPDATE', [uuidOf('event', old.eventId)]);
      report = runRetention();
      await eventually(async () => {
        const { rows } = await db.raw<{ rows: unknown[] }>(
          "SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%DELETE FROM event_keys%' AND datname = current_database()",
        );
        return rows.length > 0;
      }, "retention removing the day's keys");

      expect(await previewed()).not.toContain(old.eventId);
      const res = await tenant.call('POST', `/v1/endpoints/${ep}/backfill`, { body: { since: daysAgo(29).toISOString(), reason: 'while retention removes a day' } });
      expect(res.status, res.text).toBe(202);

      await blocker.query('COMMIT');
      expect((await report).partitions).toContain(dayName('events', at));
      expect(await db('events').where({ id: uuidOf('event', old.eventId) }).first('id')).toBeUndefined();
    } finally {
      await blocker.end();
      // Ended with the blocker's connection even when an assertion failed first, so it outlives no test.
      await report?.catch(() => undefined);
    }
  });
});

describe('an unfinished delivery whose event retention has removed', () => {
  it('is removed by the next run, with its queue row; one whose event is kept or above the watermark stays', async () => {
    // A day of events retention drops, and then a delivery of its event: what a backfill of the other
    // release can commit while a deploy from 0.5.0 rolls (that release takes no eventDaysLock), and
    // no key refuses.
    const at = daysAgo(37);
    const gone = await insertOldEvent(db, { tenantId: tenant.id, sourceId: source.id, at, dedupeKey: 'msg_gone', deliveries: [] });
    expect((await runRetention()).partitions).toContain(dayName('events', at));
    const pending = (eventId: string, endpointId: string) => {
      const id = newId('delivery');
      return db('deliveries')
        .insert({ id: uuidOf('delivery', id), tenant_id: uuidOf('tenant', tenant.id), event_id: uuidOf('event', eventId), endpoint_id: uuidOf('endpoint', endpointId), status: 'pending', next_attempt_at: new Date(), deadline_at: new Date(Date.now() + dayMs) })
        .then(() => id);
    };
    const orphan = await pending(gone.eventId, epA);
    expect(await db('delivery_queue').where({ delivery_id: uuidOf('delivery', orphan) }).count({ n: '*' })).toEqual([{ n: 1 }]);
    // Below the watermark too, but its event is there: its day is held by this very delivery.
    const held = await insertOldEvent(db, { tenantId: tenant.id, sourceId: source.id, at: daysAgo(39), dedupeKey: 'msg_kept_pending', deliveries: [{ endpointId: epB, status: 'pending' }] });
    // Above the watermark: whatever made it, retention has not removed its event.
    const recentWithoutEvent = await pending(idAt('event', daysAgo(2)), epB);

    const dry = await eventually(() => t.platform.retention.run({ dryRun: true }), 'the retention lock');
    expect(dry.orphaned).toEqual([orphan]);
    const { stdout } = await run(process.execPath, ['--import', 'tsx', 'src/main.ts', 'retention', '--dry-run'], { env: { ...process.env, ...t.env, LOG_LEVEL: 'silent' } });
    expect(stdout).toContain(`orphaned     would remove 1 unfinished deliveries whose event was gone: ${orphan}`);
    expect(await db('deliveries').where({ id: uuidOf('delivery', orphan) }).first('id')).toEqual({ id: uuidOf('delivery', orphan) });

    expect((await runRetention()).orphaned).toEqual([orphan]);
    expect(await db('deliveries').where({ id: uuidOf('delivery', orphan) }).first('id')).toBeUndefined();
    expect(await db('delivery_queue').where({ delivery_id: uuidOf('delivery', orphan) }).count({ n: '*' })).toEqual([{ n: 0 }]);
    const kept = await db('deliveries').whereIn('id', stored([held.deliveryIds[0]!, recentWithoutEvent])).orderBy('id').pluck('id');
    expect(kept).toEqual(stored([held.deliveryIds[0]!, recentWithoutEvent].sort()));
  });
});

describe('a removal in batches, stopped by shutdown', () => {
  it('ends before its next batch and answers what it removed', async () => {
    const at = daysAgo(90);
    const ids: string[] = [];
    for (const dedupeKey of ['stop_a', 'stop_b', 'stop_c']) {
      ids.push(...(await insertOldEvent(db, { tenantId: tenant.id, sourceId: source.id, at, dedupeKey, deliveries: [{ endpointId: epA, status: 'succeeded' }] })).deliveryIds);
    }
    const day = { lower: uuidFloor(at), upper: uuidFloor(new Date(at.getTime() + 1)) };
    const cut = { succeeded: daysAgo(30), dead: daysAgo(45), audit: daysAgo(365) };
    // Aborted once the first batch is under way: the removal reads the signal before each batch.
    let reads = 0;
    const signal = { get aborted() { return ++reads > 1; } } as unknown as AbortSignal;
    expect(await removeDeliveries(db, { ids: day }, cut, { dryRun: false, batch: 1, signal })).toEqual({ deliveries: 1, attempts: 1 });
    expect(await db('deliveries').whereIn('id', stored(ids)).count({ n: '*' })).toEqual([{ n: 2 }]);
    expect(await removeDeliveries(db, { ids: day }, cut, { dryRun: false, batch: 1 })).toEqual({ deliveries: 2, attempts: 2 });
  });
});
