/**
 * `npm run release:snapshot`: a database in the state a running deployment of this version leaves
 * behind, dumped to test/fixtures/release-<version>.sql for the upgrade test. Run it when cutting a
 * release, after `npm run release:freeze` (docs/operations/upgrade.md).
 *
 * Everything reachable through the platform's own API and dispatcher is made that way: a tenant
 * with two API keys, a source with a verified callback, deliveries that succeeded, failed terminally
 * (dead), wait for a retry behind an open circuit, or were never attempted (accepted by an api
 * process with no worker running), and a bulk replay in progress. Only the in-flight deliveries
 * whose worker died are written directly: that state exists only between a worker's claim and its
 * crash.
 *
 * Needs PostgreSQL and Redis as the tests do (127.0.0.1, or TEST_PG_URL and TEST_REDIS_URL) and
 * pg_dump on the PATH.
 */
import { randomBytes } from 'node:crypto';
import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { relative } from 'node:path';
import { promisify } from 'node:util';
import { uuidOf } from '../src/domain/ids.js';
import { migrateLatest, createDb } from '../src/infra/db.js';
import { createEmptyDatabase } from '../test/helpers/database.js';
import { eventually, startTestPlatform, type TestPlatform, type TestTenant } from '../test/helpers/platform.js';
import { standard } from '../test/helpers/providers.js';
import { startReceiver, type Responder } from '../test/helpers/receiver.js';
import type { ReleaseSnapshotManifest } from './release-fixture.js';
import { snapshotFiles } from './release-fixture.js';
import { packageVersion } from './released-migrations.js';

const run = promisify(execFile);
const version = packageVersion();

/** Ten years: the longest retention and event age allowed, so the snapshot's work is not too old whenever the test runs. */
const tenYearsSeconds = 315_360_000;
const env: Record<string, string> = {
  SECRETS_KEY: randomBytes(32).toString('base64'),
  ADMIN_TOKEN: 'release-snapshot-admin-token-0123456789',
  RETENTION_DAYS: '3650',
  DEAD_LETTER_RETENTION_DAYS: '3650',
  MAX_EVENT_AGE_SECONDS: String(tenYearsSeconds),
  CIRCUIT_FAILURE_THRESHOLD: '3',
  CIRCUIT_COOLDOWN_SECONDS: '5',
  RETRY_BASE_DELAY_MS: '1000',
  RETRY_MAX_DELAY_MS: '2000',
  REPLAY_RATE_PER_SECOND: '1',
};

const answer =
  (status: number): Responder =>
  (_req, res) => {
    res.writeHead(status, { 'content-type': 'text/plain' }).end(`status ${status}`);
  };

function expectStatus(res: { status: number; text: string }, status: number, what: string): void {
  if (res.status !== status) throw new Error(`${what}: expected ${status}, got ${res.status} ${res.text}`);
}

async function publish(tenant: TestTenant, type: string, key: string): Promise<void> {
  const res = await tenant.call('POST', '/v1/events', { body: { type, messageId: key, data: { key } }, headers: { 'idempotency-key': key } });
  expectStatus(res, 202, `publishing ${type}`);
}

async function count(t: TestPlatform, where: Record<string, unknown>): Promise<number> {
  return Number((await t.platform.db('deliveries').where(where).count({ n: '*' }))[0]!.n);
}

const database = await createEmptyDatabase();
const started: TestPlatform[] = [];
const receivers = await Promise.all([startReceiver(answer(200)), startReceiver(answer(503)), startReceiver(answer(400))]);
try {
  const migrator = createDb({ url: database.url, poolMax: 1, timeoutMs: 30_000 });
  await migrateLatest(migrator).finally(() => migrator.destroy());

  // A whole platform (api and dispatcher): deliveries succeed, die, and fail until a circuit opens.
  const all = await startTestPlatform({ database, env });
  started.push(all);
  const tenant = await all.createTenant('acme');
  expectStatus(await tenant.call('POST', '/v1/api-keys', { body: { name: 'deploy' } }), 201, 'second API key');
  const source = await tenant.call('POST', '/v1/sources', { body: { type: 'standard-webhooks', name: 'billing' } });
  expectStatus(source, 201, 'source');
  const endpoint = async (url: string, eventTypes: string[]) => {
    const res = await tenant.call('POST', '/v1/endpoints', { body: { url, eventTypes, retryPolicy: { maxEventAgeSeconds: tenYearsSeconds } } });
    expectStatus(res, 201, `endpoint ${url}`);
    return { id: res.body.id as string, path: new URL(url).pathname };
  };
  const [delivering, circuitOpen, rejecting] = await Promise.all([
    endpoint(`${receivers[0]!.url}/delivering`, ['order.*']),
    endpoint(`${receivers[1]!.url}/circuit-open`, ['invoice.*']),
    endpoint(`${receivers[2]!.url}/rejecting`, ['refund.*']),
  ]);
  const body = JSON.stringify({ type: 'order.paid', data: { order: 'o-1' } });
  const inbound = await all.call('POST', `/inbound/${source.body.id}`, { rawBody: body, headers: standard.headers(source.body.secret, 'msg_release_1', body) });
  expectStatus(inbound, 200, 'inbound callback');
  for (let i = 1; i <= 3; i++) await publish(tenant, 'order.created', `order-${i}`);
  for (let i = 1; i <= 4; i++) await publish(tenant, 'invoice.created', `invoice-${i}`);
  for (let i = 1; i <= 2; i++) await publish(tenant, 'refund.created', `refund-${i}`);
  await eventually(async () => (await count(all, { endpoint_id: uuidOf('endpoint', delivering.id), status: 'succeeded' })) === 4, 'four deliveries succeeded');
  await eventually(async () => (await count(all, { endpoint_id: uuidOf('endpoint', rejecting.id), status: 'dead' })) === 2, 'two deliveries dead');
  await eventually(
    async () => all.platform.db('endpoints').where({ id: uuidOf('endpoint', circuitOpen.id) }).where('consecutive_failures', '>=', 3).whereNotNull('circuit_open_until').first(),
    'the failing endpoint circuit open',
  );
  await all.stop();

  // An api process alone: accepted work waits for workers that are not running, and a bulk
  // replay of the delivered events is under way (paced at one a second).
  const api = await startTestPlatform({ database, env, role: 'api' });
  started.push(api);
  const apiTenant: TestTenant = { ...tenant, call: (method, path, o) => api.call(method, path, { ...o, token: tenant.apiKey }) };
  for (let i = 4; i <= 8; i++) await publish(apiTenant, 'order.created', `order-${i}`);
  const replay = await apiTenant.call('POST', '/v1/replays', { body: { filter: { status: 'succeeded', endpointId: delivering.id }, reason: 'release snapshot: a replay in progress' } });
  expectStatus(replay, 202, 'bulk replay');
  // Two never-attempted deliveries become in flight on a worker that died: claimed (attempt
  // counted, lease taken) a minute ago, lease over, no result recorded.
  const lost = await api.platform.db('deliveries').where({ endpoint_id: uuidOf('endpoint', delivering.id), status: 'pending', attempt_count: 0 }).orderBy('id').limit(2).pluck('id');
  await api.platform.db.raw(
    `UPDATE deliveries SET status = 'in_flight', attempt_count = attempt_count + 1, lease_until = now() - interval '30 seconds',
            updated_at = now() - interval '1 minute' WHERE id = ANY(?)`,
    [lost],
  );
  await api.stop();

  const { sql, manifest } = snapshotFiles(version);
  const url = new URL(database.url);
  const { stdout } = await run('pg_dump', ['--no-owner', '--no-privileges', '-h', url.hostname, '-p', url.port || '5432', '-U', url.username || 'postgres', database.name], { maxBuffer: 64 * 1024 * 1024 });
  writeFileSync(sql, stdout);
  const description: ReleaseSnapshotManifest = {
    version,
    env,
    tenantId: tenant.id,
    apiKey: tenant.apiKey,
    endpoints: { delivering, circuitOpen, rejecting },
    replayId: replay.body.id as string,
  };
  writeFileSync(manifest, `${JSON.stringify(description, null, 2)}\n`);
  process.stdout.write(`${relative(process.cwd(), sql)}: snapshot of ${version} written (${Math.round(stdout.length / 1024)} KB)\n`);
} finally {
  // Stopping twice is harmless; a platform left running would keep this process alive after a failure.
  for (const t of started) await t.stop().catch(() => undefined);
  await Promise.all(receivers.map((r) => r.close()));
  await database.drop();
}
