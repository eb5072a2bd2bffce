import type { Knex } from 'knex';
import type { Logger } from 'pino';
import { AppError } from '../domain/errors.js';
import type { ReadFallbackReason, ReadTolerance } from '../domain/read-consistency.js';
import { isStorageUnavailable } from './db.js';

/** Who is reading: a caller that can write may read what it has just written. */
export interface Reader {
  canWrite: boolean;
}

export interface ReadReplicaOptions {
  primary: Knex;
  /** The streaming replica (DATABASE_READ_URL); absent, every read goes to the primary. */
  replica?: Knex;
  maxLagSeconds: number;
  logger: Pick<Logger, 'warn' | 'info'>;
  sampleIntervalMs?: number;
  /** Told each sampled lag, in seconds (the metric). */
  onLag?: (seconds: number) => void;
  /** Told of each read the primary served instead of the replica (the metric). */
  onFallback?: (reason: ReadFallbackReason) => void;
}

type Serving = { on: 'replica' } | { on: 'primary'; reason: ReadFallbackReason; detail: string };

/** A WAL position (`16/B374D848`) as a number: positions compare as 64-bit integers. */
export function parseLsn(text: string): bigint {
  const [high, low] = text.split('/');
  return (BigInt(`0x${high}`) << 32n) + BigInt(`0x${low}`);
}

/** The replica's connection is gone (refused, reset, shut down, pool timeout), as opposed to one query failing. */
function isConnectionLoss(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code)) return code.startsWith('08') || /^57P0[1-3]$/.test(code);
  return isStorageUnavailable(err);
}

/**
 * The one place that decides whether a read goes to the replica or the primary.
 *
 * A route declares how stale its answer may be (ReadTolerance); this decides, per read, from that and
 * from the replica's health, which a sampler measures every second. Lag is measured with WAL
 * positions, not `now() - pg_last_xact_replay_timestamp()`, which grows without bound while the
 * primary is idle: each sample records the primary's `pg_current_wal_lsn()` and the time, and the
 * lag is the age of the oldest primary position the replica has not yet replayed
 * (`pg_last_wal_replay_lsn()`), 0 when it has replayed everything. Its resolution is one sample.
 *
 * Past READ_REPLICA_MAX_LAG_SECONDS, or with the replica unreachable, reads go to the primary; a read
 * that loses its replica connection mid-way is run again on the primary. Each such read is counted;
 * the change of state is logged once, not per read.
 */
export class ReadReplica {
  readonly #primary: Knex;
  readonly #replica?: Knex;
  readonly #opts: ReadReplicaOptions;
  /** Primary WAL positions the replica had not replayed when last asked, oldest first, with when they were seen. */
  #unreplayed: Array<{ lsn: bigint; at: number }> = [];
  #replayed: bigint | undefined;
  #serving: Serving = { on: 'primary', reason: 'unreachable', detail: 'not sampled yet' };
  #timer: NodeJS.Timeout | undefined;
  #sampling: Promise<void> | undefined;

  constructor(opts: ReadReplicaOptions) {
    this.#opts = opts;
    this.#primary = opts.primary;
    this.#replica = opts.replica;
  }

  /** Samples once (so the first reads already know the replica's state), then every interval. */
  async start(): Promise<void> {
    if (!this.#replica) return;
    await this.sample();
    this.#timer = setInterval(() => void this.sample(), this.#opts.sampleIntervalMs ?? 1_000);
    this.#timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.#timer);
    this.#timer = undefined;
    await this.#sampling;
    await this.#replica?.destroy();
  }

  /**
   * Runs `work` on the pool this read should use. On the replica, a lost connection runs it again on
   * the primary: the caller sees an answer, never the replica's outage.
   */
  async read<T>(tolerance: ReadTolerance, reader: Reader, work: (db: Knex) => Promise<T>): Promise<T> {
    if (!this.#replica || (tolerance === 'replica-when-read-only' && reader.canWrite)) return work(this.#primary);
    const serving = this.#serving;
    if (serving.on === 'primary') {
      this.#opts.onFallback?.(serving.reason);
      return work(this.#primary);
    }
    try {
      return await work(this.#replica);
    } catch (err) {
      // The replica can only be behind, so its "not found" may mean "not yet": the primary confirms
      // it, and a row created a moment ago is never reported missing. This is consistency, not a
      // fallback: nothing is counted.
      if (err instanceof AppError && err.status === 404) return work(this.#primary);
      if (err instanceof AppError || !isStorageUnavailable(err)) throw err;
      const lost = isConnectionLoss(err);
      this.#opts.onFallback?.(lost ? 'unreachable' : 'error');
      // A lost connection keeps reads on the primary until the sampler reaches the replica again;
      // one failed query (a recovery conflict, a timeout) moves only itself.
      if (lost) this.#enter({ on: 'primary', reason: 'unreachable', detail: describe(err) });
      return work(this.#primary);
    }
  }

  /** One round of the sampler; rounds never overlap. */
  sample(): Promise<void> {
    this.#sampling ??= this.#sampleOnce().finally(() => {
      this.#sampling = undefined;
    });
    return this.#sampling;
  }

  async #sampleOnce(): Promise<void> {
    const replica = this.#replica!;
    const at = Date.now();
    let primaryLsn: bigint;
    try {
      const { rows } = await this.#primary.raw<{ rows: Array<{ lsn: string }> }>('select pg_current_wal_lsn()::text as lsn');
      primaryLsn = parseLsn(rows[0]!.lsn);
    } catch {
      return; // without the primary's position there is nothing to compare; the primary's own outage is reported elsewhere
    }
    const newest = this.#unreplayed.at(-1)?.lsn ?? this.#replayed ?? -1n;
    if (primaryLsn > newest) this.#unreplayed.push({ lsn: primaryLsn, at });
    try {
      const { rows } = await replica.raw<{ rows: Array<{ standby: boolean; replayed: string | null }> }>(
        'select pg_is_in_recovery() as standby, pg_last_wal_replay_lsn()::text as replayed',
      );
      const { standby, replayed } = rows[0]!;
      if (!standby || replayed === null) {
        this.#report();
        this.#enter({ on: 'primary', reason: 'error', detail: 'DATABASE_READ_URL is not a streaming replica (pg_is_in_recovery() is false)' });
        return;
      }
      this.#replayed = parseLsn(replayed);
      while (this.#unreplayed.length > 0 && this.#unreplayed[0]!.lsn <= this.#replayed) this.#unreplayed.shift();
      const lag = this.#report();
      const max = this.#opts.maxLagSeconds;
      this.#enter(lag > max ? { on: 'primary', reason: 'lag', detail: `replay lag ${lag.toFixed(1)} s exceeds READ_REPLICA_MAX_LAG_SECONDS (${max})` } : { on: 'replica' });
    } catch (err) {
      // The replica's lag keeps growing from what it was last known to have replayed.
      this.#report();
      this.#enter({ on: 'primary', reason: isConnectionLoss(err) ? 'unreachable' : 'error', detail: describe(err) });
    }
  }

  /** The current lag in seconds, told to onLag. */
  #report(): number {
    const oldest = this.#unreplayed[0];
    const lag = oldest ? (Date.now() - oldest.at) / 1000 : 0;
    this.#opts.onLag?.(lag);
    return lag;
  }

  #enter(next: Serving): void {
    const was = this.#serving;
    this.#serving = next;
    if (was.on === next.on && (next.on === 'replica' || (was.on === 'primary' && was.reason === next.reason))) return;
    if (next.on === 'replica') this.#opts.logger.info({ previousReason: was.on === 'primary' ? was.reason : undefined }, 'reads are served by the read replica');
    else this.#opts.logger.warn({ reason: next.reason, detail: next.detail }, `reads fall back to the primary (${next.reason})`);
  }
}

function describe(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
