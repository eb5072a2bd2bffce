import { readdirSync } from 'node:fs';
import type { Knex } from 'knex';
import { afterEach, describe, expect, it } from 'vitest';
import { idOfUuid, newId, uuidOf } from '../../src/domain/ids.js';
import { createDb, migrateLatest, migrationsDirectory } from '../../src/infra/db.js';
import { applyFunctionSources, readFunctionSources } from '../../src/infra/function-sources.js';
import { detachAndDrop, dropDetachedLeftoversBeforeMigrating, listPartitions } from '../../src/store/partitions-store.js';
import { typeIdFloor, uuidFloor } from '../../src/domain/retention.js';
import { publish } from '../helpers/api.js';
import { attemptsListed, createEmptyDatabase, type TestDatabase, sentBody, storedAttempt } from '../helpers/database.js';
import { schemaDump } from '../helpers/schema.js';
import { eventually, startTestPlatform } from '../helpers/platform.js';
import { standard } from '../helpers/providers.js';

/** Tables issue 2's data model requires; later migrations may add more. */
const requiredTables = ['tenants', 'api_keys', 'sources', 'endpoints', 'events', 'receipts', 'messages', 'deliveries', 'attempts', 'audit_log'];
const migrationFiles = readdirSync(migrationsDirectory).filter((f) => /^\d+_[a-z0-9_]+\.ts$/.test(f));
const functionFiles = readFunctionSources().map((f) => f.name);
/**
 * Contract steps that drop only functions their files created: with versioned migrations alone
 * there is nothing for them to drop, and they must change nothing. upgrade.test.ts sees them work.
 */
const dropsOnlyFileFunctions = [
  '20261203000043_drop_release_0_1_0_wrappers.ts',
  '20261204000047_drop_release_0_4_0_wrappers.ts',
  '20261205000050_drop_release_0_5_0_functions.ts',
];

/** Every relation, type and function in the public schema except knex's own bookkeeping. */
async function appObjects(db: Knex): Promise<string[]> {
  const { rows } = await db.raw<{ rows: Array<{ name: string }> }>(`
    SELECT c.relkind::text || ':' || c.relname AS name FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = 'public' AND c.relname NOT LIKE 'knex\\_migrations%'
    UNION ALL
    SELECT 'type:' || t.typname FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
     WHERE n.nspname = 'public' AND t.typtype IN ('e', 'd', 'c') AND t.typrelid = 0
    UNION ALL
    SELECT 'function:' || p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'public'
    ORDER BY 1`);
  return rows.map((r) => r.name);
}

async function tables(db: Knex): Promise<string[]> {
  const { rows } = await db.raw<{ rows: Array<{ table_name: string }> }>(
    "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' AND table_name NOT LIKE 'knex\\_migrations%' ORDER BY 1",
  );
  return rows.map((r) => r.table_name);
}

/** Columns, constraints, indexes, functions and storage options of the public schema: a cheap stand-in for pg_dump when run often. */
async function schemaFingerprint(db: Knex): Promise<string[]> {
  const { rows } = await db.raw<{ rows: Array<{ item: string }> }>(`
    SELECT 'column ' || table_name || '.' || column_name || ' ' || data_type || ' ' || is_nullable || ' ' || coalesce(column_default, '') AS item
      FROM information_schema.columns WHERE table_schema = 'public'
    UNION ALL
    SELECT 'constraint ' || conrelid::regclass::text || ' ' || conname || ' ' || pg_get_constraintdef(oid)
      FROM pg_constraint WHERE connamespace = 'public'::regnamespace
    UNION ALL
    SELECT 'index ' || indexdef FROM pg_indexes WHERE schemaname = 'public'
    UNION ALL
    SELECT 'function ' || p.oid::regprocedure::text || ' ' || md5(p.prosrc)
      FROM pg_proc p WHERE p.pronamespace = 'public'::regnamespace
    UNION ALL
    -- Sorted: an option set again by ALTER TABLE moves to the end of the list, which means nothing.
    SELECT 'options ' || c.relname || ' ' || (SELECT string_agg(o, ',' ORDER BY o) FROM unnest(c.reloptions) o)
      FROM pg_class c WHERE c.relnamespace = 'public'::regnamespace AND c.reloptions IS NOT NULL
    ORDER BY 1`);
  return rows.map((r) => r.item);
}

/**
 * Leaves `name` as a retention run that died inside DETACH ... CONCURRENTLY leaves a partition:
 * detach pending. The detach is cancelled while it waits for an older snapshot.
 */
async function leaveDetachPending(db: Knex, url: string, parent: string, name: string): Promise<void> {
  const holder = createDb({ url, poolMax: 2, timeoutMs: 30_000 });
  try {
    await holder.transaction(async (trx) => {
      await trx.raw('SET TRANSACTION ISOLATION LEVEL REPEATABLE READ');
      await trx.raw(`SELECT count(*) FROM ${parent}`);
      const detach = holder.raw(`ALTER TABLE ${parent} DETACH PARTITION ${name} CONCURRENTLY`).catch((err: { code?: string }) => err.code);
      await eventually(async () => (await db.raw('SELECT 1 FROM pg_inherits WHERE inhrelid = to_regclass(?) AND inhdetachpending', [name])).rows.length > 0, 'detach pending');
      await db.raw(
        `SELECT pg_cancel_backend(pid) FROM pg_stat_activity
          WHERE datname = current_database() AND query LIKE 'ALTER TABLE ${parent} DETACH PARTITION%' AND pid <> pg_backend_pid()`,
      );
      expect(await detach).toBe('57014');
    });
  } finally {
    await holder.destroy();
  }
}

describe('migrations', () => {
  const cleanup: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const c of cleanup.splice(0)) await c();
  });

  async function emptyDatabase(): Promise<{ database: TestDatabase; db: Knex }> {
    const database = await createEmptyDatabase();
    const db = createDb({ url: database.url, poolMax: 2, timeoutMs: 30_000 });
    cleanup.push(async () => {
      await db.destroy();
      await database.drop();
    });
    return { database, db };
  }

  it('latest creates every table, rollback of all leaves nothing behind, and latest works again to the same schema', async () => {
    const { database, db } = await emptyDatabase();
    expect(await appObjects(db)).toEqual([]);

    await migrateLatest(db);
    expect(await tables(db)).toEqual(expect.arrayContaining(requiredTables));
    const [completed] = await db.migrate.list();
    expect(completed).toHaveLength(migrationFiles.length);
    const firstSchema = await schemaDump(database);

    await db.migrate.rollback(undefined, true);
    expect(await appObjects(db)).toEqual([]);
    expect((await db.migrate.list())[0]).toHaveLength(0);

    await migrateLatest(db);
    expect(await schemaDump(database)).toEqual(firstSchema);
    // Running latest again is a no-op, not an error.
    await migrateLatest(db);
    expect((await db.migrate.list())[0]).toHaveLength(migrationFiles.length);
  });

  // Every migration runs three times, so this grows with their number: 29–32 s on a slow host at 55.
  it('each migration goes down and up again on its own, newest first', { timeout: 120_000 }, async () => {
    // Versioned migrations only: the functions each one leaves are part of what it is held to.
    // The sources in db/functions replace them afterwards and are compared at the end.
    const { db } = await emptyDatabase();
    await db.migrate.latest();
    const full = await schemaFingerprint(db);
    const newestFirst = [...migrationFiles].sort().reverse();
    for (let i = migrationFiles.length; i > 0; i--) {
      const before = await schemaFingerprint(db);
      await db.migrate.down();
      expect((await db.migrate.list())[0]).toHaveLength(i - 1);
      const after = await schemaFingerprint(db);
      if (dropsOnlyFileFunctions.includes(newestFirst[migrationFiles.length - i]!)) expect(after).toEqual(before);
      else expect(after).not.toEqual(before); // every other migration changes something
      await db.migrate.up();
      expect(await schemaFingerprint(db)).toEqual(before);
      await db.migrate.down();
    }
    expect(await appObjects(db)).toEqual([]);
    await db.migrate.latest();
    expect(await schemaFingerprint(db)).toEqual(full);

    // Then the function sources, as migrate applies them: the same schema as a fresh install.
    const fresh = await emptyDatabase();
    await migrateLatest(fresh.db);
    const installed = await schemaFingerprint(fresh.db);
    expect(installed).not.toEqual(full); // the files are not the migrations' text, so this compares something
    expect(await migrateLatest(db)).toEqual(functionFiles);
    expect(await schemaFingerprint(db)).toEqual(installed);
  });

  it("each id migration's down gives back the schema the migrations before it made", async () => {
    // The ids' downs make tables again by hand (a partitioned parent cannot change its key's type):
    // each must leave what a database never migrated past it has, column types and collations included.
    const idMigrations = migrationFiles.filter((f) => /_((endpoint|delivery|tenant|event)_ids_as_uuid|narrower_attempts)\.ts$/.test(f)).sort();
    expect(idMigrations).toHaveLength(5);
    const bare = (name: string) => name.replace(/\.ts$/, '');
    const last = async (db: Knex) => bare((await db.migrate.list())[0].map((m: string | { name: string }) => (typeof m === 'string' ? m : m.name)).at(-1)!);
    // Up, one migration at a time: the schema below each id migration, and below the next.
    const { db: up } = await emptyDatabase();
    const below = new Map<string, string[]>();
    while ((await up.migrate.list())[1].length > 0) {
      const next = (await up.migrate.list())[1][0] as string | { file: string };
      const name = bare(typeof next === 'string' ? next : next.file);
      if (idMigrations.map(bare).includes(name)) below.set(name, await schemaFingerprint(up));
      await up.migrate.up();
    }
    const { db: down } = await emptyDatabase();
    await down.migrate.latest();
    for (const migration of [...idMigrations].reverse()) {
      await down.migrate.down();
      expect(await last(down)).toBe(bare(migrationFiles.filter((f) => f < migration).sort().at(-1)!));
      expect({ migration, schema: await schemaFingerprint(down) }).toEqual({ migration, schema: below.get(bare(migration)) });
    }
  }, 120_000);

  it('rolls back cleanly with data in every table', async () => {
    const t = await startTestPlatform();
    cleanup.push(() => t.stop()); // stopping twice is safe; this also drops the database
    const tenant = await t.createTenant('data');
    const source = await tenant.call('POST', '/v1/sources', { body: { type: 'standard-webhooks', name: 's' } });
    await tenant.call('POST', '/v1/endpoints', { body: { url: 'http://127.0.0.1:9/never-reached', eventTypes: ['only.this'] } });
    const disabled = await tenant.call('POST', '/v1/endpoints', { body: { url: 'http://127.0.0.1:9/off' } });
    await tenant.call('PATCH', `/v1/endpoints/${disabled.body.id}`, { body: { status: 'disabled' } });
    await publish(tenant, { type: 'order.created', messageId: 'm1' }, 'k1');
    const body = JSON.stringify({ type: 'order.paid', data: {} });
    expect((await t.call('POST', `/inbound/${source.body.id}`, { rawBody: body, headers: standard.headers(source.body.secret, 'msg_1', body) })).status).toBe(200);
    await t.platform.stop();

    const db = createDb({ url: t.database.url, poolMax: 2, timeoutMs: 30_000 });
    try {
      for (const table of ['tenants', 'api_keys', 'sources', 'endpoints', 'events', 'receipts', 'messages', 'deliveries', 'audit_log']) {
        expect({ table, rows: Number((await db(table).count({ n: '*' }))[0]!.n) > 0 }).toEqual({ table, rows: true });
      }
      // Events stored without their envelope, as releases after 0.3.0 store them: one with data, one without.
      const at = '2026-12-04T10:00:00.123Z';
      const [withData, withoutData] = [newId('event'), newId('event')];
      const item = (eventId: string, data?: string) => ({
        event_id: uuidOf('event', eventId), envelope_id: eventId, delivery_ids: [uuidOf('delivery', newId('delivery')), uuidOf('delivery', newId('delivery'))], tenant_id: uuidOf('tenant', tenant.id), origin: 'api', type: 'rollback.kept',
        message_id: null, idempotency_key: null, request_hash: null, ...(data === undefined ? {} : { data }), created_at: at, trace_parent: null,
      });
      await db.raw('SELECT * FROM publish_events(?::jsonb, 86400)', [JSON.stringify([item(withData, '{"n": 1.50}'), item(withoutData)])]);
      expect(await db('events').whereIn('id', [withData, withoutData].map((id) => uuidOf('event', id))).whereNull('body').count({ n: '*' })).toEqual([{ n: 2 }]);
      // Below events.data, every event has its body stored again: the bytes it was sent as, under
      // the TypeID it is stored as again below migration 20261206000055.
      const sent = (await db('events').orderBy('id').select('id', sentBody(db))).map((r: { id: string; body: string }) => ({ ...r, id: idOfUuid('event', r.id) }));
      const completed = async () => (await db.migrate.list())[0].map((m: string | { name: string }) => (typeof m === 'string' ? m : m.name));
      // A first try folded into its delivery, as releases after 0.4.0 store one: below
      // deliveries' first_try columns it is an attempts row again, under the id it was listed by.
      // Stored as a uuid until migration 20261206000053 goes down, a TypeID again after.
      const stored = (await db('deliveries').orderBy('id').first('id'))!.id as string;
      const folded = idOfUuid('delivery', stored);
      const startedAt = new Date('2026-12-04T10:00:01.250Z');
      await db('deliveries').where({ id: stored }).update({ first_try_started_at: startedAt, first_try_duration_ms: 42, first_try_status_code: 204, first_try_excerpt: 'done' });
      const listed = await db.raw<{ rows: Array<{ id: string; delivery_id: string }> }>('SELECT * FROM delivery_attempts(?)', [stored]);
      expect(listed.rows.map((r) => r.delivery_id)).toEqual([stored]);
      while ((await completed()).some((name: string) => name.startsWith('20261204000045_'))) await db.migrate.down();
      // The row below 045 is the attempt as listed, its id the TypeID the API names it by.
      expect(await db('attempts').where({ delivery_id: folded }).select('*')).toEqual(
        listed.rows.map((r) => ({ ...r, id: idOfUuid('attempt', r.id), delivery_id: folded, tenant_id: null })),
      );
      expect(listed.rows).toEqual([
        expect.objectContaining({ id: stored, attempt_number: 1, trigger: 'initial', started_at: startedAt, duration_ms: 42, status_code: 204, outcome: 'success', response_excerpt: 'done', error_class: null }),
      ]);
      expect(idOfUuid('attempt', listed.rows[0]!.id)).toBe(`att_${folded.slice('dlv_'.length)}`);
      while ((await completed()).some((name: string) => name.startsWith('20261204000044_'))) await db.migrate.down();
      expect(await db('events').orderBy('id').select('id', 'body')).toEqual(sent);
      expect(await db('events').whereIn('id', [withData, withoutData]).orderBy('id').pluck('body')).toEqual(
        [
          `{"id":"${withData}","type":"rollback.kept","timestamp":"${at}","messageId":null,"data":{"n": 1.50}}`,
          `{"id":"${withoutData}","type":"rollback.kept","timestamp":"${at}","messageId":null}`,
        ].sort(),
      );
      await db.migrate.rollback(undefined, true);
      expect(await appObjects(db)).toEqual([]);
      await migrateLatest(db);
      expect(await tables(db)).toEqual(expect.arrayContaining(requiredTables));
    } finally {
      await db.destroy();
    }
  });

  it('finds attempts by delivery through one index, valid and on every partition of attempts, new ones included', async () => {
    const { db } = await emptyDatabase();
    await migrateLatest(db);
    // Partitions of a day the retention schedule would create next month: made after the migration ran.
    await db.raw("SELECT ensure_time_partitions(now() + interval '40 days', now() + interval '42 days')");
    const { rows } = await db.raw<{ rows: Array<{ partition: string; index: string | null; valid: boolean | null }> }>(`
      SELECT c.relname AS partition, ix.relname AS index, x.indisvalid AS valid
        FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
        LEFT JOIN (pg_inherits ii JOIN pg_class ix ON ix.oid = ii.inhrelid JOIN pg_index x ON x.indexrelid = ix.oid)
               ON ii.inhparent = 'attempts_delivery'::regclass AND x.indrelid = c.oid
       WHERE i.inhparent = 'attempts'::regclass ORDER BY 1`);
    expect(rows.length).toBeGreaterThan(3);
    expect(rows.filter((r) => r.index === null || r.valid !== true)).toEqual([]);
    const parent = await db.raw<{ rows: Array<{ valid: boolean; def: string }> }>(
      "SELECT x.indisvalid AS valid, pg_get_indexdef(x.indexrelid) AS def FROM pg_index x WHERE x.indexrelid = 'attempts_delivery'::regclass",
    );
    expect(parent.rows[0]).toEqual({ valid: true, def: expect.stringContaining('(delivery_id)') });
    const keys = await db.raw<{ rows: unknown[] }>("SELECT 1 FROM pg_constraint WHERE conrelid = 'attempts'::regclass AND contype = 'p'");
    expect(keys.rows).toEqual([]);
  });

  it('stores endpoint ids as the uuid their TypeID encodes, and gives every one back exactly on the way down', async () => {
    const { db } = await emptyDatabase();
    await migrateLatest(db);
    for (let i = 0; i < 5; i++) await db.migrate.down();
    expect((await db.migrate.list())[1]).toEqual([
      '20261206000052_endpoint_ids_as_uuid.ts', '20261206000053_delivery_ids_as_uuid.ts', '20261206000054_tenant_ids_as_uuid.ts', '20261206000055_event_ids_as_uuid.ts',
      '20261207000056_narrower_attempts.ts',
    ]);
    // The extremes of the 128 bits, and ids made now, each with a delivery (the queue's trigger copies it).
    const ids = ['ep_00000000000000000000000000', 'ep_7zzzzzzzzzzzzzzzzzzzzzzzzz', ...Array.from({ length: 200 }, () => newId('endpoint'))];
    await db('tenants').insert({ id: 'ten_1', name: 't' });
    await db('endpoints').insert(ids.map((id) => ({ id, tenant_id: 'ten_1', url: 'https://x.example.com', max_concurrency: 1, secret_enc: 'v1:x' })));
    await db('deliveries').insert(
      ids.map((endpointId) => ({ id: newId('delivery'), tenant_id: 'ten_1', event_id: newId('event'), endpoint_id: endpointId, status: 'pending', deadline_at: new Date(Date.now() + 3_600_000) })),
    );
    const stored = async () => ({
      endpoints: (await db('endpoints').orderBy('id').pluck('id')) as string[],
      deliveries: (await db('deliveries').orderBy('endpoint_id').pluck('endpoint_id')) as string[],
      queue: (await db('delivery_queue').orderBy('endpoint_id').pluck('endpoint_id')) as string[],
    });
    const sorted = [...ids].sort();

    await db.migrate.up();
    const asUuid = sorted.map((id) => uuidOf('endpoint', id));
    // The same order too: a uuid sorts as its TypeID does, so pages and admission walk endpoints alike.
    expect(await stored()).toEqual({ endpoints: asUuid, deliveries: asUuid, queue: asUuid });
    expect([asUuid[0], asUuid.at(-1)]).toEqual(['00000000-0000-0000-0000-000000000000', 'ffffffff-ffff-ffff-ffff-ffffffffffff']);
    // What the runbook's queries show an operator: the TypeID the API names the endpoint by.
    const named = await db('endpoints').orderBy('id').select(db.raw("typeid_of('ep', id) AS typeid"));
    expect(named.map((r: { typeid: string }) => r.typeid)).toEqual(sorted);

    await db.migrate.down();
    expect(await stored()).toEqual({ endpoints: sorted, deliveries: sorted, queue: sorted });
  });

  it('stores delivery ids as the uuid their TypeID encodes, attempts on the same bounds, and gives every one back on the way down', async () => {
    const { database, db } = await emptyDatabase();
    await migrateLatest(db);
    for (let i = 0; i < 4; i++) await db.migrate.down();
    expect((await db.migrate.list())[1]).toEqual([
      '20261206000053_delivery_ids_as_uuid.ts', '20261206000054_tenant_ids_as_uuid.ts', '20261206000055_event_ids_as_uuid.ts', '20261207000056_narrower_attempts.ts',
    ]);
    await db('tenants').insert({ id: 'ten_1', name: 't' });
    const endpointId = uuidOf('endpoint', newId('endpoint'));
    await db('endpoints').insert({ id: endpointId, tenant_id: 'ten_1', url: 'https://x.example.com', max_concurrency: 1, secret_enc: 'v1:x' });
    // The extremes of the 128 bits, and ids made now: half of them waiting (with a queue row), half
    // succeeded, each of those with an attempt in today's partition and its first try in the row.
    const made = Array.from({ length: 200 }, () => newId('delivery'));
    const ids = ['dlv_00000000000000000000000000', 'dlv_7zzzzzzzzzzzzzzzzzzzzzzzzz', ...made];
    await db('deliveries').insert(
      ids.map((id, i) => ({
        id, tenant_id: 'ten_1', event_id: newId('event'), endpoint_id: endpointId, status: i % 2 ? 'succeeded' : 'pending', deadline_at: new Date(Date.now() + 3_600_000),
        ...(i % 2 ? { first_try_started_at: new Date(), first_try_duration_ms: 5, first_try_status_code: 200 } : {}),
      })),
    );
    await db('attempts').insert(made.map((id) => ({ id: newId('attempt'), delivery_id: id, attempt_number: 2, trigger: 'retry', started_at: new Date(), duration_ms: 9, outcome: 'retry' })));
    // A partition whose detach retention began and never finished: a DETACH ... CONCURRENTLY
    // cancelled while it waits for an older snapshot.
    const pending = 'attempts_p20991231';
    await db.raw(`CREATE TABLE ${pending} PARTITION OF attempts FOR VALUES FROM ('dlv_04000000000000000000000000') TO ('dlv_04000000010000000000000000')`);
    await leaveDetachPending(db, database.url, 'attempts', pending);
    // And one detached whole but not dropped (a retention run that died between the two): it keeps
    // its own foreign key to deliveries.id, which no migration can convert to another type.
    const leftover = 'attempts_p20991230';
    await db.raw(`CREATE TABLE ${leftover} PARTITION OF attempts FOR VALUES FROM ('dlv_04000000020000000000000000') TO ('dlv_04000000030000000000000000')`);
    await db.raw(`ALTER TABLE attempts DETACH PARTITION ${leftover}`);
    const stored = async () => ({
      deliveries: (await db('deliveries').orderBy('id').pluck('id')) as string[],
      queue: (await db('delivery_queue').orderBy('delivery_id').pluck('delivery_id')) as string[],
      attempts: (await db('attempts').orderBy('delivery_id').pluck('delivery_id')) as string[],
    });
    const bounds = async () =>
      (await db.raw("SELECT name, lower_bound, upper_bound FROM partition_bounds WHERE parent = 'attempts' AND NOT detach_pending ORDER BY name")).rows as Array<{ name: string; lower_bound: string | null; upper_bound: string }>;
    const before = { rows: await stored(), bounds: await bounds() };
    expect(before.rows.queue).toHaveLength(101);

    await expect(db.migrate.up()).rejects.toThrow(/cannot be implemented/);
    // So `migrate` drops it first, as retention's next run would have.
    expect(await dropDetachedLeftoversBeforeMigrating(db)).toEqual([leftover]);
    await db.migrate.up();
    await applyFunctionSources(db);
    const asUuid = (list: string[]) => list.map((id) => uuidOf('delivery', id));
    // The same order too: a uuid sorts as its TypeID does, so pages, retention's ranges and partitions agree.
    expect(await stored()).toEqual({ deliveries: asUuid(before.rows.deliveries), queue: asUuid(before.rows.queue), attempts: asUuid(before.rows.attempts) });
    expect(await bounds()).toEqual(
      before.bounds.map((b) => ({ name: b.name, lower_bound: b.lower_bound && uuidOf('delivery', b.lower_bound), upper_bound: uuidOf('delivery', b.upper_bound) })),
    );
    expect((await db.raw('SELECT to_regclass(?) AS t', [pending])).rows[0].t).toBeNull();
    // How a first try stored in its delivery is named is held where attempts are listed as they
    // are stored since 20261207000056 (its test, below).
    // New partitions are cut on each table's key as it is stored: uuids for attempts only.
    await db.raw("SELECT ensure_time_partitions_v2('attempts', now() + interval '30 days', now() + interval '31 days', 'day')");
    const at = new Date(Date.now() + 30 * 86_400_000);
    const floors = { events: typeIdFloor('evt', at), receipts: typeIdFloor('evt', at), attempts: uuidFloor(at), audit_log: typeIdFloor('aud', at) };
    for (const [table, floor] of Object.entries(floors)) {
      const { rows } = await db.raw('SELECT partition_floor(p, ?::timestamptz) AS floor FROM partition_plan p WHERE table_name = ?', [at, table]);
      expect(rows[0].floor, table).toBe(floor);
    }
    const day = new Date(Math.floor(at.getTime() / 86_400_000) * 86_400_000);
    expect((await bounds()).find((b) => b.lower_bound === uuidFloor(day))?.upper_bound).toBe(uuidFloor(new Date(day.getTime() + 86_400_000)));

    await db.migrate.down();
    const after = await stored();
    expect(after).toEqual(before.rows);
    expect((await bounds()).filter((b) => before.bounds.some((o) => o.name === b.name))).toEqual(before.bounds);
  });

  it('stores tenant ids as the uuid their TypeID encodes in every table, and gives every one back on the way down', async () => {
    const t = await startTestPlatform();
    cleanup.push(() => t.stop());
    const tenant = await t.createTenant('ids');
    const source = await tenant.call('POST', '/v1/sources', { body: { type: 'standard-webhooks', name: 's' } });
    await tenant.call('POST', '/v1/endpoints', { body: { url: 'http://127.0.0.1:9/never-reached' } });
    await publish(tenant, { type: 'order.created', messageId: 'm1' }, 'idem-1');
    const body = JSON.stringify({ type: 'order.paid', data: {} });
    expect((await t.call('POST', `/inbound/${source.body.id}`, { rawBody: body, headers: standard.headers(source.body.secret, 'msg_1', body) })).status).toBe(200);
    expect((await tenant.call('POST', '/v1/portal-sessions', { body: {} })).status).toBe(201);
    await t.platform.stop();

    const db = createDb({ url: t.database.url, poolMax: 2, timeoutMs: 30_000 });
    try {
      const key = uuidOf('tenant', tenant.id);
      // Rows no call above writes: a replay, an attempt that names its tenant (as releases before
      // 0.3.0 wrote them), and tenants at the extremes of the 128 bits.
      await db('replays').insert({ id: newId('replay'), tenant_id: key, actor_type: 'system', reason: 'r', filter: '{}', total: 0 });
      const delivery = (await db('deliveries').first('id'))!.id as string;
      await db('attempts').insert(storedAttempt(db, { id: newId('attempt'), delivery_id: delivery, tenant_id: key, attempt_number: 2, trigger: 'retry', started_at: new Date(), duration_ms: 1, outcome: 'retry' }));
      const extremes = ['ten_00000000000000000000000000', 'ten_7zzzzzzzzzzzzzzzzzzzzzzzzz'];
      await db('tenants').insert(extremes.map((id, i) => ({ id: uuidOf('tenant', id), name: `edge ${i}` })));
      const tables = ['api_keys', 'sources', 'endpoints', 'events', 'receipts', 'deliveries', 'delivery_queue', 'attempts', 'messages', 'replays', 'audit_log', 'portal_sessions'];
      const stored = async () => {
        const byTable: Record<string, string[]> = { tenants: (await db('tenants').orderBy('id').pluck('id')) as string[] };
        for (const table of tables) byTable[table] = [...new Set((await db(table).whereNotNull('tenant_id').pluck('tenant_id')) as string[])];
        return byTable;
      };
      const scopes = async () => (await db('event_keys').orderBy('key').select('scope_id', 'key')) as Array<{ scope_id: string; key: string }>;
      const asUuid = await stored();
      const scopesAsUuid = await scopes();
      // Every table holds rows of the tenant, and its idempotency key is scoped by its uuid's text.
      expect(asUuid).toEqual({ tenants: [uuidOf('tenant', extremes[0]!), key, uuidOf('tenant', extremes[1]!)], ...Object.fromEntries(tables.map((table) => [table, [key]])) });
      expect(scopesAsUuid).toEqual([{ scope_id: key, key: 'idem-1' }, { scope_id: source.body.id, key: 'msg_1' }]);

      for (let i = 0; i < 3; i++) await db.migrate.down();
      expect((await db.migrate.list())[1]).toEqual(['20261206000054_tenant_ids_as_uuid.ts', '20261206000055_event_ids_as_uuid.ts', '20261207000056_narrower_attempts.ts']);
      expect(await stored()).toEqual(Object.fromEntries(Object.entries(asUuid).map(([table, ids]) => [table, ids.map((id) => idOfUuid('tenant', id))])));
      expect(await scopes()).toEqual(scopesAsUuid.map((s) => ({ ...s, scope_id: s.scope_id === key ? tenant.id : s.scope_id })));
      // Partitions a retention run left detach pending, each holding a row of the tenant: ALTER TABLE
      // on their parents skips them, and their foreign keys to tenants must not hold the conversion
      // up. 055 drops the events one, as retention would; audit_log's waits for retention.
      const pendingEvents = 'events_p20991231';
      const pendingAudit = 'audit_log_p209912';
      await db.raw(`CREATE TABLE ${pendingEvents} PARTITION OF events FOR VALUES FROM ('evt_04000000000000000000000000') TO ('evt_04000000010000000000000000')`);
      await db.raw(`CREATE TABLE ${pendingAudit} PARTITION OF audit_log FOR VALUES FROM ('aud_04000000000000000000000000') TO ('aud_04000000010000000000000000')`);
      await db('events').insert({ id: 'evt_04000000000000000000000001', tenant_id: tenant.id, origin: 'api', type: 'order.created', data: '{}' });
      await db('audit_log').insert({ id: 'aud_04000000000000000000000001', tenant_id: tenant.id, actor_type: 'system', action: 'a', target_type: 't', target_id: 'x' });
      await leaveDetachPending(db, t.database.url, 'events', pendingEvents);
      await leaveDetachPending(db, t.database.url, 'audit_log', pendingAudit);

      await db.migrate.up();
      // stored() reads events and audit_log through their parents: the pending rows are not seen.
      expect(await stored()).toEqual(asUuid);
      expect(await scopes()).toEqual(scopesAsUuid);
      const columnType = async (table: string) =>
        (await db.raw("SELECT atttypid::regtype::text AS type FROM pg_attribute WHERE attrelid = to_regclass(?) AND attname = 'tenant_id'", [table])).rows[0]?.type as string | undefined;
      // Both pending partitions keep their text column and their row.
      expect({ events: await columnType(pendingEvents), audit: await columnType(pendingAudit) }).toEqual({ events: 'text', audit: 'text' });
      expect({ events: await db(pendingEvents).pluck('tenant_id'), audit: await db(pendingAudit).pluck('tenant_id') }).toEqual({ events: [tenant.id], audit: [tenant.id] });
      // The tenant's rows still go with it: every foreign key to tenants is back, cascading.
      await db('tenants').where({ id: key }).delete();
      for (const table of ['api_keys', 'sources', 'endpoints', 'events', 'receipts', 'messages', 'replays', 'audit_log', 'portal_sessions']) {
        expect({ table, left: Number((await db(table).count({ n: '*' }))[0]!.n) }).toEqual({ table, left: 0 });
      }
      // 055 rebuilds events and finishes its pending detach first, as retention would have, and
      // audit_log's is left to retention's next run.
      await db.migrate.up();
      await applyFunctionSources(db);
      expect({ events: await columnType(pendingEvents), audit: await columnType(pendingAudit) }).toEqual({ events: undefined, audit: 'text' });
      const stillPending = (await listPartitions(db)).filter((p) => p.detachPending);
      expect(stillPending.map((p) => p.name)).toEqual([pendingAudit]);
      await detachAndDrop(db, stillPending[0]!);
      expect(await columnType(pendingAudit)).toBeUndefined();
    } finally {
      await db.destroy();
    }
  });

  it('stores event ids as the uuid their TypeID encodes, events and receipts on the same bounds, and gives every one back on the way down', async () => {
    const t = await startTestPlatform();
    cleanup.push(() => t.stop());
    const tenant = await t.createTenant('events');
    const source = await tenant.call('POST', '/v1/sources', { body: { type: 'standard-webhooks', name: 's' } });
    const endpoint = await tenant.call('POST', '/v1/endpoints', { body: { url: 'http://127.0.0.1:9/never-reached' } });
    const published = await publish(tenant, { type: 'order.created', messageId: 'm1' }, 'idem-1');
    const body = JSON.stringify({ type: 'order.paid', data: { amount: 1.50 } });
    const inbound = await t.call('POST', `/inbound/${source.body.id}`, { rawBody: body, headers: standard.headers(source.body.secret, 'msg_1', body) });
    expect(inbound.status).toBe(200);
    const test = await tenant.call('POST', `/v1/endpoints/${endpoint.body.id}/test`, { body: {} });
    expect(test.status).toBe(202);
    const eventIds = [published, inbound.body.eventId, test.body.eventId] as string[];
    await t.platform.stop();

    const db = createDb({ url: t.database.url, poolMax: 2, timeoutMs: 30_000 });
    try {
      // What each event is sent as, read while the functions that build it are there.
      const sent = await db('events').orderBy('id').select('id', sentBody(db));
      expect(sent.map((r: { id: string }) => idOfUuid('event', r.id)).sort()).toEqual([...eventIds].sort());
      const stored = async () => ({
        events: (await db('events').orderBy('id').pluck('id')) as string[],
        tests: (await db('events').whereNotNull('test_endpoint_id').pluck('test_endpoint_id')) as string[],
        receipts: (await db('receipts').orderBy('event_id').pluck('event_id')) as string[],
        deliveries: (await db('deliveries').orderBy('event_id').pluck('event_id')) as string[],
        keys: (await db('event_keys').orderBy('event_id').pluck('event_id')) as string[],
        messages: (await db('messages').orderBy('last_event_id').pluck('last_event_id')) as string[],
      });
      const bounds = async () =>
        (await db.raw("SELECT parent, name, lower_bound, upper_bound FROM partition_bounds WHERE parent IN ('events', 'receipts') ORDER BY name")).rows as Array<{
          parent: string; name: string; lower_bound: string | null; upper_bound: string;
        }>;
      // What the rebuild drops and makes again: the foreign keys to and from the tables, and the sequence's owner.
      const dependents = async () =>
        (await db.raw(`
          SELECT conrelid::regclass::text || ' ' || pg_get_constraintdef(oid) AS item FROM pg_constraint
           WHERE contype = 'f' AND conparentid = 0 AND (conrelid IN ('events'::regclass, 'receipts'::regclass) OR confrelid = 'events'::regclass)
          UNION ALL
          SELECT 'sequence ' || d.refobjid::regclass::text || '.' || a.attname FROM pg_depend d
            JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid
           WHERE d.objid = 'events_seq_seq'::regclass AND d.deptype = 'a'
          ORDER BY 1`)).rows.map((r: { item: string }) => r.item);
      const expectedDependents = [
        'events FOREIGN KEY (source_id) REFERENCES sources(id) ON DELETE CASCADE',
        'events FOREIGN KEY (tenant_id) REFERENCES tenants(id) ON DELETE CASCADE',
        'receipts FOREIGN KEY (event_id) REFERENCES events(id) ON DELETE CASCADE',
        'sequence events.seq',
      ];
      expect(await dependents()).toEqual(expectedDependents);
      const asUuid = await stored();
      const uuidBounds = await bounds();
      expect(asUuid.tests).toEqual([uuidOf('endpoint', endpoint.body.id)]);
      expect(Object.values(asUuid).every((ids) => ids.length > 0)).toBe(true);

      await db.migrate.down();
      await db.migrate.down();
      expect((await db.migrate.list())[1]).toEqual(['20261206000055_event_ids_as_uuid.ts', '20261207000056_narrower_attempts.ts']);
      const asTypeId = (ids: string[], kind: 'event' | 'endpoint' = 'event') => ids.map((id) => idOfUuid(kind, id));
      // The same order too: a uuid sorts as its TypeID does.
      expect(await stored()).toEqual({ ...Object.fromEntries(Object.entries(asUuid).map(([k, ids]) => [k, asTypeId(ids)])), tests: asTypeId(asUuid.tests, 'endpoint') });
      expect(await bounds()).toEqual(uuidBounds.map((b) => ({ ...b, lower_bound: b.lower_bound && idOfUuid('event', b.lower_bound), upper_bound: idOfUuid('event', b.upper_bound) })));
      // event_body(events) goes with the table's row type: every event's body is stored first, the
      // bytes it was sent as, so that the release below (and migration 044's down) has them.
      expect(await db('events').orderBy('id').select('id', 'body')).toEqual(sent.map((r: { id: string; body: string }) => ({ id: idOfUuid('event', r.id), body: r.body })));
      expect(await dependents()).toEqual(expectedDependents);

      await db.migrate.up();
      expect(await stored()).toEqual(asUuid);
      expect(await bounds()).toEqual(uuidBounds);
      expect(await dependents()).toEqual(expectedDependents);
      // Every partition's indexes are the parent's again, valid, and the keys hold.
      const { rows: detachedIndexes } = await db.raw(`
        SELECT c.relname FROM pg_index x JOIN pg_class c ON c.oid = x.indexrelid JOIN pg_inherits i ON i.inhrelid = x.indrelid
         WHERE i.inhparent IN ('events'::regclass, 'receipts'::regclass)
           AND (NOT x.indisvalid OR NOT EXISTS (SELECT 1 FROM pg_inherits p WHERE p.inhrelid = x.indexrelid))`);
      expect(detachedIndexes).toEqual([]);
      const violation = (p: Promise<unknown>) => p.then(() => 'inserted', (err: { code?: string }) => err.code);
      expect(await violation(db('receipts').insert({ id: newId('receipt'), tenant_id: uuidOf('tenant', tenant.id), source_id: source.body.id, event_id: uuidOf('event', newId('event')), outcome: 'accepted', origin: 'callback', body_digest: 'x' }))).toBe('23503');
      const receiptsOf = async (id: string) => Number((await db('receipts').where({ event_id: id }).count({ n: '*' }))[0]!.n);
      const [received] = asUuid.receipts;
      expect(await receiptsOf(received!)).toBe(1);
      await db('events').where({ id: received }).delete();
      expect(await receiptsOf(received!)).toBe(0);
    } finally {
      await db.destroy();
    }
  });

  it('stores attempt ids as the uuid their TypeID encodes and trigger and outcome as codes, in narrower rows, and gives every one back on the way down', async () => {
    const { database, db } = await emptyDatabase();
    await migrateLatest(db);
    await db.migrate.down();
    expect((await db.migrate.list())[1]).toEqual(['20261207000056_narrower_attempts.ts']);
    const tenant = uuidOf('tenant', newId('tenant'));
    await db('tenants').insert({ id: tenant, name: 't' });
    const endpoint = uuidOf('endpoint', newId('endpoint'));
    await db('endpoints').insert({ id: endpoint, tenant_id: tenant, url: 'https://x.example.com', max_concurrency: 1, secret_enc: 'v1:x' });
    // One delivery whose first try is stored in it, one with a row for each of its attempts.
    const [folded, retried] = [newId('delivery'), newId('delivery')].map((id) => uuidOf('delivery', id));
    await db('deliveries').insert(
      [folded!, retried!].map((id) => ({
        id, tenant_id: tenant, event_id: uuidOf('event', newId('event')), endpoint_id: endpoint, status: 'succeeded', deadline_at: new Date(Date.now() + 3_600_000),
        ...(id === folded ? { first_try_started_at: new Date('2026-12-07T08:00:00.500Z'), first_try_duration_ms: 5, first_try_status_code: 200 } : {}),
      })),
    );
    // Every trigger with every outcome, the extremes of the 128 bits among the ids.
    const triggers = ['initial', 'retry', 'replay'];
    const outcomes = ['success', 'retry', 'terminal'];
    const ids = ['att_00000000000000000000000000', 'att_7zzzzzzzzzzzzzzzzzzzzzzzzz', ...Array.from({ length: 7 }, () => newId('attempt'))];
    const rows = ids.map((id, i) => ({
      id, delivery_id: retried!, attempt_number: i + 1, trigger: triggers[i % 3]!, outcome: outcomes[Math.floor(i / 3)]!,
      started_at: new Date(Date.UTC(2026, 11, 7, 8, 0, i)), duration_ms: 10 * i, status_code: [null, 200, 503, 599][i % 4]!,
      error_class: i % 2 ? 'http_503' : null, error_message: i % 2 ? 'HTTP 503' : null, response_excerpt: i ? `answer ${i}` : null,
      next_attempt_at: i % 2 ? new Date(Date.UTC(2026, 11, 7, 9, 0, i)) : null,
    }));
    await db('attempts').insert(rows);
    // A partition whose detach retention began and never finished: the migration drops it, as retention's next run would.
    const pending = 'attempts_p20991231';
    await db.raw(`CREATE TABLE ${pending} PARTITION OF attempts FOR VALUES FROM ('${uuidFloor(new Date('2099-12-31'))}') TO ('${uuidFloor(new Date('2100-01-01'))}')`);
    await leaveDetachPending(db, database.url, 'attempts', pending);
    const all = async () => db('attempts').orderBy('id').select('*');
    const width = async () => Number((await db.raw('SELECT avg(pg_column_size(a.*)) AS n FROM attempts a')).rows[0].n);
    const before = { rows: await all(), width: await width() };

    await db.migrate.up();
    await applyFunctionSources(db);
    // Stored: the uuid, in the same order (a uuid sorts as its TypeID does), and each word's place in its list.
    expect(await db('attempts').orderBy('id').select('id', 'trigger', 'outcome', 'status_code')).toEqual(
      [...rows].sort((a, b) => (a.id < b.id ? -1 : 1)).map((r) => ({ id: uuidOf('attempt', r.id), trigger: triggers.indexOf(r.trigger) + 1, outcome: outcomes.indexOf(r.outcome) + 1, status_code: r.status_code })),
    );
    expect((await db.raw('SELECT to_regclass(?) AS t', [pending])).rows[0].t).toBeNull();
    // Listed as before: TypeIDs and words, every column as it was written.
    const listedOf = (delivery: string) => attemptsListed(db).where('delivery_id', idOfUuid('delivery', delivery)).orderBy('attempt_number').select('*');
    expect(await listedOf(retried!)).toEqual(rows.map((r) => ({ ...r, delivery_id: idOfUuid('delivery', retried!) })));
    // A first try stored in its delivery is named att_ and the delivery's letters.
    expect((await listedOf(folded!)).map((r: { id: string; trigger: string; outcome: string }) => [r.id, r.trigger, r.outcome])).toEqual([
      [`att_${idOfUuid('delivery', folded!).slice('dlv_'.length)}`, 'initial', 'success'],
    ]);
    // 16 bytes of id instead of 31, and 2 for each word: a quarter off these rows.
    const after = await width();
    expect(after).toBeLessThan(before.width - 20);

    await db.migrate.down();
    expect(await all()).toEqual(before.rows);
    expect(await width()).toBe(before.width);
  });

  it('keeps uniqueness in the database: (source, dedupe key) and (tenant, Idempotency-Key) in event_keys, (event, endpoint) on deliveries', async () => {
    const { db } = await emptyDatabase();
    await migrateLatest(db);
    // As stored: the uuid of the tenant's TypeID, and its text as its idempotency keys' scope.
    const tenant = uuidOf('tenant', newId('tenant'));
    await db('tenants').insert({ id: tenant, name: 't' });
    await db('sources').insert({ id: 'src_1', tenant_id: tenant, type: 'standard-webhooks', name: 's', secret_enc: 'v1:x' });
    const endpointId = uuidOf('endpoint', newId('endpoint'));
    await db('endpoints').insert({ id: endpointId, tenant_id: tenant, url: 'https://x.example.com', max_concurrency: 1, secret_enc: 'v1:x' });
    const violation = (p: Promise<unknown>) => p.then(() => 'inserted', (err: { code?: string }) => err.code);
    const [e1, e2, e3] = [newId('event'), newId('event'), newId('event')].map((id) => uuidOf('event', id));
    // events is partitioned by time, so a key is claimed in event_keys, unique across every partition.
    await db('event_keys').insert({ scope_id: 'src_1', key: 'k', event_id: e1 });
    expect(await violation(db('event_keys').insert({ scope_id: 'src_1', key: 'k', event_id: e2 }))).toBe('23505');
    await db('event_keys').insert({ scope_id: tenant, key: 'idem', event_id: e3 });
    expect(await violation(db('event_keys').insert({ scope_id: tenant, key: 'idem', event_id: e2 }))).toBe('23505');
    // An id no partition covers is refused, not stored somewhere retention would never look.
    expect(await violation(db('events').insert({ id: 'ffffffff-ffff-ffff-ffff-ffffffffffff', tenant_id: tenant, origin: 'api', type: 'x', body: '{}' }))).toBe('23514');

    await db('events').insert({ id: e1, tenant_id: tenant, origin: 'api', type: 'x', body: '{}' });
    const delivery = (id: string) => ({ id, tenant_id: tenant, event_id: e1, endpoint_id: endpointId, status: 'pending', deadline_at: new Date() });
    await db('deliveries').insert(delivery(uuidOf('delivery', newId('delivery'))));
    expect(await violation(db('deliveries').insert(delivery(uuidOf('delivery', newId('delivery')))))).toBe('23505');
  });
});
