/**
 * A real PostgreSQL hot standby of the test primary, for the read-replica tests: `pg_basebackup -R`
 * into a temporary directory (with a physical replication slot, so the primary keeps the WAL the
 * standby needs while a test has it stopped), then `pg_ctl` on a free loopback port, as the
 * `postgres` OS user. It replicates the whole cluster, so every test database appears on it.
 *
 * Needs the primary to allow replication connections from 127.0.0.1 (.ci/run adds the pg_hba.conf
 * line); when it does not, startStandby fails at once with what to do instead of hanging.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { appendFile, chmod, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { pgAdminUrl } from './global-setup.js';

const dirPrefix = 'whr-standby-';
const slotPrefix = 'whr_standby_';
const commandTimeoutMs = 60_000;

export interface Standby {
  port: number;
  /** A connection URL for one database on the standby. */
  url(database: string): string;
  /** Runs one statement on the standby (the postgres database). */
  query<R extends pg.QueryResultRow>(sql: string): Promise<R[]>;
  /** Stops the standby (fast shutdown: sessions are terminated, as when a replica goes away). */
  stop(): Promise<void>;
  start(): Promise<void>;
  /** Resolves once the database exists on the standby (it was created on the primary). */
  waitForDatabase(name: string, timeoutMs?: number): Promise<void>;
  /** Stops it, removes its directory and drops its replication slot. */
  destroy(): Promise<void>;
}

const primary = new URL(pgAdminUrl);

/** Runs a PostgreSQL tool as the postgres OS user (the server refuses to run as root). */
function asPostgres(command: string, args: string[]): Promise<string> {
  const [file, argv] = process.getuid?.() === 0 ? ['runuser', ['-u', 'postgres', '--', command, ...args]] : [command, args];
  return new Promise((resolve, reject) => {
    execFile(file, argv, { timeout: commandTimeoutMs, env: { ...process.env, PGCONNECT_TIMEOUT: '10' } }, (err, stdout, stderr) => {
      if (err) reject(new Error(`${command} ${args.join(' ')} failed: ${stderr.trim() || err.message}`));
      else resolve(stdout);
    });
  });
}

/** The server runs as postgres and must own its directory; the tests run as root in CI. */
function ownedByPostgres(dir: string): Promise<void> {
  if (process.getuid?.() !== 0) return Promise.resolve();
  return new Promise((resolve, reject) => execFile('chown', ['-R', 'postgres:postgres', dir], (err) => (err ? reject(err) : resolve())));
}

async function onPrimary<R extends pg.QueryResultRow>(sql: string, values: unknown[] = []): Promise<R[]> {
  const client = new pg.Client({ connectionString: pgAdminUrl, connectionTimeoutMillis: 10_000 });
  await client.connect();
  try {
    return (await client.query<R>(sql, values)).rows;
  } finally {
    await client.end();
  }
}

/** Whether the process that owned a leftover standby is gone (it crashed, or was killed). */
function gone(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return false;
  } catch {
    return true;
  }
}

/**
 * Stops and removes what a crashed run left behind: standbys whose owning process is gone, and
 * their slots, which would otherwise make the primary keep WAL forever.
 */
async function removeLeftovers(): Promise<void> {
  for (const name of await readdir(tmpdir())) {
    if (!name.startsWith(dirPrefix)) continue;
    const dir = join(tmpdir(), name);
    const owner = Number(await readFile(join(dir, 'owner.pid'), 'utf8').catch(() => '0'));
    if (owner !== 0 && !gone(owner)) continue;
    if (existsSync(join(dir, 'data', 'postmaster.pid'))) await asPostgres('pg_ctl', ['-D', join(dir, 'data'), '-m', 'immediate', '-w', 'stop']).catch(() => undefined);
    await rm(dir, { recursive: true, force: true });
  }
  const slots = await onPrimary<{ slot_name: string }>('select slot_name from pg_replication_slots where slot_name like $1', [`${slotPrefix}%`]);
  for (const { slot_name } of slots) {
    if (gone(Number(/^whr_standby_(\d+)_/.exec(slot_name)?.[1] ?? 0))) await dropSlot(slot_name);
  }
}

/** Drops a slot once its standby's WAL sender has exited (it stays active for a moment after the stop). */
async function dropSlot(slot: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline) {
    const [row] = await onPrimary<{ active: boolean }>('select active from pg_replication_slots where slot_name = $1', [slot]);
    if (!row) return;
    if (!row.active) {
      await onPrimary('select pg_drop_replication_slot($1)', [slot]).catch(() => undefined);
      continue;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Says what is missing when the primary cannot feed a standby, instead of letting pg_basebackup hang or fail obscurely. */
async function checkPrimaryCanReplicate(): Promise<void> {
  const [settings] = await onPrimary<{ wal_level: string; senders: number; used: number; hba: string }>(
    `select current_setting('wal_level') as wal_level, current_setting('max_wal_senders')::int as senders,
            (select count(*)::int from pg_stat_replication) as used, current_setting('hba_file') as hba`,
  );
  const { wal_level, senders, used, hba } = settings!;
  if (wal_level === 'minimal') throw new Error('the primary has wal_level = minimal: set wal_level = replica and restart it');
  if (senders - used < 1) throw new Error(`the primary has no free WAL sender (max_wal_senders = ${senders}, ${used} in use)`);
  const client = new pg.Client({ host: primary.hostname, port: Number(primary.port || 5432), user: primary.username || 'postgres', database: 'postgres', replication: true, connectionTimeoutMillis: 10_000 } as pg.ClientConfig);
  try {
    await client.connect();
    await client.query('IDENTIFY_SYSTEM');
  } catch (err) {
    throw new Error(
      `the primary refuses replication connections from 127.0.0.1 (${(err as Error).message}): run .ci/run, or add ` +
        `"host replication postgres 127.0.0.1/32 trust" to ${hba} and run: psql -U postgres -h 127.0.0.1 -c 'select pg_reload_conf()'`,
    );
  } finally {
    await client.end().catch(() => undefined);
  }
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** The settings a hot standby must have at least as high as its primary's, or it refuses to start. */
async function primaryLimits(): Promise<string> {
  const names = ['max_connections', 'max_worker_processes', 'max_wal_senders', 'max_prepared_transactions', 'max_locks_per_transaction'];
  const rows = await onPrimary<{ name: string; setting: string }>('select name, setting from pg_settings where name = any($1)', [names]);
  return rows.map((r) => `${r.name} = ${r.setting}`).join('\n');
}

export async function startStandby(): Promise<Standby> {
  await removeLeftovers();
  await checkPrimaryCanReplicate();
  const dir = await mkdtemp(join(tmpdir(), dirPrefix));
  await writeFile(join(dir, 'owner.pid'), String(process.pid));
  const data = join(dir, 'data');
  const slot = `${slotPrefix}${process.pid}_${Math.random().toString(36).slice(2, 8)}`;
  const port = await freePort();
  const destroy = async () => {
    if (existsSync(join(data, 'postmaster.pid'))) await asPostgres('pg_ctl', ['-D', data, '-m', 'immediate', '-w', 'stop']).catch(() => undefined);
    await rm(dir, { recursive: true, force: true });
    await dropSlot(slot);
  };
  try {
    await ownedByPostgres(dir);
    await asPostgres('pg_basebackup', ['-h', primary.hostname, '-p', primary.port || '5432', '-U', primary.username || 'postgres', '-D', data, '-R', '-X', 'stream', '-c', 'fast', '-C', '-S', slot]);
    // Appended, so these win over anything copied from the primary (Debian keeps its
    // postgresql.conf outside the data directory, so there is often nothing to win over).
    await appendFile(
      join(data, 'postgresql.conf'),
      `\nport = ${port}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '${dir}'\nhot_standby = on\nfsync = off\nshared_buffers = 16MB\n${await primaryLimits()}\n`,
    );
    await writeFile(join(data, 'pg_hba.conf'), 'local all all trust\nhost all all 127.0.0.1/32 trust\n');
    await chmod(data, 0o700);
    await ownedByPostgres(dir);
  } catch (err) {
    await destroy();
    throw err;
  }
  const start = () => asPostgres('pg_ctl', ['-D', data, '-l', join(dir, 'server.log'), '-w', '-t', '30', 'start']).then(() => undefined);
  await start().catch(async (err: unknown) => {
    const log = await readFile(join(dir, 'server.log'), 'utf8').catch(() => '');
    await destroy();
    throw new Error(`${(err as Error).message}\n${log.slice(-2000)}`);
  });

  const url = (database: string) => `postgres://postgres@127.0.0.1:${port}/${database}`;
  const query = async <R extends pg.QueryResultRow>(sql: string) => {
    const client = new pg.Client({ connectionString: url('postgres'), connectionTimeoutMillis: 5_000 });
    await client.connect();
    try {
      return (await client.query<R>(sql)).rows;
    } finally {
      await client.end();
    }
  };
  return {
    port,
    url,
    query,
    stop: () => asPostgres('pg_ctl', ['-D', data, '-m', 'fast', '-w', 'stop']).then(() => undefined),
    start,
    async waitForDatabase(name, timeoutMs = 15_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const rows = await query<{ n: number }>(`select count(*)::int as n from pg_database where datname = '${name.replace(/'/g, "''")}'`);
        if (rows[0]!.n === 1) return;
        if (Date.now() > deadline) throw new Error(`database ${name} did not appear on the standby within ${timeoutMs} ms`);
        await new Promise((r) => setTimeout(r, 50));
      }
    },
    destroy,
  };
}
