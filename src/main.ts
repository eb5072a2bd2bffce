import { ConfigError, loadConfig } from './config/index.js';
import { ensureLocalSecrets } from './config/dotenv.js';
import { createDatabaseIfMissing, createDb, migrateLatest } from './infra/db.js';
import { ensureServices, ServiceUnreachableError } from './infra/ensure-services.js';
import { createLogger } from './infra/logger.js';
import { dropDetachedLeftoversBeforeMigrating } from './store/partitions-store.js';
import type { Role } from './platform.js';
import { currentRelease } from './infra/release.js';
import { startTracing, stopTracing } from './infra/tracing.js';
import type { Config } from './config/index.js';
import type { Logger } from 'pino';

const roles = ['all', 'api', 'worker', 'migrate', 'retention'] as const;

async function main(): Promise<void> {
  const role = (process.argv[2] ?? 'all') as (typeof roles)[number];
  if (!roles.includes(role)) throw new ConfigError(`unknown role "${role}"; use one of: ${roles.join(', ')}`);
  // ENV_FILE (default `.env`, relative to the working directory) says where locally generated
  // secrets are kept; read before configuration exists, so it is not part of the env schema. Tests
  // point it at a temporary file to start `npm start` from nothing without touching the clone's `.env`.
  const { generatedAdminToken } = ensureLocalSecrets(process.env, process.env.ENV_FILE || '.env');
  const config = loadConfig(process.env);
  const logger = createLogger(config.logLevel);
  if (generatedAdminToken) {
    // Printed once, on the start that created it; later starts read it from .env.
    process.stdout.write(`\nGenerated ADMIN_TOKEN (kept in .env): ${generatedAdminToken}\n\n`);
  }

  await ensureServices(config.databaseUrl, config.redisUrl, config.redisClusterNodes);
  await createDatabaseIfMissing(config.databaseUrl);
  const migrator = createDb({ url: config.databaseUrl, poolMax: 1, timeoutMs: 30_000, unboundedStatements: true });
  try {
    const leftovers = await dropDetachedLeftoversBeforeMigrating(migrator);
    if (leftovers.length > 0) logger.info({ partitions: leftovers }, 'dropped partitions a retention run had detached but not dropped');
    await migrateLatest(migrator, undefined, {
      onDatabaseAhead: (unknown) =>
        logger.warn({ unknownMigrations: unknown }, 'the database is at a newer release than this code; running on it without migrating'),
    });
  } finally {
    await migrator.destroy();
  }
  if (role === 'migrate') return;
  if (role === 'retention') return runRetentionOnce(config, logger, process.argv.slice(3));

  // Before the platform is built: the API's request spans are set up when its app is made.
  if (await startTracing(process.env, currentRelease, role)) logger.info('tracing: exporting spans over OTLP/HTTP');
  // Imported here, not at the top: `migrate` and `retention` need none of it, and platform.ts imports
  // each role's own parts only for that role (docs/architecture.md, "Role-specific imports").
  const { startPlatform } = await import('./platform.js');
  const platform = await startPlatform({ role: role as Role, config, logger });
  let signals = 0;
  const shutdown = (signal: string) => {
    if (++signals > 1) process.exit(1); // a second signal means "now"
    logger.info({ signal }, 'shutting down: finishing in-flight attempts');
    const force = setTimeout(() => process.exit(1), config.attemptTimeoutMs + 10_000);
    force.unref();
    platform.stop().then(stopTracing).then(
      () => process.exit(0),
      (err: unknown) => {
        logger.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
}

/**
 * `npm run retention [-- --dry-run]`: one retention run now, as the worker makes hourly; with
 * --dry-run it prints what would be removed and changes nothing (not even partitions ahead).
 */
async function runRetentionOnce(config: Config, logger: Logger, args: string[]): Promise<void> {
  const unknown = args.filter((a) => a !== '--dry-run');
  if (unknown.length > 0) throw new ConfigError(`retention: unknown argument "${unknown[0]}"; the only option is --dry-run`);
  const dryRun = args.includes('--dry-run');
  const { Retention } = await import('./ops/retention.js');
  const db = createDb({ url: config.databaseUrl, poolMax: 2, timeoutMs: 30_000 });
  try {
    const report = await new Retention({ db, policy: config.retention, logger }).run({ dryRun });
    if (!report) throw new Error('retention: another process is running retention now; try again when it has finished');
    const verb = dryRun ? 'would remove' : 'removed';
    const { retentionDays, deadLetterRetentionDays, auditRetentionDays } = config.retention;
    process.stdout.write(
      `retention${dryRun ? ' (dry run: nothing changed)' : ''}: RETENTION_DAYS=${retentionDays}, DEAD_LETTER_RETENTION_DAYS=${deadLetterRetentionDays}, AUDIT_RETENTION_DAYS=${auditRetentionDays}\n` +
        Object.entries(report.removed).map(([table, rows]) => `  ${table.padEnd(12)} ${verb} ${rows} rows\n`).join('') +
        `  partitions   ${verb} ${report.partitions.length}${report.partitions.length ? `: ${report.partitions.join(', ')}` : ''}\n` +
        report.held.map((h) => `  kept         ${h.partition}: ${h.reason}\n`).join('') +
        (report.orphaned.length ? `  orphaned     ${verb} ${report.orphaned.length} unfinished deliveries whose event was gone: ${report.orphaned.join(', ')}\n` : ''),
    );
  } finally {
    await db.destroy();
  }
}

main().catch((err: unknown) => {
  // One line that says what is wrong and what to do; the stack only helps for unexpected errors.
  const message = err instanceof Error ? err.message : String(err);
  process.stderr.write(`error: ${message}\n`);
  if (!(err instanceof ConfigError) && !(err instanceof ServiceUnreachableError)) {
    process.stderr.write(`${(err as Error).stack ?? ''}\n`);
  }
  process.exit(1);
});
