/**
 * Reads on a real hot standby (test/helpers/standby.ts): listings go to the replica, reads that must
 * see their own writes to the primary, and when the replica lags or goes away the primary answers,
 * counted and logged once, and reads come back to the replica when it is healthy again.
 *
 * "Served by the replica" is proven with a row the replica cannot have: replay is paused on the
 * standby, a write is made on the primary, and a read that misses it was answered by the replica.
 */
import { readFile } from 'node:fs/promises';
import { Writable } from 'node:stream';
import type { Knex } from 'knex';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDb } from '../../src/infra/db.js';
import { ReadReplica } from '../../src/infra/read-replica.js';
import type { ReadFallbackReason } from '../../src/domain/read-consistency.js';
import { METRIC_NAMES } from '../../src/metrics/registry.js';
import { createTestDatabase, type TestDatabase } from '../helpers/database.js';
import { metricValue } from '../helpers/dispatch.js';
import { eventually, startTestPlatform, type TestPlatform, type TestTenant } from '../helpers/platform.js';
import { startStandby, type Standby } from '../helpers/standby.js';

const maxLagSeconds = 3;

describe('reads on a read replica', () => {
  let standby: Standby;
  let database: TestDatabase;
  let t: TestPlatform;
  let tenant: TestTenant;
  let logs = '';

  beforeAll(async () => {
    standby = await startStandby();
    database = await createTestDatabase();
    await standby.waitForDatabase(database.name);
    const sink = new Writable({ write: (chunk: Buffer, _enc, done) => ((logs += chunk.toString()), done()) });
    t = await startTestPlatform({
      database,
      logs: sink,
      env: { DATABASE_READ_URL: standby.url(database.name), READ_REPLICA_MAX_LAG_SECONDS: String(maxLagSeconds) },
    });
    tenant = await t.createTenant('replica');
  });

  afterAll(async () => {
    await standby?.query('select pg_wal_replay_resume()').catch(() => undefined);
    await t?.stop();
    await database?.drop();
    await standby?.destroy();
  });

  const pauseReplay = () => standby.query('select pg_wal_replay_pause()');
  const resumeReplay = () => standby.query('select pg_wal_replay_resume()');

  async function createEndpoint(description: string): Promise<string> {
    const res = await tenant.call('POST', '/v1/endpoints', { body: { url: 'http://127.0.0.1:9/hook', description } });
    expect(res.status, res.text).toBe(201);
    return res.body.id as string;
  }

  async function listedEndpointIds(): Promise<string[]> {
    const res = await tenant.call('GET', '/v1/endpoints?limit=100');
    expect(res.status, res.text).toBe(200);
    return (res.body.data as Array<{ id: string }>).map((e) => e.id);
  }

  async function fallbacks(reason: ReadFallbackReason): Promise<number> {
    const res = await t.call('GET', '/metrics');
    return metricValue(res.text, METRIC_NAMES.readFallbacks, { reason });
  }

  /** Log lines (pino JSON) whose message starts with `prefix`, from `from` (an offset into the log text). */
  function logLines(prefix: string, from = 0): Array<{ msg: string; reason?: string }> {
    return logs
      .slice(from)
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as { msg: string; reason?: string })
      .filter((l) => l.msg.startsWith(prefix));
  }

  /**
   * True when a listing is answered by the replica right now: with replay paused, an endpoint
   * created on the primary is missing from it. Replay is resumed afterwards.
   */
  async function listingServedByReplica(): Promise<boolean> {
    await pauseReplay();
    try {
      const id = await createEndpoint('probe');
      return !(await listedEndpointIds()).includes(id);
    } finally {
      await resumeReplay();
    }
  }

  it('serves listings from the replica and reads after writes from the primary', async () => {
    await pauseReplay();
    try {
      const id = await createEndpoint('written while replay is paused');
      // The listing comes from the replica, which has not replayed the insert...
      expect(await listedEndpointIds()).not.toContain(id);
      // ...while the same key reading what it just wrote by id is answered by the primary.
      const one = await tenant.call('GET', `/v1/endpoints/${id}`);
      expect(one.status, one.text).toBe(200);

      const published = await tenant.call('POST', '/v1/events', { body: { type: 'order.created', data: { n: 1 } }, headers: { 'idempotency-key': 'replica-k1' } });
      expect(published.status, published.text).toBe(202);
      const event = await tenant.call('GET', `/v1/events/${published.body.id}`);
      expect(event.status, event.text).toBe(200);
      // The idempotency check is on the primary: the same key is recognised at once.
      const again = await tenant.call('POST', '/v1/events', { body: { type: 'order.created', data: { n: 1 } }, headers: { 'idempotency-key': 'replica-k1' } });
      expect({ status: again.status, id: again.body.id }).toEqual({ status: 200, id: published.body.id });
      // Searches and the catalogue are the replica's too.
      const search = await tenant.call('GET', '/v1/events?type=order.created');
      expect(search.status).toBe(200);
      expect(search.body.data.map((e: { id: string }) => e.id)).not.toContain(published.body.id);
      const catalogue = await tenant.call('GET', '/v1/event-types');
      expect(catalogue.status).toBe(200);
      expect(JSON.stringify(catalogue.body)).not.toContain('order.created');
    } finally {
      await resumeReplay();
    }
    expect(await fallbacks('lag') + (await fallbacks('unreachable')) + (await fallbacks('error'))).toBe(0);
  });

  it('reads by id from the replica for a read-only portal link, and from the primary for one that can manage', async () => {
    const link = async (capabilities: string[]) => {
      const created = await tenant.call('POST', '/v1/portal-sessions', { body: { capabilities } });
      expect(created.status, created.text).toBe(201);
      const ex = await t.call('POST', '/v1/portal-sessions/exchange', { body: { token: new URL(created.body.url).hash.replace(/^#token=/, '') } });
      expect(ex.status, ex.text).toBe(200);
      return ex.body.sessionToken as string;
    };
    const readOnly = await link(['read']);
    const manage = await link(['read', 'manage']);
    const id = await createEndpoint('before');
    await eventually(async () => (await listedEndpointIds()).includes(id), 'the endpoint replicated');
    const description = async (token: string) => {
      const res = await t.call('GET', `/v1/endpoints/${id}`, { token });
      expect(res.status, res.text).toBe(200);
      return res.body.description as string;
    };
    await pauseReplay();
    try {
      const changed = await tenant.call('PATCH', `/v1/endpoints/${id}`, { body: { description: 'after' } });
      expect(changed.status, changed.text).toBe(200);
      expect(await description(readOnly)).toBe('before');
      expect(await description(manage)).toBe('after');
    } finally {
      await resumeReplay();
    }
    expect(await fallbacks('lag') + (await fallbacks('unreachable')) + (await fallbacks('error'))).toBe(0);
  });

  it('confirms on the primary what the replica does not have yet, instead of answering 404', async () => {
    await pauseReplay();
    try {
      const id = await createEndpoint('just created');
      expect(await listedEndpointIds()).not.toContain(id);
      // Statistics read the replica, which has no such endpoint yet: the primary confirms it exists.
      const stats = await tenant.call('GET', `/v1/endpoints/${id}/stats`);
      expect(stats.status, stats.text).toBe(200);
      expect(stats.body.attempts).toBe(0);
      // An id that exists nowhere is still 404.
      expect((await tenant.call('GET', '/v1/endpoints/ep_00000000000000000000000000/stats')).status).toBe(404);
    } finally {
      await resumeReplay();
    }
    expect(await fallbacks('lag') + (await fallbacks('unreachable')) + (await fallbacks('error'))).toBe(0);
  });

  it('falls back to the primary while the replica lags past READ_REPLICA_MAX_LAG_SECONDS, then returns', async () => {
    const from = logs.length;
    const lagBefore = await fallbacks('lag');
    await pauseReplay();
    let id: string;
    try {
      id = await createEndpoint('written while the replica lags');
      // Once the lag passes the limit the primary answers, and the listing has the endpoint.
      await eventually(async () => (await listedEndpointIds()).includes(id), 'the listing served by the primary', 15_000, 200);
      const metrics = (await t.call('GET', '/metrics')).text;
      expect(metricValue(metrics, METRIC_NAMES.readReplicaLag)).toBeGreaterThan(maxLagSeconds);
      expect(await fallbacks('lag')).toBeGreaterThan(lagBefore);
      // Several reads on the primary, one log line for the change of state.
      for (let i = 0; i < 3; i++) expect((await listedEndpointIds()).includes(id)).toBe(true);
    } finally {
      await resumeReplay();
    }
    await eventually(async () => logLines('reads are served by the read replica', from).length === 1, 'reads back on the replica');
    expect(logLines('reads fall back to the primary', from).map((l) => l.reason)).toEqual(['lag']);
    expect(await listingServedByReplica()).toBe(true);
  });

  it('answers from the primary while the standby is stopped, counted and logged once, and returns to it', async () => {
    const from = logs.length;
    const unreachableBefore = await fallbacks('unreachable');
    // A replica pool whose sampler will not run again: its first read after the stop must itself
    // notice the lost connection and run on the primary.
    const direct = new ReadReplica({ primary: t.platform.db, replica: createDb({ url: standby.url(database.name), timeoutMs: 2_000 }), maxLagSeconds, logger: { warn: () => undefined, info: () => undefined }, sampleIntervalMs: 3_600_000, onFallback: (r) => seen.push(r) });
    const seen: ReadFallbackReason[] = [];
    await direct.start();
    const whichServer = (db: Knex) => db.raw<{ rows: Array<{ standby: boolean }> }>('select pg_is_in_recovery() as standby').then((r) => r.rows[0]!.standby);
    expect(await direct.read('replica', { canWrite: true }, whichServer)).toBe(true);

    const id = await createEndpoint('written before the standby stops');
    await eventually(async () => (await listedEndpointIds()).includes(id), 'the endpoint replicated');
    await standby.stop();
    try {
      expect(await direct.read('replica', { canWrite: true }, whichServer)).toBe(false);
      expect(seen).toEqual(['unreachable']);
      const reads = 5;
      for (let i = 0; i < reads; i++) expect(await listedEndpointIds()).toContain(id);
      expect(await fallbacks('unreachable')).toBe(unreachableBefore + reads);
      expect(logLines('reads fall back to the primary', from).map((l) => l.reason)).toEqual(['unreachable']);
    } finally {
      await direct.stop();
      await standby.start();
    }
    await eventually(async () => logLines('reads are served by the read replica', from).length === 1, 'reads back on the replica');
    expect(await listingServedByReplica()).toBe(true);
  });

  it('docs/api.md lists every route that reads from the replica, with the lag it tolerates', async () => {
    const doc = (await t.call('GET', '/openapi.json')).body as { paths: Record<string, Record<string, { operationId: string; 'x-reads'?: string }>> };
    const declared = Object.values(doc.paths)
      .flatMap((ops) => Object.values(ops))
      .filter((op) => op['x-reads'])
      .map((op) => `${op.operationId} ${op['x-reads']}`)
      .sort();
    const apiDoc = await readFile(new URL('../../docs/api.md', import.meta.url), 'utf8');
    const section = apiDoc.slice(apiDoc.indexOf('## Reads and replica lag'));
    const documented = [...section.matchAll(/^\| `(\w+)` \| `[^`]+` \| (replica|replica-when-read-only) \|/gm)].map((m) => `${m[1]} ${m[2]}`).sort();
    expect(declared.length).toBeGreaterThan(10);
    expect(documented).toEqual(declared);
  });
});
