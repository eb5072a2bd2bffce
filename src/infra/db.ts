import knexFactory, { type Knex } from 'knex';
import pg from 'pg';
import type { Logger } from 'pino';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { applyFunctionSources, functionsDirectory } from './function-sources.js';
import { keepAliveIdleMs } from './keepalive.js';
import { DirectoryMigrationSource } from './migration-source.js';
import { warmConnection, type WarmUp } from './sql.js';

// COUNT(*) and bigserial come back as strings by default; every count here fits in a double.
pg.types.setTypeParser(pg.types.builtins.INT8, (v) => Number.parseInt(v, 10));

/**
 * In a build the migrations sit beside the compiled code (dist/migrations, tsconfig.migrations.json);
 * in the sources, at the repository root.
 */
const builtMigrations = new URL('../migrations', import.meta.url);
export const migrationsDirectory = fileURLToPath(existsSync(builtMigrations) ? builtMigrations : new URL('../../migrations', import.meta.url));

export interface DbOptions {
  url: string;
  poolMax?: number;
  /** Bounds every wait on PostgreSQL so an outage becomes a 503, never a hung request: a connection within it, a statement within twice it. */
  timeoutMs?: number;
  /**
   * The server cancels a statement at one and a half times `timeoutMs`, before the client stops
   * waiting for it: a statement the client gave up on would otherwise still commit, unseen, such
   * as an admission whose deliveries then sit in flight for no process until their lease runs out
   * and costs each an attempt never made. For the pools of requests and dispatch, whose statements
   * are short by design; not for maintenance (retention), where a long statement that finishes
   * after its client stopped waiting is still progress.
   */
  cancelOnServer?: boolean;
  /**
   * Where knex's own warnings go ("Connection Error", "Acquire connection error" with a stack,
   * once per failed connection during an outage). Without it knex writes them to the console,
   * unstructured and regardless of LOG_LEVEL.
   */
  logger?: Pick<Logger, 'warn' | 'info' | 'debug'>;
  /** Connections the pool keeps open once made (see warmPool); none by default. */
  poolMin?: number;
  /** Run on every new pooled connection before its first use (see WarmUp in sql.ts). */
  warmUps?: readonly WarmUp[];
  /**
   * Statements run as long as they need: `migrate` and `migrate:down`, where a migration that
   * rewrites a table takes time in proportion to its rows, and giving up would roll back work that
   * is only ever tried again from the start.
   */
  unboundedStatements?: boolean;
}

/**
 * How many new connections a process warms at once before it serves. Planning a hot statement
 * locks every partition of `events` and its indexes until the warm-up ends, and a whole pool
 * planning at once can fill PostgreSQL's lock table (docs/operations/postgres.md).
 */
export const warmUpsAtOnce = 2;

/** How long the server lets one statement run in a pool that cancels on the server (DbOptions). */
export const statementTimeoutMs = (timeoutMs: number) => Math.round(timeoutMs * 1.5);

/**
 * What every pooled connection sets before its first statement. JIT off: the cost of a cached
 * generic plan follows the table statistics it was planned with, and once they count a large
 * backlog, short statements (a hand-off's pick, an admission round's candidates) crossed
 * jit_above_cost and were compiled again on every call: 14 ms for a few rows, ~145 ms for a round
 * (docs/performance.md, "A backlog that made every statement compile").
 */
function sessionSettings(cancelOnServer: boolean, timeoutMs: number): string {
  return ['SET jit = off', ...(cancelOnServer ? [`SET statement_timeout = ${statementTimeoutMs(timeoutMs)}`] : [])].join('; ');
}

export function createDb({ url, poolMax = 20, poolMin = 0, timeoutMs = 5_000, cancelOnServer = false, logger, warmUps = [], unboundedStatements = false }: DbOptions): Knex {
  const setUp = sessionSettings(cancelOnServer, timeoutMs);
  const min = Math.min(poolMin, poolMax);
  const refill = min > 0 ? new PoolRefill(min, logger) : undefined;
  const db = knexFactory({
    ...(logger && {
      log: {
        warn: (detail: unknown) => logger.warn({ detail: String(detail) }, 'database client warning'),
        error: (detail: unknown) => logger.warn({ detail: String(detail) }, 'database client error'),
        deprecate: (detail: unknown) => logger.debug({ detail: String(detail) }, 'database client deprecation'),
        debug: (detail: unknown) => logger.debug({ detail: String(detail) }, 'database client debug'),
      },
    }),
    client: 'pg',
    connection: {
      connectionString: url,
      connectionTimeoutMillis: timeoutMs,
      ...(!unboundedStatements && { query_timeout: timeoutMs * 2 }),
      keepAlive: true,
      keepAliveInitialDelayMillis: keepAliveIdleMs,
    },
    pool: {
      min,
      max: poolMax,
      idleTimeoutMillis: 30_000,
      // The settings with SET, not as startup parameters, which PgBouncer refuses by default.
      // Each connection made later under load is also warm before its first statement.
      afterCreate: (conn: pg.Client, done: (err: Error | null, conn: pg.Client) => void) => {
        conn
          .query(setUp)
          .then(() => warmConnection(conn, warmUps))
          .then(
            (failed) => {
              if (failed) logger?.warn({ err: failed }, 'warming a database connection failed; it is used unwarmed');
              // pg emits 'error' on a connected client only when its connection died unasked.
              if (refill) conn.on('error', () => refill.lost());
              done(null, conn);
            },
            // SET, BEGIN or ROLLBACK failed: the connection is broken, so it is closed, not pooled.
            (err: Error) => void conn.end().catch(() => undefined).finally(() => done(err, conn)),
          );
      },
    },
    acquireConnectionTimeout: timeoutMs,
    migrations: { migrationSource: new DirectoryMigrationSource(migrationsDirectory) },
  });
  refill?.attach(db);
  return db;
}

/**
 * Opens a pool's connections again up to its `min` after some died (PostgreSQL restarted or failed
 * over, a network path was cut). tarn opens connections only for an acquire that waits, so without
 * this the first burst after a restart would pay for opening and warming each one, which is what
 * warmPool spares a process at start. Tried again with backoff while the server refuses every
 * connection; when it lets some through (its max_connections full), the pool keeps those, as at
 * start, and grows under load if it can. A round holds the pool's idle connections while it opens
 * the rest, which takes milliseconds unless the server is unreachable, when requests fail anyway.
 */
class PoolRefill {
  #db: Knex | undefined;
  #running = false;
  #again = false;
  #retry: NodeJS.Timeout | undefined;
  #failures = 0;

  constructor(
    private readonly min: number,
    private readonly logger?: Pick<Logger, 'warn' | 'info' | 'debug'>,
  ) {}

  attach(db: Knex): void {
    this.#db = db;
  }

  /** A pooled connection died: refill once the current round (if any) is over. */
  lost(): void {
    if (this.#running) this.#again = true;
    else if (!this.#retry) void this.#refill();
  }

  async #refill(): Promise<void> {
    // knex clears its pool when destroyed; a connection that dies during shutdown leaves it so.
    const pool = this.#db?.client.pool as { numUsed(): number } | undefined;
    const wanted = pool ? this.min - pool.numUsed() : 0;
    if (wanted <= 0) return;
    this.#running = true;
    this.#again = false;
    let round: WarmedPool;
    try {
      // Acquiring takes the idle connections first: knex's validation drops the dead ones among
      // them and tarn opens (and warms) new ones in their place, up to `min` with those in use.
      round = await warmPool(this.#db!, wanted).catch((err: unknown) => ({ opened: 0, refused: err }));
    } finally {
      this.#running = false;
    }
    if (!this.#db?.client.pool) return;
    const { opened, refused } = round;
    if (refused === undefined || opened > 0) {
      if (refused === undefined) this.logger?.info({ connections: opened, afterFailures: this.#failures }, 'reopened the database pool');
      else this.logger?.warn({ err: refused, opened, wanted }, 'reopened only part of the database pool: going on with those connections');
      this.#failures = 0;
      if (this.#again) void this.#refill();
      return;
    }
    this.#failures++;
    this.logger?.debug({ err: refused, failures: this.#failures }, 'could not reopen the database pool yet; trying again');
    const delayMs = Math.min(refillMaxDelayMs, refillFirstDelayMs * 2 ** (this.#failures - 1));
    this.#retry = setTimeout(() => {
      this.#retry = undefined;
      void this.#refill();
    }, delayMs).unref();
  }
}

const refillFirstDelayMs = 500;
const refillMaxDelayMs = 10_000;

export interface WarmedPool {
  opened: number;
  /** Why the rest could not be opened (the driver's error), when some of them could. */
  refused?: unknown;
}

/**
 * Opens `count` pooled connections (each warmed as it is made, see DbOptions.warmUps) and gives
 * them back to the pool, which keeps up to its `min` of them: what a process does before it
 * reports ready, so its first requests wait for neither a connection nor a cold statement.
 * `atOnce` opens them in waves of that many, holding each wave while the next opens, so that new
 * ones are made; a refill while serving opens all at once, to hold the pool's connections briefly.
 * When only some open (the server's max_connections full during a rollout, or any other failure),
 * the pool keeps those and grows later if it can: a process that could serve is not kept from
 * starting. When none opens (unreachable, or full), this throws.
 */
export async function warmPool(db: Knex, count: number, atOnce = count): Promise<WarmedPool> {
  const taken: Array<PromiseSettledResult<unknown>> = [];
  const step = Math.max(1, atOnce);
  for (let from = 0; from < count; from += step) {
    const wave = Math.min(step, count - from);
    taken.push(...(await Promise.allSettled(Array.from({ length: wave }, () => db.client.acquireConnection() as Promise<unknown>))));
  }
  const opened = taken.filter((t) => t.status === 'fulfilled');
  await Promise.all(opened.map((t) => db.client.releaseConnection(t.value)));
  const failed = taken.find((t): t is PromiseRejectedResult => t.status === 'rejected');
  if (!failed) return { opened: opened.length };
  if (opened.length === 0) throw failed.reason;
  return { opened: opened.length, refused: failed.reason };
}

/**
 * `migrate`: knex's versioned migrations (tables, indexes, data), then the SQL functions from their
 * source files (db/functions), each applied when its file changed. Returns the functions applied.
 */
export interface MigrateOptions {
  /** Told when the database is already at a newer release than this code, and left as it is. */
  onDatabaseAhead?: (unknownMigrations: string[]) => void;
  /** The release this code is (package.json's version), for the function sources. */
  release?: string;
}

/**
 * Versioned migrations, then the function sources (src/infra/function-sources.ts). A database that
 * has migrations this code does not know belongs to a newer release: during a rolling deploy, or
 * after rolling code back without its schema, an older process runs on it as it is rather than
 * refusing to start (migrations are additive, docs/operations/upgrade.md). Returns the functions applied.
 */
export async function migrateLatest(db: Knex, sources = functionsDirectory, options: MigrateOptions = {}): Promise<string[]> {
  const unknown = await migrationsUnknownHere(db);
  if (unknown.length > 0) {
    options.onDatabaseAhead?.(unknown);
    return [];
  }
  await db.migrate.latest();
  return applyFunctionSources(db, sources, options.release);
}

async function migrationsUnknownHere(db: Knex): Promise<string[]> {
  if (!(await db.schema.hasTable('knex_migrations'))) return [];
  const known = new Set(await new DirectoryMigrationSource(migrationsDirectory).getMigrations().then((files) => files.map((f) => f.replace(/\.(ts|js)$/, ''))));
  const done: string[] = await db('knex_migrations').pluck('name');
  return done.filter((name) => !known.has(name.replace(/\.(ts|js)$/, '')));
}

/** Creates the target database through the server's `postgres` database when it does not exist yet. */
export async function createDatabaseIfMissing(url: string): Promise<void> {
  const target = new URL(url);
  const name = decodeURIComponent(target.pathname.replace(/^\//, ''));
  if (!/^[A-Za-z0-9_-]+$/.test(name)) throw new Error(`unsupported database name in DATABASE_URL: ${name}`);
  const admin = new URL(url);
  admin.pathname = '/postgres';
  const client = new pg.Client({ connectionString: admin.toString(), connectionTimeoutMillis: 5_000 });
  await client.connect();
  try {
    const found = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    if (found.rowCount === 0) {
      await client.query(`CREATE DATABASE "${name}"`).catch((err: { code?: string }) => {
        // Two processes starting together may both try; the loser sees duplicate_database.
        if (err.code !== '42P04') throw err;
      });
    }
  } finally {
    await client.end();
  }
}

const unavailableSqlStates = /^(08|53|57|58|40)/;

/**
 * True when a failure means "storage is not there right now" rather than "this request is wrong".
 * Driver errors without a SQLSTATE (refused, reset, terminated, pool timeout) are outages too.
 */
export function isStorageUnavailable(err: unknown): boolean {
  if (err instanceof knexFactory.KnexTimeoutError) return true;
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code)) return unavailableSqlStates.test(code);
  // Programming errors are bugs, not outages: they must surface as 500 and be fixed.
  if (err instanceof TypeError || err instanceof RangeError || err instanceof ReferenceError || err instanceof SyntaxError) return false;
  return err instanceof Error;
}

/**
 * For a failed statement that wrote many callers' rows at once (group commit): true unless the
 * database itself is unreachable, i.e. the cause may be one row's data, or a deadlock or
 * serialization failure between two batches, so each row is worth trying again alone.
 */
export function mayBeOneRowsFault(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return !isStorageUnavailable(err) || (typeof code === 'string' && code.startsWith('40'));
}
