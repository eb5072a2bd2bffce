import { configDefaults, defineConfig } from 'vitest/config';
import base from './vitest.config.js';

/**
 * Integration files that `npm run test:fast` leaves to `npm test`: each spends most of its time
 * starting processes or external tools, or waiting out timers by design, rather than exercising
 * the code a change usually touches.
 * `npm test` still runs every one of them, and CI runs `npm test`.
 */
export const slowFiles: Record<string, string> = {
  'test/integration/compiled-build.test.ts': 'compiles the whole tree (`npm run build`) and starts dist/main.js',
  'test/integration/npm-start.test.ts': 'runs `npm start` as a child process several times, each booting tsx',
  'test/integration/dispatch-process.test.ts': 'starts worker processes and waits for their SIGTERM drains',
  'test/integration/dispatch-recovery.test.ts': 'starts a private redis-server to lose every key mid-run',
  'test/integration/dispatch-redis-cluster.test.ts': 'starts a Redis Cluster and worker processes',
  'test/integration/ordering-sigkill.test.ts': 'SIGKILLs and restarts worker processes',
  'test/integration/port-in-use.test.ts': 'starts platform processes to see them refuse a taken port',
  'test/integration/openapi-tooling.test.ts': 'runs Redocly, openapi-typescript and tsc over the generated client',
  'test/integration/observability.test.ts': 'starts Prometheus and worker processes (needs the prometheus package)',
  'test/integration/prometheus-helper.test.ts': 'starts Prometheus (needs the prometheus package)',
  'test/integration/promtool.test.ts': 'runs promtool over the rules and /metrics (needs the prometheus package)',
  'test/integration/migrations.test.ts': 'takes every migration down and up several times; run it directly after changing one',
  'test/integration/replay-pacing.test.ts': 'spreads replays over seconds of wall time by design, to measure the pacing',
  'test/integration/intake-storage-outage.test.ts': 'waits out the database connect and statement timeouts by design',
  'test/integration/upgrade.test.ts': 'restores the release snapshot with psql and waits out its in-flight leases',
  'test/integration/backup-drill.test.ts': 'pg_dump and pg_restore of a delivering platform, then a second platform',
  'test/integration/settings-during-drain.test.ts': 'drains backlogs through slow receivers, seconds each, by design',
  'test/integration/endpoint-pause.test.ts': 'holds a backlog paused for 10 s by design',
  'test/integration/read-replica.test.ts': 'starts a hot standby (pg_basebackup, pg_ctl) and waits out the replica lag limit by design',
};

/**
 * The inner loop: unit and integration tests without the slow files above. Security, chaos and
 * end-to-end suites run in `npm test` only.
 */
export default defineConfig({
  ...base,
  test: {
    ...base.test,
    include: ['test/unit/**/*.test.ts', 'test/integration/**/*.test.ts', 'src/**/*.test.ts'],
    exclude: [...configDefaults.exclude, ...Object.keys(slowFiles)],
    // Most of an isolated run goes to each file's fresh process loading the whole dependency tree
    // again; here each worker loads it once. `npm test` keeps isolation, so a file that leans on
    // another's leftovers still fails there.
    isolate: false,
  },
});
