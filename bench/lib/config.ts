/**
 * Every knob of the benchmark, read once from the environment. With the defaults, on a 2-core
 * machine, the whole run takes about 45 minutes, fairness about 20 of them (each of its cases
 * three times, on two topologies); every size can be changed to take a second data point (for
 * example BENCH_DISPATCH_BACKLOG=10000 or BENCH_DISPATCH_WORKERS=2).
 */

function int(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  if (!/^\d+$/.test(raw)) throw new Error(`${name} must be a whole number, got "${raw}"`);
  return Number(raw);
}

/** A count that must be at least 1 (a median of none is no number). */
function atLeastOne(name: string, fallback: number): number {
  const n = int(name, fallback);
  if (n < 1) throw new Error(`${name} must be at least 1, got ${n}`);
  return n;
}

function str(name: string, fallback: string): string {
  const raw = process.env[name];
  return raw === undefined || raw === '' ? fallback : raw;
}

function platformEnv(raw: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const pair of raw.split(',').map((p) => p.trim()).filter(Boolean)) {
    const eq = pair.indexOf('=');
    if (eq <= 0) throw new Error(`BENCH_PLATFORM_ENV: expected KEY=VALUE, got "${pair}"`);
    env[pair.slice(0, eq)] = pair.slice(eq + 1);
  }
  return env;
}

export const scenarioNames = ['intake', 'dispatch', 'isolation', 'latency', 'duplicateStorm', 'live', 'scale', 'flaky', 'fairness', 'storage', 'retention', 'tracing'] as const;
/** Run only when BENCH_ONLY names them: too long for every run. */
export const optionalScenarioNames = ['drift'] as const;
export type ScenarioName = (typeof scenarioNames)[number] | (typeof optionalScenarioNames)[number];

function oneOf<T extends string>(name: string, value: string, allowed: readonly T[]): T {
  if (!(allowed as readonly string[]).includes(value)) throw new Error(`${name}: use one of ${allowed.join(', ')}, got "${value}"`);
  return value as T;
}

function selectedScenarios(): ScenarioName[] {
  const raw = str('BENCH_ONLY', '');
  if (raw === '') return [...scenarioNames];
  const picked = raw.split(',').map((s) => s.trim());
  for (const name of picked) {
    if (![...scenarioNames, ...optionalScenarioNames].includes(name as ScenarioName)) {
      throw new Error(`BENCH_ONLY: unknown scenario "${name}"; use ${[...scenarioNames, ...optionalScenarioNames].join(', ')}`);
    }
  }
  return picked as ScenarioName[];
}

export type Topology = 'separate' | 'all';
function topologies(raw: string): Topology[] {
  const picked = raw.split(',').map((s) => s.trim());
  for (const t of picked) if (t !== 'separate' && t !== 'all') throw new Error(`BENCH_FAIRNESS_TOPOLOGIES: unknown "${t}"; use separate, all`);
  return picked as Topology[];
}

export type FairnessCase = 'burst' | 'backlog';
function fairnessCases(raw: string): FairnessCase[] {
  const picked = raw.split(',').map((s) => s.trim());
  for (const c of picked) if (c !== 'burst' && c !== 'backlog') throw new Error(`BENCH_FAIRNESS_CASES: unknown "${c}"; use burst, backlog`);
  return picked as FairnessCase[];
}

export const benchConfig = {
  /** Comma-separated subset; a partial run writes bench/results/partial.json instead of latest.json. */
  only: selectedScenarios(),
  databaseUrl: str('BENCH_DATABASE_URL', 'postgres://postgres@127.0.0.1:5432/whr_bench'),
  redisUrl: str('BENCH_REDIS_URL', 'redis://127.0.0.1:6379'),
  queuePrefix: str('BENCH_QUEUE_PREFIX', 'whr_bench'),
  /** 1: run the measured platform processes under `node --cpu-prof` (slower; numbers are not headline numbers). */
  cpuProf: str('BENCH_CPU_PROF', '0') === '1',
  /** 1: sample pg_stat_activity during dispatch and intake (where PostgreSQL spends its time). */
  pgSample: str('BENCH_PG_SAMPLE', '0') === '1',
  /** 1: record what PostgreSQL, the disk and I/O pressure did every 10 ms of intake's half-load run, and report the slow spans (bench/lib/stall-sampler.ts). */
  stallSample: str('BENCH_STALL_SAMPLE', '0') === '1',
  /**
   * Diagnostics only: PostgreSQL session options for the platform's connections, e.g.
   * "-c synchronous_commit=off" to measure how much of a path is commit (WAL flush) latency.
   * Never a recommendation for production: it gives up durability of the last commits on a crash.
   */
  platformDbOptions: str('BENCH_PLATFORM_DB_OPTIONS', ''),
  /** `on`: a server found with autovacuum off gets it on for the run, as production runs (bench/lib/database.ts); `server`: as found. */
  autovacuum: oneOf('BENCH_AUTOVACUUM', str('BENCH_AUTOVACUUM', 'on'), ['on', 'server'] as const),
  /** Extra environment for every platform process, "KEY=VALUE,KEY=VALUE" (e.g. DB_POOL_MAX=50). */
  platformEnv: platformEnv(str('BENCH_PLATFORM_ENV', '')),
  /** 1: keep the whr_bench database after the run, for inspection. */
  keepDatabase: str('BENCH_KEEP_DB', '0') === '1',
  /** Size of one ordinary payload (`data`) in bytes, used by every scenario. */
  payloadBytes: int('BENCH_PAYLOAD_BYTES', 400),

  intake: {
    tenants: int('BENCH_INTAKE_TENANTS', 10),
    connections: int('BENCH_INTAKE_CONNECTIONS', 50),
    warmupSeconds: int('BENCH_INTAKE_WARMUP_SECONDS', 3),
    seconds: int('BENCH_INTAKE_SECONDS', 15),
    halfLoadSeconds: int('BENCH_INTAKE_HALF_LOAD_SECONDS', 15),
    /** Filtered endpoints each tenant gains for `intake.filteredRatio`. */
    filteredEndpoints: int('BENCH_INTAKE_FILTERED_ENDPOINTS', 100),
  },
  dispatch: {
    backlog: int('BENCH_DISPATCH_BACKLOG', 100_000),
    endpoints: int('BENCH_DISPATCH_ENDPOINTS', 10),
    endpointConcurrency: int('BENCH_DISPATCH_ENDPOINT_CONCURRENCY', 10),
    workers: int('BENCH_DISPATCH_WORKERS', 1),
    floorSeconds: int('BENCH_DISPATCH_FLOOR_SECONDS', 10),
    /**
     * Upper bound on draining the backlog, so the whole run stays within its time budget on a slow
     * machine: past it, the rate is what succeeded so far over the time taken (reported as partial).
     */
    maxDrainSeconds: int('BENCH_DISPATCH_MAX_DRAIN_SECONDS', 240),
  },
  isolation: {
    healthyPerEndpoint: int('BENCH_ISOLATION_HEALTHY_BACKLOG', 5_000),
    hangingBacklog: int('BENCH_ISOLATION_HANGING_BACKLOG', 5_000),
    attemptTimeoutMs: int('BENCH_ISOLATION_ATTEMPT_TIMEOUT_MS', 10_000),
    warmupSeconds: int('BENCH_ISOLATION_WARMUP_SECONDS', 2),
    /** Longer than the attempt timeout, so the window covers hung attempts timing out and retrying. */
    windowSeconds: int('BENCH_ISOLATION_WINDOW_SECONDS', 15),
  },
  latency: {
    rate: int('BENCH_LATENCY_RATE', 200),
    seconds: int('BENCH_LATENCY_SECONDS', 25),
    /** Events sent in the first seconds are excluded from the percentile (JIT and pool warm-up). */
    warmupSeconds: int('BENCH_LATENCY_WARMUP_SECONDS', 2),
    endpoints: int('BENCH_LATENCY_ENDPOINTS', 1),
    /** latency.coldP99Ms: how long a freshly started process is measured from the moment it is ready. */
    coldSeconds: int('BENCH_LATENCY_COLD_SECONDS', 3),
    /**
     * Fresh processes measured, each on a reset database: latency.coldP99Ms is the median of their
     * p99s, since one start's read anywhere from 35 to 470 ms for one tree within twenty minutes
     * (docs/performance.md, "The full run, on a slower host").
     */
    coldStarts: atLeastOne('BENCH_LATENCY_COLD_STARTS', 3),
    /** How long to wait for the last deliveries after the last publish; later ones count as lower bounds. */
    drainSeconds: int('BENCH_LATENCY_DRAIN_SECONDS', 60),
  },
  duplicateStorm: {
    n: int('BENCH_DUP_N', 5_000),
    copies: int('BENCH_DUP_COPIES', 5),
    connections: int('BENCH_DUP_CONNECTIONS', 20),
    warmup: int('BENCH_DUP_WARMUP', 2_000),
  },
  live: {
    /** Rates are stepped 100, 200, 400, 600, … (+200) up to this, stopping at the first that fails. */
    maxRps: int('BENCH_LIVE_MAX_RPS', 2_000),
    seconds: int('BENCH_LIVE_SECONDS', 20),
    warmupSeconds: int('BENCH_LIVE_WARMUP_SECONDS', 2),
    /** A delivery missing this long after the last publish fails the step whatever the percentile. */
    drainSeconds: int('BENCH_LIVE_DRAIN_SECONDS', 10),
  },
  scale: {
    /** Idle endpoints (active, nothing pending) added before the second admission timing. */
    endpoints: int('BENCH_SCALE_ENDPOINTS', 100_000),
    admissionRounds: int('BENCH_SCALE_ADMISSION_ROUNDS', 30),
    admissionWarmupRounds: int('BENCH_SCALE_ADMISSION_WARMUP_ROUNDS', 5),
    latencyRate: int('BENCH_SCALE_LATENCY_RATE', 100),
    latencySeconds: int('BENCH_SCALE_LATENCY_SECONDS', 20),
  },
  flaky: {
    rate: int('BENCH_FLAKY_RATE', 100),
    seconds: int('BENCH_FLAKY_SECONDS', 300),
    /** lagSeconds is the largest lag in this last part of the stream. */
    windowSeconds: int('BENCH_FLAKY_WINDOW_SECONDS', 60),
    /** Unfinished deliveries are counted when the stream stops and again this much later. */
    settleSeconds: int('BENCH_FLAKY_SETTLE_SECONDS', 30),
  },
  drift: {
    rate: int('BENCH_DRIFT_RATE', 100),
    seconds: int('BENCH_DRIFT_SECONDS', 480),
  },
  storage: {
    events: int('BENCH_STORAGE_EVENTS', 20_000),
    payloadBytes: int('BENCH_STORAGE_PAYLOAD_BYTES', 400),
    /** Passes from a fresh state; each field is the median of the passes. */
    passes: atLeastOne('BENCH_STORAGE_PASSES', 3),
    /** Days of partitions made before each pass, as a database keeps them at the default RETENTION_DAYS. */
    pastDays: int('BENCH_STORAGE_PAST_DAYS', 30),
    /** How long those partitions are: unset, as the platform makes them for that many days kept (dayTablesPeriod). */
    period: str('BENCH_STORAGE_PERIOD', '') === '' ? undefined : oneOf('BENCH_STORAGE_PERIOD', str('BENCH_STORAGE_PERIOD', ''), ['day', 'week'] as const),
  },
  retention: {
    /** Attempt rows removed each way (one partition dropped, the same number DELETEd); reported per million. */
    rows: int('BENCH_RETENTION_ROWS', 1_000_000),
    /** Pairs of days removed (one dropped, one deleted each); each side is their median. */
    pairs: atLeastOne('BENCH_RETENTION_PAIRS', 3),
  },
  tracing: {
    /** Alternating off/on pairs of each measurement. */
    rounds: int('BENCH_TRACING_ROUNDS', 4),
    /** Which sides to measure (`intake,dispatch`); one alone is for experiments, and reports no overheadRatio. */
    parts: str('BENCH_TRACING_PARTS', 'intake,dispatch').split(',').map((p) => p.trim()),
    /** The sampler of the "on" side; tracing.overheadRatio is defined at a ratio of 1.0. */
    sampler: { name: str('BENCH_TRACING_SAMPLER', 'parentbased_traceidratio'), arg: str('BENCH_TRACING_SAMPLER_ARG', '1.0') },
    connections: int('BENCH_TRACING_CONNECTIONS', 50),
    /**
     * Intake's offered rate, the same with tracing off and on: below what either takes on 2 cores,
     * so both sides batch their commits alike (see bench/scenarios/tracing.ts).
     */
    intakeRate: int('BENCH_TRACING_INTAKE_RATE', 1_000),
    warmupSeconds: int('BENCH_TRACING_WARMUP_SECONDS', 3),
    intakeSeconds: int('BENCH_TRACING_INTAKE_SECONDS', 8),
    backlog: int('BENCH_TRACING_BACKLOG', 20_000),
    /**
     * Deliveries a fresh worker drains before the measured backlog, as intake warms up first: a
     * fresh worker's drain costs more and moves more from run to run (docs/performance.md,
     * "Tracing's cost on a warm worker"). 0 measures the fresh worker's drain alone.
     */
    warmupBacklog: int('BENCH_TRACING_WARMUP_BACKLOG', 20_000),
    endpoints: int('BENCH_TRACING_ENDPOINTS', 4),
    maxDrainSeconds: int('BENCH_TRACING_MAX_DRAIN_SECONDS', 120),
  },
  fairness: {
    /** Tenant B's steady rate, alone and during tenant A's burst. */
    rate: int('BENCH_FAIRNESS_RATE', 20),
    /**
     * The burst case's two measured phases: long enough that B's p99 is not its third largest
     * delivery (docs/performance.md, "The burst case over 45 s").
     */
    seconds: int('BENCH_FAIRNESS_SECONDS', 45),
    /** The first seconds of A's burst, whose p99 the details report apart from the rest's. */
    onsetSeconds: int('BENCH_FAIRNESS_ONSET_SECONDS', 5),
    /** Before B's alone phase is measured (fresh process); the burst phase runs on a warm one. */
    warmupSeconds: int('BENCH_FAIRNESS_WARMUP_SECONDS', 2),
    /** A's burst: enough to outlast B's phase; the case fails if it runs out first. */
    burst: int('BENCH_FAIRNESS_BURST', 120_000),
    burstConnections: int('BENCH_FAIRNESS_CONNECTIONS', 20),
    drainSeconds: int('BENCH_FAIRNESS_DRAIN_SECONDS', 30),
    /** Tenant A's backlog for `backlogRatio`: this many events, each to all 5 of A's endpoints. */
    backlogEvents: int('BENCH_FAIRNESS_BACKLOG_EVENTS', 20_000),
    /**
     * B's measured seconds alone and while A's backlog drains: shorter than the drain takes
     * (checked), and long enough that B's p99 is not its second largest delivery
     * (docs/performance.md, "The backlog case over 45 s, three times").
     */
    backlogSeconds: int('BENCH_FAIRNESS_BACKLOG_SECONDS', 45),
    /** How long after A's drain begins B's second phase starts: past the bulk insert's aftermath. */
    backlogSettleMs: int('BENCH_FAIRNESS_BACKLOG_SETTLE_MS', 2_000),
    /**
     * Which ways of running the platform are measured, in order: `separate` (api and worker
     * processes, as deployed; the published numbers) and `all` (one process, `npm start`).
     */
    topologies: topologies(str('BENCH_FAIRNESS_TOPOLOGIES', 'separate,all')),
    /**
     * Runs of each case, each on fresh processes and a reset database: the published numbers are the
     * median run's, since B's p99 alone read near 8 ms on some starts and near 11 ms on others of
     * the same tree (docs/performance.md, "The backlog case over 45 s, three times").
     */
    runs: atLeastOne('BENCH_FAIRNESS_RUNS', 3),
    /** Which cases run: `burst` (A publishing as fast as it can) and `backlog` (A's backlog draining). */
    cases: fairnessCases(str('BENCH_FAIRNESS_CASES', 'burst,backlog')),
  },
};

export type BenchConfig = typeof benchConfig;
