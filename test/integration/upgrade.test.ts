/**
 * Upgrade from the latest release: its database, as `npm run release:snapshot` left it when the
 * release was cut (test/fixtures/release-<version>.sql), is restored with psql, migrated to HEAD
 * with the platform's own migrate, compared with a fresh install, and then run by HEAD's platform,
 * which must finish the release's unfinished work exactly once and leave its dead letters dead.
 */
import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { promisify } from 'node:util';
import type { Knex } from 'knex';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { UNFINISHED_STATUSES } from '../../src/domain/delivery-status.js';
import { idOfUuid, uuidOf } from '../../src/domain/ids.js';
import { createDb, migrateLatest } from '../../src/infra/db.js';
import { functionsTable, readFunctionSources } from '../../src/infra/function-sources.js';
import { snapshotFiles, type ReleaseSnapshotManifest } from '../../scripts/release-fixture.js';
import { readReleased } from '../../scripts/released-migrations.js';
import { attemptsListed, createEmptyDatabase, createTestDatabase, type TestDatabase } from '../helpers/database.js';
import { request } from '../helpers/http.js';
import { eventually, startTestPlatform, type TestPlatform } from '../helpers/platform.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';
import { schemaDump } from '../helpers/schema.js';

const run = promisify(execFile);

/**
 * Every event's body as it is sent, and every delivery's attempts as they are listed, event and
 * delivery ids as TypeIDs: `eventId` reads an event's from today's uuid, or is the release's own
 * column; `listed` is attemptsListed, which reads them from today's uuids, or the release's own listing
 * (which has `tenant_id` too, never written since 0.3.0 and no longer listed).
 */
async function readThroughFunctions(db: Knex, listed: Knex.QueryBuilder = attemptsListed(db), eventId = "typeid_of('evt', id)") {
  const bodies = await db('events').orderBy('id').select(db.raw(`${eventId} AS id`), db.raw('event_body(events) AS body'));
  const attempts = await listed
    .orderBy(['delivery_id', 'attempt_number', 'id'])
    .select('id', 'delivery_id', 'attempt_number', 'trigger', 'started_at', 'duration_ms', 'status_code', 'outcome', 'error_class', 'error_message', 'response_excerpt', 'next_attempt_at');
  return { bodies, attempts };
}
const release = readReleased();
const files = snapshotFiles(release.version);

interface DeliveryRow {
  id: string;
  event_id: string;
  endpoint_id: string;
  status: string;
  attempt_count: number;
  replay_id: string | null;
  lease_until: Date | null;
}

describe(`upgrade from ${release.version}`, () => {
  let restored: TestDatabase;
  let db: Knex;
  let manifest: ReleaseSnapshotManifest;
  let appliedInSnapshot: string[];
  let before: DeliveryRow[];
  let releaseRead: Awaited<ReturnType<typeof readThroughFunctions>>;
  const receivers: Record<string, Receiver> = {};
  const platforms: TestPlatform[] = [];

  beforeAll(async () => {
    for (const file of [files.sql, files.manifest]) {
      expect(existsSync(file), `${file} is missing: run npm run release:snapshot when cutting a release`).toBe(true);
    }
    manifest = JSON.parse(readFileSync(files.manifest, 'utf8')) as ReleaseSnapshotManifest;
    restored = await createEmptyDatabase();
    await run('psql', ['-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', restored.url, '-f', files.sql]);
    db = createDb({ url: restored.url, poolMax: 2, timeoutMs: 30_000 });
    appliedInSnapshot = await db('knex_migrations').orderBy('id').pluck('name');
    before = await db('deliveries').where({ tenant_id: manifest.tenantId }).select('id', 'event_id', 'endpoint_id', 'status', 'attempt_count', 'replay_id', 'lease_until');
    // The snapshot's endpoints point at the snapshot script's receivers, long gone, and this test's
    // receivers get random ports: each endpoint's URL is moved to its own receiver, keeping the path, as an
    // operator would after restoring into another environment. Done on the release's schema.
    for (const [name, endpoint] of Object.entries(manifest.endpoints)) {
      receivers[name] = await startReceiver();
      await db('endpoints').where({ id: endpoint.id }).update({ url: `${receivers[name]!.url}${endpoint.path}` });
    }
    // The release stored event and delivery ids as TypeIDs: its delivery_attempts lists them as they are.
    releaseRead = await readThroughFunctions(db, db.from(db.raw('(SELECT a.* FROM deliveries d CROSS JOIN LATERAL delivery_attempts(d.id) a) AS attempts')), 'id');
    await migrateLatest(db);
  });

  afterAll(async () => {
    for (const t of platforms) await t.stop();
    for (const r of Object.values(receivers)) await r.close();
    await db?.destroy();
    await restored?.drop();
  });

  const unfinished = () => before.filter((d) => (UNFINISHED_STATUSES as readonly string[]).includes(d.status));
  const dead = () => before.filter((d) => d.status === 'dead');

  it('the snapshot is the released database, holding every state an upgrade must carry', async () => {
    expect(appliedInSnapshot).toEqual(Object.keys(release.migrations).sort());

    const now = Date.now();
    const { delivering, circuitOpen, rejecting } = manifest.endpoints;
    const on = (endpoint: { id: string }) => before.filter((d) => d.endpoint_id === endpoint.id);
    expect(on(delivering).filter((d) => d.status === 'pending' && d.attempt_count === 0 && d.replay_id === null).length).toBeGreaterThan(0);
    expect(on(delivering).filter((d) => d.status === 'in_flight' && d.lease_until!.getTime() < now).length).toBeGreaterThan(0);
    expect(on(delivering).filter((d) => d.replay_id === manifest.replayId && d.status === 'pending').length).toBeGreaterThan(0);
    expect(on(circuitOpen).filter((d) => d.status === 'pending' && d.attempt_count > 0).length).toBeGreaterThan(0);
    expect(on(rejecting).length).toBeGreaterThan(0);
    expect(on(rejecting).every((d) => d.status === 'dead')).toBe(true);
  });

  it("migrated with the platform's migrate, has the same schema as a fresh install", async () => {
    // Migrated from nothing by the same migrate (not the test template, which carries the test-only transition log).
    const fresh = await createEmptyDatabase();
    try {
      const freshDb = createDb({ url: fresh.url, poolMax: 1, timeoutMs: 30_000 });
      await migrateLatest(freshDb).finally(() => freshDb.destroy());
      expect(await schemaDump(restored, { timePartitions: false })).toEqual(await schemaDump(fresh, { timePartitions: false }));
      // A source whose file is gone (a contracted signature) is forgotten too, not left recorded.
      expect(await db(functionsTable).orderBy('name').pluck('name')).toEqual(readFunctionSources().map((s) => s.name).sort());
    } finally {
      await fresh.drop();
    }
  });

  it('sends every event with the bytes the release sent, and lists every attempt the release listed', async () => {
    // Read before migrating, with the release's own functions (event_body and delivery_attempts
    // are in every release from 0.4.0 on): whatever moved where, the bytes and the history stay.
    expect(releaseRead.bodies.length).toBeGreaterThan(0);
    expect(releaseRead.attempts.length).toBeGreaterThan(0);
    expect(await readThroughFunctions(db)).toEqual(releaseRead);
  });

  it("keeps the release's tenants, keys, circuit and replay readable through the API", async () => {
    const api = await startTestPlatform({ database: restored, env: manifest.env, role: 'api' });
    const call = (path: string) => request(api.url, 'GET', path, { token: manifest.apiKey });
    const endpoint = await call(`/v1/endpoints/${manifest.endpoints.circuitOpen.id}`);
    expect(endpoint.status, endpoint.text).toBe(200);
    expect(['open', 'half_open']).toContain(endpoint.body.circuit.state);
    expect((await call(`/v1/replays/${manifest.replayId}`)).body).toMatchObject({ status: 'running' });
    expect((await call('/v1/api-keys')).body.data).toHaveLength(2);
    await api.stop();
  });

  it('delivers every pending, in-flight and replayed delivery exactly once and leaves the dead ones dead', async () => {
    const t = await startTestPlatform({ database: restored, env: manifest.env });
    platforms.push(t);
    // Read from the release as TypeIDs; stored since the upgrade as their uuids.
    const waiting = unfinished().map((d) => uuidOf('delivery', d.id));
    await eventually(
      async () => (await db('deliveries').whereIn('id', waiting).where({ status: 'succeeded' }).count({ n: '*' }))[0]!.n === waiting.length,
      `${waiting.length} deliveries of the release succeeded`,
      30_000,
    );

    for (const [name, endpoint] of Object.entries(manifest.endpoints)) {
      const expected = unfinished().filter((d) => d.endpoint_id === endpoint.id).map((d) => d.event_id).sort();
      const seen = receivers[name]!.requests.map((r) => String(r.headers['webhook-id'])).sort();
      expect({ endpoint: name, seen }).toEqual({ endpoint: name, seen: expected });
    }
    const stillDead = (await db('deliveries').whereIn('id', dead().map((d) => uuidOf('delivery', d.id))).select('id', 'status', 'attempt_count')).map(
      (d: { id: string; status: string; attempt_count: number }) => ({ ...d, id: idOfUuid('delivery', d.id) }),
    );
    expect(stillDead.sort((a, b) => a.id.localeCompare(b.id))).toEqual(
      dead().map((d) => ({ id: d.id, status: 'dead', attempt_count: d.attempt_count })).sort((a, b) => a.id.localeCompare(b.id)),
    );

    const call = (path: string) => request(t.url, 'GET', path, { token: manifest.apiKey });
    expect((await call(`/v1/endpoints/${manifest.endpoints.circuitOpen.id}`)).body.circuit.state).toBe('closed');
    expect((await call(`/v1/replays/${manifest.replayId}`)).body).toMatchObject({ status: 'completed' });
  }, 60_000);
});
