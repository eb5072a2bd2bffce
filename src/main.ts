import { ConfigError, loadConfig } from './config/index.js';
import { ensureLocalSecrets } from './config/dotenv.js';
import { createDatabaseIfMissing, createDb, migrateLatest } from './infra/db.js';
import { ensureServices, ServiceUnreachableError } from './infra/ensure-services.js';
import { createLogger } from './infra/logger.js';
import { startPlatform, type Role } from './platform.js';

const roles = ['all', 'api', 'worker', 'migrate'] as const;

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
  const migrator = createDb({ url: config.databaseUrl, poolMax: 1, timeoutMs: 30_000 });
  try {
    await migrateLatest(migrator);
  } finally {
    await migrator.destroy();
  }
  if (role === 'migrate') return;

  const platform = await startPlatform({ role: role as Role, config, logger });
  let signals = 0;
  const shutdown = (signal: string) => {
    if (++signals > 1) process.exit(1); // a second signal means "now"
    logger.info({ signal }, 'shutting down: finishing in-flight attempts');
    const force = setTimeout(() => process.exit(1), config.attemptTimeoutMs + 10_000);
    force.unref();
    platform.stop().then(
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

main().catch((err: unknown) => {
  // One line that says what is wrong and what to do; the stack only helps for unexpected errors.
  const message = err instanceof Error ? err.message : String(err);
  process.stderr.write(`error: ${message}\n`);
  if (!(err instanceof ConfigError) && !(err instanceof ServiceUnreachableError)) {
    process.stderr.write(`${(err as Error).stack ?? ''}\n`);
  }
  process.exit(1);
});
