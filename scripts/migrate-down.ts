/**
 * `npm run migrate:down`: undoes the newest applied migration, one per run, with the code that
 * wrote it (an older version cannot undo what it never knew). Run it from the version you are
 * rolling back from, before starting the older one; see docs/operations/upgrade.md, "Rollback",
 * for what a down migration may lose. It also forgets which function sources were applied, so the
 * older release's `migrate` applies its own files (a newer release's files are otherwise kept, so
 * that an old process restarting mid-deploy cannot put back older text).
 */
import { ensureLocalSecrets } from '../src/config/dotenv.js';
import { loadConfig } from '../src/config/index.js';
import { createDb } from '../src/infra/db.js';
import { functionsTable } from '../src/infra/function-sources.js';
import { dropDetachedLeftoversBeforeMigrating } from '../src/store/partitions-store.js';

ensureLocalSecrets(process.env, process.env.ENV_FILE || '.env');
const config = loadConfig(process.env);
const db = createDb({ url: config.databaseUrl, poolMax: 1, timeoutMs: 30_000, unboundedStatements: true });
try {
  const [completed] = (await db.migrate.list()) as [Array<{ name: string }>, unknown];
  const newest = completed.at(-1);
  if (!newest) {
    process.stdout.write('migrate:down: no migration is applied; nothing to undo\n');
  } else {
    const leftovers = await dropDetachedLeftoversBeforeMigrating(db);
    if (leftovers.length > 0) process.stdout.write(`migrate:down: dropped ${leftovers.join(', ')}, detached by a retention run that did not get to drop them\n`);
    await db.migrate.down();
    if (await db.schema.hasTable(functionsTable)) await db(functionsTable).delete();
    const [after] = (await db.migrate.list()) as [Array<{ name: string }>, unknown];
    process.stdout.write(`migrate:down: undid ${newest.name}; newest applied is now ${after.at(-1)?.name ?? 'none'}\n`);
  }
} finally {
  await db.destroy();
}
