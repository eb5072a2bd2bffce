import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import type { TestDatabase } from './database.js';

const run = promisify(execFile);

/**
 * The schema as pg_dump prints it, without comments and pg_dump's per-run \restrict key.
 * `timePartitions: false` leaves out the per-day and per-month partitions (`events_p20261201`,
 * `audit_log_p202612`): which of them exist depends on the day a database was made and the data it
 * holds, while their columns, indexes and triggers come from their parent tables, which stay in.
 * Only the platform's schema, `public`: test-only objects (the transition log) live in their own.
 */
export async function schemaDump(database: TestDatabase, opts: { timePartitions?: boolean } = {}): Promise<string> {
  const url = new URL(database.url);
  const args = ['--schema-only', '--schema=public', '--no-owner', '-h', url.hostname, '-p', url.port || '5432', '-U', url.username || 'postgres'];
  if (opts.timePartitions === false) args.push('--exclude-table=*_p[0-9]*');
  const { stdout } = await run('pg_dump', [...args, database.name], { maxBuffer: 64 * 1024 * 1024 });
  return stdout
    .split('\n')
    .filter((line) => line.trim() !== '' && !line.startsWith('--') && !/^\\(un)?restrict /.test(line))
    .join('\n');
}
