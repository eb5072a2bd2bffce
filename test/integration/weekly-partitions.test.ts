// Partitions a week long, for long retention windows, on real PostgreSQL: made with no gap beside
// days made before, holding the rows of their seven days, and dropped by retention only once all of
// the week is past its window.
import type { Knex } from 'knex';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pino from 'pino';
import { idOfUuid, uuidOf } from '../../src/domain/ids.js';
import { defaultRetention, uuidFloor, uuidTime } from '../../src/domain/retention.js';
import { Retention } from '../../src/ops/retention.js';
import { dayMs, daysAgo, insertOldEvent, partitionName as named } from '../helpers/backdate.js';
import { ensurePartitions } from '../../src/store/partitions-store.js';
import { eventually, startTestPlatform, type TestPlatform } from '../helpers/platform.js';

let t: TestPlatform;
let db: Knex;
let tenantId: string;
let sourceId: string;
let endpointId: string;

/** 00:00 UTC of the Monday of `at`'s week, as PostgreSQL's date_trunc('week') counts it. */
function mondayOf(at: Date): Date {
  const day = Date.UTC(at.getUTCFullYear(), at.getUTCMonth(), at.getUTCDate());
  return new Date(day - ((new Date(day).getUTCDay() + 6) % 7) * dayMs);
}
const plus = (at: Date, days: number) => new Date(at.getTime() + days * dayMs);

/** The partitions of `table` whose rows lie in [from, to), by time, in order. */
async function partitionsWithin(table: string, from: Date, to: Date): Promise<Array<{ name: string; from: Date; to: Date }>> {
  // Every one is cut on ids as stored, uuids: attempts on delivery ids, the others on event ids.
  const timeOf = (bound: string) => uuidTime(bound)!;
  const rows: Array<{ name: string; lower_bound: string; upper_bound: string }> = await db('partition_bounds')
    .where({ parent: table })
    .whereNotNull('lower_bound')
    .whereNotNull('upper_bound')
    .select('name', 'lower_bound', 'upper_bound');
  return rows
    .map((r) => ({ name: r.name, from: timeOf(r.lower_bound), to: timeOf(r.upper_bound) }))
    .filter((p) => p.from >= from && p.to <= to)
    .sort((a, b) => a.from.getTime() - b.from.getTime());
}

/** The partitions of events, receipts and attempts that `make` created (audit_log's months aside). */
async function made(make: () => Promise<unknown>): Promise<string[]> {
  const names = () => db('partition_bounds').whereIn('parent', ['events', 'receipts', 'attempts']).pluck('name') as Promise<string[]>;
  const before = new Set(await names());
  await make();
  return (await names()).filter((n) => !before.has(n)).sort();
}

beforeAll(async () => {
  t = await startTestPlatform({ env: { RETENTION_DAYS: '60', DEAD_LETTER_RETENTION_DAYS: '60', MAX_EVENT_AGE_SECONDS: '86400' } });
  db = t.platform.db;
  // The tests run retention themselves, on the rows they back-date.
  await t.platform.retention.stop();
  const tenant = await t.createTenant('weekly');
  tenantId = tenant.id;
  sourceId = (await tenant.call('POST', '/v1/sources', { body: { type: 'standard-webhooks', name: 'old' } })).body.id;
  endpointId = (await tenant.call('POST', '/v1/endpoints', { body: { url: 'http://127.0.0.1:9/weekly' } })).body.id;
});
afterAll(async () => {
  await t?.stop();
});

describe('partitions a week long', () => {
  it('are named by their Monday, events and receipts on the same event-id bounds, attempts on delivery ids', async () => {
    const monday = mondayOf(plus(new Date(), 400));
    // From the Wednesday: the whole week is made.
    expect(await made(() => ensurePartitions(db, plus(monday, 2), plus(monday, 2.5), 'week'))).toEqual(['attempts', 'events', 'receipts'].map((table) => named(table, monday)));
    const bounds = await db('partition_bounds').whereIn('name', ['events', 'receipts', 'attempts'].map((table) => named(table, monday))).select('parent', 'lower_bound', 'upper_bound');
    expect(bounds.sort((a, b) => a.parent.localeCompare(b.parent))).toEqual([
      { parent: 'attempts', lower_bound: uuidFloor(monday), upper_bound: uuidFloor(plus(monday, 7)) },
      { parent: 'events', lower_bound: uuidFloor(monday), upper_bound: uuidFloor(plus(monday, 7)) },
      { parent: 'receipts', lower_bound: uuidFloor(monday), upper_bound: uuidFloor(plus(monday, 7)) },
    ]);
    // Made again, nothing is made.
    expect(await made(() => ensurePartitions(db, monday, plus(monday, 7), 'week'))).toEqual([]);
  });

  it('fill a week that days already began with its other days, and make the next week whole', async () => {
    const monday = mondayOf(plus(new Date(), 500));
    // Monday to Wednesday by day, as a process keeping fewer days made them.
    expect(await made(() => ensurePartitions(db, monday, plus(monday, 2.5), 'day'))).toHaveLength(9);
    // This week and the next, by week: Thursday to Sunday by day (4 × 3 tables), then one week (3).
    expect(await made(() => ensurePartitions(db, monday, plus(monday, 7.5), 'week'))).toHaveLength(15);
    for (const table of ['events', 'receipts', 'attempts']) {
      const made = await partitionsWithin(table, monday, plus(monday, 14));
      expect(made.map((p) => (p.to.getTime() - p.from.getTime()) / dayMs)).toEqual([1, 1, 1, 1, 1, 1, 1, 7]);
      // No gap, no overlap: each begins where the one before ends.
      expect(made[0]!.from).toEqual(monday);
      made.slice(1).forEach((p, i) => expect(p.from).toEqual(made[i]!.to));
      expect(made.at(-1)!.to).toEqual(plus(monday, 14));
    }
    // A process keeping fewer days again finds every day covered.
    expect(await made(() => ensurePartitions(db, monday, plus(monday, 14), 'day'))).toEqual([]);
  });

  it("hold each of their days' rows", async () => {
    const monday = mondayOf(plus(new Date(), 600));
    await ensurePartitions(db, monday, plus(monday, 1), 'week');
    const sunday = await insertOldEvent(db, { tenantId, sourceId, at: new Date(plus(monday, 7).getTime() - 1), dedupeKey: 'weekly-sunday', deliveries: [{ endpointId, status: 'succeeded' }] });
    const { rows } = await db.raw<{ rows: Array<{ partition: string }> }>('SELECT tableoid::regclass::text AS partition FROM events WHERE id = ?', [uuidOf('event', sunday.eventId)]);
    expect(rows).toEqual([{ partition: named('events', monday) }]);
  });

  it('refuses a period other than a day or a week, and a table not cut by time', async () => {
    await expect(db.raw("SELECT ensure_time_partitions_v2('events', now(), now() + interval '1 day', 'month')")).rejects.toThrow(/p_day_period must be day or week, not month/);
    await expect(db.raw("SELECT ensure_time_partitions_v2('deliveries', now(), now() + interval '1 day', 'day')")).rejects.toThrow(/deliveries is not a time-partitioned table/);
  });

  it('are dropped by retention once all of the week is past the window, and kept while part of it is not', async () => {
    // A window whose cutoff falls mid-week (Wednesday to Friday), days from either Monday, so that
    // the test's clock and PostgreSQL's cannot disagree about which week it falls in.
    const days = [60, 61, 62, 63, 64, 65, 66].find((n) => [2, 3, 4].includes((daysAgo(n).getUTCDay() + 6) % 7))!;
    const retention = new Retention({ db, policy: { ...defaultRetention, retentionDays: days, deadLetterRetentionDays: days }, logger: pino({ level: 'silent' }) });
    const straddling = mondayOf(daysAgo(days));
    const past = plus(straddling, -7);
    expect(await made(() => ensurePartitions(db, past, plus(straddling, 1), 'week'))).toHaveLength(6);
    const expired = await insertOldEvent(db, { tenantId, sourceId, at: plus(past, 3), dedupeKey: 'weekly-past', deliveries: [{ endpointId, status: 'succeeded' }] });
    // Older than the window, in a week that is not all older than it.
    const kept = await insertOldEvent(db, { tenantId, sourceId, at: straddling, dedupeKey: 'weekly-straddling', deliveries: [{ endpointId, status: 'succeeded' }] });

    const report = await eventually(() => retention.run({ dryRun: false }), 'the retention lock');
    expect(report.partitions).toEqual(expect.arrayContaining(['attempts', 'events', 'receipts'].map((table) => named(table, past))));
    expect(report.partitions).not.toEqual(expect.arrayContaining([named('events', straddling)]));
    // Events are stored under the uuid their TypeID encodes.
    const left: string[] = await db('events').whereIn('id', [expired.eventId, kept.eventId].map((id) => uuidOf('event', id))).pluck('id');
    expect(left.map((id) => idOfUuid('event', id))).toEqual([kept.eventId]);
    expect(await db('partition_bounds').whereIn('name', ['events', 'receipts'].map((table) => named(table, straddling))).pluck('name')).toHaveLength(2);
    // The keys went with their week, and only those.
    expect(await db('event_keys').whereIn('key', ['weekly-past', 'weekly-straddling']).pluck('key')).toEqual(['weekly-straddling']);
  });

  it("run in UTC whatever the session's time zone, with no hour between partitions across a change of daylight saving", async () => {
    const length = (p: { from: Date; to: Date }) => (p.to.getTime() - p.from.getTime()) / dayMs;
    // Berlin enters summer time on the last Sunday of March and leaves it on October's; three years
    // on, beyond every period the other tests make.
    const year = new Date().getUTCFullYear() + 3;
    const lastSunday = (month: number) => {
      const last = new Date(Date.UTC(year, month + 1, 0));
      return plus(last, -last.getUTCDay());
    };
    const autumn = mondayOf(lastSunday(9));
    const spring = plus(lastSunday(2), -1);
    await db.transaction(async (trx) => {
      await trx.raw("SET LOCAL TimeZone = 'Europe/Berlin'");
      for (const table of ['events', 'receipts', 'attempts']) {
        await trx.raw('SELECT ensure_time_partitions_v2(?, ?, ?, ?)', [table, autumn, plus(autumn, 8), 'week']);
        await trx.raw('SELECT ensure_time_partitions_v2(?, ?, ?, ?)', [table, spring, plus(spring, 2.5), 'day']);
      }
    });
    for (const table of ['events', 'receipts', 'attempts']) {
      const weeks = await partitionsWithin(table, autumn, plus(autumn, 14));
      expect(weeks.map(length)).toEqual([7, 7]);
      expect(weeks[0]!.from).toEqual(autumn);
      expect(weeks[1]!.from).toEqual(weeks[0]!.to);
      const days = await partitionsWithin(table, spring, plus(spring, 3));
      expect(days.map(length)).toEqual([1, 1, 1]);
      days.slice(1).forEach((p, i) => expect(p.from).toEqual(days[i]!.to));
    }
  });

  it("and the release before's function, which makes days, find each other's partitions", async () => {
    // Weeks first: 0.6.0's function finds every day of them covered.
    const weekFirst = mondayOf(plus(new Date(), 420));
    await ensurePartitions(db, weekFirst, plus(weekFirst, 1), 'week');
    expect(await made(() => db.raw('SELECT ensure_time_partitions(?, ?)', [weekFirst, plus(weekFirst, 7)]))).toEqual([]);
    // A Monday 0.6.0 made first: the rest of its week is made day by day.
    const dayFirst = mondayOf(plus(new Date(), 450));
    expect(await made(() => db.raw('SELECT ensure_time_partitions(?, ?)', [dayFirst, plus(dayFirst, 0.5)]))).toHaveLength(3);
    expect(await made(() => ensurePartitions(db, dayFirst, plus(dayFirst, 1), 'week'))).toHaveLength(18);
    const days = await partitionsWithin('events', dayFirst, plus(dayFirst, 7));
    expect(days.map((p) => p.from)).toEqual([0, 1, 2, 3, 4, 5, 6].map((n) => plus(dayFirst, n)));
  });

  it('are what retention makes ahead when it keeps 56 days or more; keeping fewer, it makes days', async () => {
    const length = (p: { from: Date; to: Date }) => (p.to.getTime() - p.from.getTime()) / dayMs;
    // Far ahead, where no partition is yet: the platform's retention keeps 60 days.
    const at = plus(new Date(), 700);
    await t.platform.retention.ensureAhead(at);
    const weeks = await partitionsWithin('events', mondayOf(plus(at, -1)), plus(mondayOf(plus(at, 8)), 7));
    expect(weeks.map(length)).toEqual(Array((mondayOf(plus(at, 8)).getTime() - mondayOf(plus(at, -1)).getTime()) / (7 * dayMs) + 1).fill(7));

    const keepingDefaults = new Retention({ db, policy: defaultRetention, logger: pino({ level: 'silent' }) });
    const later = plus(new Date(), 800);
    await keepingDefaults.ensureAhead(later);
    const days = await partitionsWithin('events', mondayOf(plus(later, -1)), plus(mondayOf(plus(later, 8)), 7));
    expect(days.map(length)).toEqual(Array(10).fill(1));
    expect(days[0]!.from.getTime()).toBeLessThanOrEqual(plus(later, -1).getTime());
    expect(days.at(-1)!.to.getTime()).toBeGreaterThan(plus(later, 8).getTime());
  });

  it('leave alone the partition holding rows from before partitioning, and begin where it ends', async () => {
    // As a database partitioned with rows already in it holds (migration 20261201000015):
    // everything before a midnight, here a Wednesday's, in one partition with no lower bound.
    const monday = mondayOf(daysAgo(300));
    const wednesday = plus(monday, 2);
    for (const [table, bound] of [['events', uuidFloor(wednesday)], ['receipts', uuidFloor(wednesday)], ['attempts', uuidFloor(wednesday)]]) {
      await db.raw(`CREATE TABLE ${table}_before_partitioning PARTITION OF ${table} FOR VALUES FROM (MINVALUE) TO ('${bound}')`);
    }
    expect(await made(() => ensurePartitions(db, monday, plus(monday, 1), 'week'))).toEqual(
      ['events', 'receipts', 'attempts'].flatMap((table) => [2, 3, 4, 5, 6].map((n) => named(table, plus(monday, n)))).sort(),
    );
    const events = await partitionsWithin('events', wednesday, plus(monday, 7));
    expect(events.map((p) => p.from)).toEqual([2, 3, 4, 5, 6].map((n) => plus(monday, n)));
  });
});
