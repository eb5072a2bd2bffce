/**
 * `npm run bench`: measures the platform against the physical floors of this machine, in the same
 * run (see docs/performance.md). Starts what it needs: a fresh `whr_bench` database, its own Redis
 * key prefix, a loopback receiver process, and the platform as separate `src/main.ts` processes.
 * Prints a table and writes bench/results/latest.json (the published numbers) and
 * latest-details.json (everything behind them). Sizes are set by BENCH_* variables (bench/lib/config.ts).
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { createDb } from '../src/infra/db.js';
import { ensureServices } from '../src/infra/ensure-services.js';
import { killAllChildren, repoRoot, type PlatformSettings } from './lib/children.js';
import { benchConfig, type ScenarioName } from './lib/config.js';
import { clearRedisPrefix, type BenchContext } from './lib/context.js';
import { autovacuumForRun, dropDatabase, freshDatabase, postgresVersion } from './lib/database.js';
import { Receiver } from './lib/receiver.js';
import { isComplete, renderTable, summaryRows, type LatestJson } from './lib/report.js';
import { round } from './lib/stats.js';
import { runDispatch } from './scenarios/dispatch.js';
import { runDuplicateStorm } from './scenarios/duplicate-storm.js';
import { runFairness } from './scenarios/fairness.js';
import { runFlaky } from './scenarios/flaky.js';
import { runDrift } from './scenarios/drift.js';
import { runIntake } from './scenarios/intake.js';
import { runIsolation } from './scenarios/isolation.js';
import { runLatency } from './scenarios/latency.js';
import { runLive } from './scenarios/live.js';
import { runScale } from './scenarios/scale.js';
import { runRetention } from './scenarios/retention.js';
import { runStorage } from './scenarios/storage.js';
import { runTracing } from './scenarios/tracing.js';

const started = Date.now();
const log = (message: string) => process.stdout.write(`[bench ${((Date.now() - started) / 1000).toFixed(0).padStart(4)}s] ${message}\n`);

/** Puts back what the run changed on the server (autovacuum), when it is interrupted. */
let restoreOnInterrupt: (() => Promise<void>) | undefined;

for (const [signal, code] of [['SIGINT', 130], ['SIGTERM', 143]] as const) {
  process.on(signal, () => {
    killAllChildren();
    void (restoreOnInterrupt?.() ?? Promise.resolve()).finally(() => process.exit(code));
  });
}

const major = (version: string) => Number(/(\d+)/.exec(version)?.[1] ?? Number.NaN);

/**
 * Two runs at once would share the whr_bench database and each other's cores: refuse instead.
 * The lock file holds the pid of the running bench; a stale one (process gone) is taken over.
 */
function takeLock(resultsDir: string): () => void {
  const path = join(resultsDir, '.lock');
  try {
    const pid = Number(readFileSync(path, 'utf8'));
    if (pid && pid !== process.pid) {
      try {
        process.kill(pid, 0);
        throw new Error(`another bench run (pid ${pid}) is in progress; wait for it or remove ${path}`);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
      }
    }
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  writeFileSync(path, String(process.pid));
  return () => rmSync(path, { force: true });
}

async function main(): Promise<number> {
  const cfg = benchConfig;
  const resultsDir = join(repoRoot, 'bench', 'results');
  mkdirSync(resultsDir, { recursive: true });
  const releaseLock = takeLock(resultsDir);
  process.on('exit', releaseLock);
  await ensureServices(cfg.databaseUrl, cfg.redisUrl);
  log(`fresh database ${new URL(cfg.databaseUrl).pathname.slice(1)}, Redis prefix ${cfg.queuePrefix}`);
  await freshDatabase(cfg.databaseUrl);
  // The platform runs as production runs it: compiled JavaScript (dist/), node alone in front.
  log('npm run build');
  execFileSync('npm', ['run', '--silent', 'build'], { cwd: repoRoot, stdio: 'inherit' });
  const db = createDb({ url: cfg.databaseUrl, poolMax: 4, timeoutMs: 30_000 });
  const autovacuum = await autovacuumForRun(db, cfg.autovacuum);
  restoreOnInterrupt = autovacuum.restore;
  if (autovacuum.state.server !== autovacuum.state.during) log('autovacuum is off on this server: on for this run, as production runs it (BENCH_AUTOVACUUM=server leaves it)');
  else if (cfg.autovacuum === 'on' && autovacuum.state.during === 'off') log('autovacuum is off on this server and could not be turned on: numbers will not be production-like');
  const redis = new Redis(cfg.redisUrl, { maxRetriesPerRequest: 3 });
  const platformDbUrl = new URL(cfg.databaseUrl);
  if (cfg.platformDbOptions) platformDbUrl.searchParams.set('options', cfg.platformDbOptions);
  const settings: PlatformSettings = {
    databaseUrl: platformDbUrl.toString(),
    redisUrl: cfg.redisUrl,
    queuePrefix: cfg.queuePrefix,
    adminToken: `adm_${randomBytes(24).toString('base64url')}`,
    secretsKey: randomBytes(32).toString('base64'),
  };
  // 12 answering ports (one per endpoint), 1 that never answers, 1 that fails every tenth request.
  const receiver = await Receiver.start(12, 1, 1);
  const ctx: BenchContext = { config: cfg, settings, db, redis, receiver, log };

  const results: Partial<LatestJson> = {};
  const details: Record<string, unknown> = {};
  const failures: Record<string, string> = {};
  const durations: Record<string, number> = {};
  try {
    const redisVersion = /redis_version:(\S+)/.exec(await redis.info('server'))?.[1] ?? 'unknown';
    const pgVersion = await postgresVersion(db);
    results.machine = { cpus: os.cpus().length, node: major(process.versions.node), postgres: major(pgVersion.replace(/^PostgreSQL\s+/, '')), redis: major(redisVersion) };
    details.machine = {
      cpus: os.cpus().length,
      cpuModel: os.cpus()[0]?.model,
      memoryGb: round(os.totalmem() / 2 ** 30),
      node: process.versions.node,
      postgres: pgVersion,
      redis: redisVersion,
      // Other work on the machine competes for the same cores; the floors run in the same conditions.
      loadAverageAtStart: os.loadavg().map((v) => round(v, 2)),
      autovacuum: autovacuum.state,
    };

    const scenarios: Record<ScenarioName, () => Promise<void>> = {
      intake: async () => {
        const r = await runIntake(ctx);
        results.intake = { rps: r.rps, floorRps: r.floorRps, ratio: r.ratio, p99MsHalfLoad: r.p99MsHalfLoad, filteredRatio: r.filteredRatio };
        details.intake = r.details;
      },
      dispatch: async () => {
        const r = await runDispatch(ctx);
        results.dispatch = { rps: r.rps, floorRps: r.floorRps, ratio: r.ratio };
        results.memory = { rssMb: r.rssMb, idleRssMb: r.idleRssMb, backlog: r.backlog };
        details.dispatch = r.details;
      },
      isolation: async () => {
        const r = await runIsolation(ctx);
        results.isolation = { ratio: r.ratio };
        details.isolation = r.details;
      },
      latency: async () => {
        const r = await runLatency(ctx);
        results.latency = { p50Ms: r.p50Ms, p99Ms: r.p99Ms, coldP99Ms: r.coldP99Ms };
        details.latency = r.details;
      },
      duplicateStorm: async () => {
        const r = await runDuplicateStorm(ctx);
        results.duplicateStorm = { cpuRatio: r.cpuRatio };
        details.duplicateStorm = r.details;
      },
      live: async () => {
        const r = await runLive(ctx);
        results.live = { kneeRps: r.kneeRps };
        details.live = r.details;
      },
      scale: async () => {
        const r = await runScale(ctx);
        results.scale = { endpoints: r.endpoints, admissionMsP50: r.admissionMsP50, admissionMsIdle0P50: r.admissionMsIdle0P50, latencyP99Ms: r.latencyP99Ms };
        details.scale = r.details;
      },
      flaky: async () => {
        const r = await runFlaky(ctx);
        results.flaky = { lagSeconds: r.lagSeconds };
        details.flaky = r.details;
      },
      drift: async () => {
        const r = await runDrift(ctx);
        results.drift = { lastOverSecondP99: r.lastOverSecondP99 };
        details.drift = r.details;
      },
      fairness: async () => {
        const r = await runFairness(ctx);
        results.fairness = { ratio: r.ratio, bareRequestRatio: r.bareRequestRatio, platformRatio: r.platformRatio, backlogRatio: r.backlogRatio };
        details.fairness = r.details;
      },
      storage: async () => {
        const r = await runStorage(ctx);
        results.storage = { bytesPerEvent: r.bytesPerEvent };
        results.postgres = { cpuMsPerEvent: r.cpuMsPerEvent };
        details.storage = r.details;
      },
      retention: async () => {
        const r = await runRetention(ctx);
        results.retention = { dropMsPerMillion: r.dropMsPerMillion, deleteMsPerMillion: r.deleteMsPerMillion };
        details.retention = r.details;
      },
      tracing: async () => {
        const r = await runTracing(ctx);
        results.tracing = { overheadRatio: r.overheadRatio };
        details.tracing = r.details;
      },
    };
    for (const name of cfg.only) {
      const t0 = Date.now();
      log(`── ${name}`);
      try {
        await scenarios[name]();
      } catch (err) {
        failures[name] = err instanceof Error ? err.message : String(err);
        log(`${name} FAILED: ${failures[name]}`);
      }
      durations[name] = round((Date.now() - t0) / 1000);
    }
  } finally {
    await autovacuum.restore().catch((err: unknown) => log(`could not put autovacuum back: ${String(err)}`));
    await receiver.stop();
    killAllChildren();
    await clearRedisPrefix(redis, cfg.queuePrefix).catch(() => undefined);
    redis.disconnect();
    await db.destroy();
    if (!cfg.keepDatabase) await dropDatabase(cfg.databaseUrl).catch(() => undefined);
  }

  if (details.machine) (details.machine as Record<string, unknown>).loadAverageAtEnd = os.loadavg().map((v) => round(v, 2));
  const complete = isComplete(cfg.only) && Object.keys(failures).length === 0;
  const base = complete ? 'latest' : 'partial';
  const ordered = complete
    ? {
        intake: results.intake,
        dispatch: results.dispatch,
        isolation: results.isolation,
        latency: results.latency,
        memory: results.memory,
        duplicateStorm: results.duplicateStorm,
        live: results.live,
        scale: results.scale,
        flaky: results.flaky,
        fairness: results.fairness,
        storage: results.storage,
        postgres: results.postgres,
        retention: results.retention,
        tracing: results.tracing,
        machine: results.machine,
      }
    : results;
  writeFileSync(join(resultsDir, `${base}.json`), `${JSON.stringify(ordered, null, 2)}\n`);
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => k.startsWith('BENCH_')));
  writeFileSync(
    join(resultsDir, `${base}-details.json`),
    `${JSON.stringify({ finishedAt: new Date().toISOString(), totalSeconds: round((Date.now() - started) / 1000), env, config: cfg, durations, failures, details }, null, 2)}\n`,
  );

  process.stdout.write(`\n${renderTable(summaryRows(results))}\n\n`);
  const m = details.machine as { cpus: number; node: string; redis: string; postgres: string } | undefined;
  if (m) process.stdout.write(`machine: ${m.cpus} CPUs, node ${m.node}, redis ${m.redis}, ${m.postgres.split(' on ')[0]}\n`);
  process.stdout.write(`scenario seconds: ${JSON.stringify(durations)}; total ${round((Date.now() - started) / 1000)} s\n`);
  process.stdout.write(`wrote bench/results/${base}.json and ${base}-details.json\n`);
  if (Object.keys(failures).length > 0) {
    process.stdout.write(`failed: ${Object.keys(failures).join(', ')}\n`);
    return 1;
  }
  return 0;
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    killAllChildren();
    process.stderr.write(`bench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
