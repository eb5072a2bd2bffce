import type { Knex } from 'knex';
import { createDatabaseIfMissing, createDb, migrateLatest } from '../../src/infra/db.js';
import { newId, newStoredId, uuidOf } from '../../src/domain/ids.js';
import { SecretBox } from '../../src/domain/secret-box.js';
import { generateWebhookSecret } from '../../src/domain/signing.js';
import { stringifyJson } from '../../src/domain/raw-json.js';
import { payloadData } from './payload.js';

/** The server's maintenance database, next to the bench database. */
function adminUrl(url: string): string {
  const admin = new URL(url);
  admin.pathname = '/postgres';
  return admin.toString();
}

function databaseName(url: string): string {
  return decodeURIComponent(new URL(url).pathname.replace(/^\//, ''));
}

/** Drops the bench database (whatever a previous run left behind) and creates it again, migrated. */
export async function freshDatabase(url: string): Promise<void> {
  await dropDatabase(url);
  await createDatabaseIfMissing(url);
  const migrator = createDb({ url, poolMax: 1, timeoutMs: 30_000 });
  try {
    await migrateLatest(migrator);
  } finally {
    await migrator.destroy();
  }
}

export async function dropDatabase(url: string): Promise<void> {
  const name = databaseName(url);
  if (!/^[A-Za-z0-9_-]+$/.test(name)) throw new Error(`unsupported database name: ${name}`);
  const admin = createDb({ url: adminUrl(url), poolMax: 1 });
  try {
    await admin.raw(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
  } finally {
    await admin.destroy();
  }
}

/**
 * Empties every table (except knex's migration bookkeeping and the partition plan, which is schema)
 * so each scenario starts from nothing: no leftover pending work from an earlier scenario can be
 * dispatched during a measurement.
 */
export async function truncateAll(db: Knex): Promise<void> {
  const { rows } = await db.raw<{ rows: Array<{ tablename: string }> }>(
    "SELECT tablename FROM pg_tables WHERE schemaname = 'public' AND tablename NOT LIKE 'knex\\_%' AND tablename <> 'partition_plan'",
  );
  if (rows.length === 0) return;
  await db.raw(`TRUNCATE ${rows.map((r) => `"${r.tablename}"`).join(', ')} CASCADE`);
}

export async function postgresVersion(db: Knex): Promise<string> {
  const { rows } = await db.raw<{ rows: Array<{ version: string }> }>('SELECT version()');
  return rows[0]?.version ?? 'unknown';
}

export interface BacklogShare {
  endpointId: string;
  count: number;
}

/**
 * Creates pending work directly in SQL, as fan-out would have left it: events (their data written
 * by the platform's own stringifyJson) and their deliveries, due now. Event k goes to every endpoint
 * whose share is larger than k, so endpoints with equal shares receive the same events (fan-out).
 * Events are dated 1 ms apart, ending now, as a backlog that built up from a stream of callbacks
 * would be (intake stamps each event with its own arrival time). Ids come from the platform's own
 * newStoredId, as stored. Ends with ANALYZE: a production table has statistics from autovacuum, a table filled in
 * seconds does not yet.
 */
export async function insertBacklog(
  db: Knex,
  tenantId: string,
  shares: BacklogShare[],
  payloadBytes: number,
  /**
   * `oneTransaction`: a running platform sees the whole backlog at once, not batch by batch.
   * `traced`: each event carries a sampled trace context, as events accepted with tracing on do,
   * so their attempts make spans.
   */
  opts: { oneTransaction?: boolean; traced?: boolean } = {},
): Promise<number> {
  if (opts.oneTransaction) return db.transaction((trx) => insertBacklog(trx, tenantId, shares, payloadBytes, { traced: opts.traced }));
  const events = Math.max(0, ...shares.map((s) => s.count));
  const batch = 5_000;
  const firstAt = Date.now() - events;
  let deliveries = 0;
  for (let from = 0; from < events; from += batch) {
    const size = Math.min(batch, events - from);
    const eventIds: string[] = [];
    const payloads: string[] = [];
    const times: string[] = [];
    for (let i = 0; i < size; i++) {
      const id = newStoredId();
      const at = new Date(firstAt + from + i);
      eventIds.push(id);
      times.push(at.toISOString());
      payloads.push(stringifyJson(payloadData(from + i, payloadBytes))!);
    }
    const deliveryIds: string[] = [];
    const deliveryEvents: string[] = [];
    const deliveryEndpoints: string[] = [];
    const deliveryTimes: string[] = [];
    for (let i = 0; i < size; i++) {
      for (const share of shares) {
        if (from + i >= share.count) continue;
        deliveryIds.push(newStoredId());
        deliveryEvents.push(eventIds[i]!);
        deliveryEndpoints.push(share.endpointId);
        deliveryTimes.push(times[i]!);
      }
    }
    await db.transaction(async (trx) => {
      await trx.raw(
        `INSERT INTO events (id, tenant_id, origin, type, data, created_at, trace_parent)
         SELECT e.id, ?, 'api', 'order.created', e.data, e.at,
                CASE WHEN ?::boolean THEN '00-' || md5(e.id::text) || '-' || left(md5(e.id::text || 'fan-out'), 16) || '-01' END
           FROM unnest(?::uuid[], ?::text[], ?::timestamptz[]) AS e(id, data, at)`,
        [uuidOf('tenant', tenantId), opts.traced ?? false, eventIds, payloads, times],
      );
      await trx.raw(
        `INSERT INTO deliveries (id, tenant_id, event_id, endpoint_id, status, next_attempt_at, deadline_at, created_at, updated_at)
         SELECT d.id, ?, d.event_id, d.endpoint_id, 'pending', d.at, d.at + interval '3 days', d.at, d.at
           FROM unnest(?::uuid[], ?::uuid[], ?::uuid[], ?::timestamptz[]) AS d(id, event_id, endpoint_id, at)`,
        [uuidOf('tenant', tenantId), deliveryIds, deliveryEvents, deliveryEndpoints.map((id) => uuidOf('endpoint', id)), deliveryTimes],
      );
    });
    deliveries += deliveryIds.length;
  }
  await db.raw('ANALYZE events, deliveries');
  return deliveries;
}

/** A tenant row without API keys, for work that never goes through the API. */
export async function insertTenant(db: Knex, name: string): Promise<string> {
  const id = newId('tenant');
  await db.raw('INSERT INTO tenants (id, name) VALUES (?, ?)', [uuidOf('tenant', id), name]);
  return id;
}

/**
 * `count` active endpoints of one tenant, ids `ep_<label><n, 7 digits>`, URLs on port 1 of loopback.
 * Nothing may ever be delivered to them, but their secret is sealed with the platform's key
 * (`secretsKey`, base64, as SECRETS_KEY), because a process checks at start that it opens the
 * stored secrets.
 */
export async function insertEndpoints(db: Knex, tenantId: string, label: string, count: number, maxConcurrency: number, secretsKey: string): Promise<string[]> {
  const box = new SecretBox(Buffer.from(secretsKey, 'base64'));
  const ids = Array.from({ length: count }, () => newId('endpoint'));
  const secret = generateWebhookSecret();
  for (let from = 0; from < count; from += 10_000) {
    const chunk = ids.slice(from, from + 10_000);
    await db.raw(
      `INSERT INTO endpoints (id, tenant_id, url, max_concurrency, secret_enc)
       SELECT e.id, ?, 'http://127.0.0.1:1/' || ? || '/' || (? + e.n), ?, e.secret
         FROM unnest(?::uuid[], ?::text[]) WITH ORDINALITY AS e(id, secret, n)`,
      [uuidOf('tenant', tenantId), label, from, maxConcurrency, chunk.map((id) => uuidOf('endpoint', id)), chunk.map((id) => box.seal(secret, id))],
    );
  }
  return ids;
}

/**
 * Deletes every event, delivery, attempt and receipt, keeping tenants, sources and endpoints. The
 * queue is named: it has no key to deliveries that a cascade would follow (migration 20261205000049).
 */
export async function clearWork(db: Knex): Promise<void> {
  await db.raw('TRUNCATE attempts, deliveries, delivery_queue, receipts, messages, events, event_keys CASCADE');
}

export async function countRows(db: Knex, sql: string, bindings: readonly Knex.Value[] = []): Promise<number> {
  const { rows } = await db.raw<{ rows: Array<{ n: number }> }>(sql, [...bindings]);
  return Number(rows[0]?.n ?? 0);
}

/** The server's autovacuum as the bench found it, and as it ran. */
export interface AutovacuumState {
  server: 'on' | 'off';
  during: 'on' | 'off';
}

/**
 * Production runs PostgreSQL with autovacuum on; some development and CI servers turn it off
 * server-wide, and then nothing reclaims `deliveries`' dead row versions: an 8-minute stream's p99
 * grew from 70 to 263 ms (docs/performance.md, "A long stream and autovacuum"). With `wanted` on
 * (BENCH_AUTOVACUUM, the default), a server found with it off gets it on for the run (ALTER SYSTEM
 * and a reload: no restart) and back as it was at the end; answers the state and the restore.
 */
export async function autovacuumForRun(db: Knex, wanted: 'on' | 'server'): Promise<{ state: AutovacuumState; restore: () => Promise<void> }> {
  const current = async () => (await db.raw<{ rows: Array<{ setting: string; source: string; sourcefile: string | null }> }>(
    "SELECT setting, source, sourcefile FROM pg_settings WHERE name = 'autovacuum'",
  )).rows[0]!;
  const found = await current();
  const server = found.setting === 'on' ? 'on' : 'off';
  if (server === 'on' || wanted === 'server') return { state: { server, during: server }, restore: async () => undefined };
  // Set by an earlier ALTER SYSTEM: put that value back; otherwise remove ours.
  const bySystem = found.sourcefile?.endsWith('postgresql.auto.conf') ?? false;
  await db.raw('ALTER SYSTEM SET autovacuum = on');
  await db.raw('SELECT pg_reload_conf()');
  for (let i = 0; i < 50 && (await current()).setting !== 'on'; i++) await new Promise((r) => setTimeout(r, 100));
  // One restore, however many callers (the run's end and a signal) ask for it, each awaiting it whole.
  let restoring: Promise<void> | undefined;
  return {
    state: { server, during: (await current()).setting === 'on' ? 'on' : 'off' },
    restore: () =>
      (restoring ??= (async () => {
        await db.raw(bySystem ? 'ALTER SYSTEM SET autovacuum = off' : 'ALTER SYSTEM RESET autovacuum');
        await db.raw('SELECT pg_reload_conf()');
      })()),
  };
}
