/**
 * Backup and restore drill (docs/runbook.md, "Backup and restore"): pg_dump the database while the
 * platform accepts and delivers, restore the dump into a new database, start a new platform on it,
 * and every event accepted before the dump began is delivered with its webhook-id.
 *
 * The promise covers what was committed when pg_dump took its snapshot: an event whose 202 came
 * back before pg_dump started is in the dump. Events accepted after that may or may not be in it
 * (pg_dump's snapshot is taken some time after it starts), and those that are not were lost with
 * the old database: that gap is the recovery point, which continuous archiving narrows.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { createDb, migrateLatest } from '../../src/infra/db.js';
import { createEmptyDatabase, type TestDatabase } from '../helpers/database.js';
import { eventually, startTestPlatform, type TestPlatform } from '../helpers/platform.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';

const run = promisify(execFile);

/** Host, port and user of a database URL, as pg_dump and pg_restore take them. */
function pgArgs(url: string): string[] {
  const u = new URL(url);
  return ['-h', u.hostname, '-p', u.port || '5432', '-U', u.username || 'postgres'];
}

describe('backup and restore drill', () => {
  const cleanup: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const c of cleanup.splice(0).reverse()) await c();
  });

  it('a platform started on a pg_dump taken while delivering delivers every event accepted before the dump, with the same webhook-id', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'whr-drill-'));
    cleanup.push(async () => rmSync(dir, { recursive: true, force: true }));
    // Slow enough that a backlog builds while events keep coming: the dump catches work in every state.
    const receiver: Receiver = await startReceiver((_req, res) => {
      setTimeout(() => res.writeHead(200).end(), 20);
    });
    cleanup.push(() => receiver.close());

    const first: TestPlatform = await startTestPlatform();
    let firstStopped = false;
    cleanup.push(async () => {
      if (!firstStopped) await first.stop();
    });
    const tenant = await first.createTenant('drill');
    const endpoint = await tenant.call('POST', '/v1/endpoints', { body: { url: `${receiver.url}/hook`, maxConcurrency: 2 } });
    expect(endpoint.status, endpoint.text).toBe(201);

    const accepted: string[] = [];
    let publishing = true;
    let next = 0;
    const publisher = async () => {
      while (publishing) {
        const key = `drill-${next++}`;
        const res = await tenant.call('POST', '/v1/events', { body: { type: 'order.created', data: { key } }, headers: { 'idempotency-key': key } });
        expect(res.status, res.text).toBe(202);
        accepted.push(res.body.id as string);
      }
    };
    const publishers = Promise.all([publisher(), publisher(), publisher()]);

    // Delivering, and behind: some events have arrived and many more wait.
    await eventually(() => Promise.resolve(receiver.requests.length >= 10 && accepted.length - receiver.eventIds().size >= 30), 'a delivery backlog');
    const acceptedBeforeDump = [...accepted];
    const dumpFile = join(dir, 'webhooks.dump');
    await run('pg_dump', ['--format=custom', '--no-owner', '-f', dumpFile, ...pgArgs(first.database.url), first.database.name]);
    const receivedDuringDump = receiver.requests.length;
    publishing = false;
    await publishers;
    expect(receivedDuringDump).toBeGreaterThan(10);

    // The old deployment goes away (its database with it), as when a restore replaces it.
    firstStopped = true;
    await first.stop();

    const restored: TestDatabase = await createEmptyDatabase();
    cleanup.push(() => restored.drop());
    await run('pg_restore', ['--no-owner', '--exit-on-error', ...pgArgs(restored.url), '-d', restored.name, dumpFile]);
    // As `npm start` does before serving: a no-op on a dump of the same version.
    const migrator = createDb({ url: restored.url, poolMax: 1, timeoutMs: 30_000 });
    await migrateLatest(migrator).finally(() => migrator.destroy());

    // A new deployment: new Redis keys, the same SECRETS_KEY (without it no stored secret opens).
    const secondStartedAt = Date.now();
    const second = await startTestPlatform({ database: restored, env: { SECRETS_KEY: first.env.SECRETS_KEY! } });
    cleanup.push(() => second.stop());

    const missing = () => acceptedBeforeDump.filter((id) => !receiver.eventIds().has(id));
    await eventually(() => Promise.resolve(missing().length === 0), `${acceptedBeforeDump.length} events accepted before the dump delivered`, 30_000);
    expect(missing()).toEqual([]);
    // The restored platform did part of it: what was waiting in the dump went out again from there.
    expect(receiver.requests.filter((r) => r.at >= secondStartedAt).length).toBeGreaterThan(0);
  }, 90_000);
});
