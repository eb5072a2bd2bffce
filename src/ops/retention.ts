/**
 * Retention: removes finished data once its window has passed, and creates partitions ahead of need.
 * Runs in the worker role (hourly, one worker at a time) and as `npm run retention [-- --dry-run]`.
 *
 * Order of one run, oldest data first:
 *   1. attempts: a partition (a day's, or a week's when the windows are long: dayTablesPeriod) is
 *      dropped when every delivery made in it is removable (finished, its window passed); then those
 *      deliveries are deleted in batches (their attempts are gone).
 *   2. deliveries left over (a partition held back by one unfinished delivery): removable ones are
 *      deleted in batches, their attempts with them.
 *   3. events: a partition is dropped, with its receipts and its keys, once all of it is older than
 *      RETENTION_DAYS and no delivery points into it any more. The events watermark rises first, so
 *      that nothing made afterwards (a backfill) reads that partition. Then unfinished deliveries
 *      whose event is gone are removed: a backfill racing a run of the other release while a deploy
 *      from 0.5.0 rolls can leave one.
 *   4. messages untouched for RETENTION_DAYS; audit_log partitions and replays past
 *      AUDIT_RETENTION_DAYS.
 * Nothing pending, queued, in flight or waiting to retry is removable, and neither is its event.
 */
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import { RETAINED_TABLES, dayTablesPeriod, eventsKeptFromId, partitionDaysAhead, uuidFloor, uuidTime, type RetainedTable, type RetentionPolicy } from '../domain/retention.js';
import { advisoryLocks } from '../infra/advisory-locks.js';
import { metrics } from '../metrics/registry.js';
import {
  deliveriesAllRemovable,
  deliveriesReferenceEvents,
  eventDaysLock,
  databaseCutoffs,
  raiseWatermark,
  removeDeliveries,
  type RemovedDeliveries,
  removeEventKeys,
  removeOlderThan,
  removeOrphanedDeliveries,
  watermark,
  type IdRange,
  type LockSession,
  withAdvisoryLock,
} from '../store/retention-store.js';
import { detachAndDrop, dropDetachedLeftovers, ensurePartitions, listPartitions, partitionFloor, partitionRows, type PartitionBounds } from '../store/partitions-store.js';

export interface RetentionReport {
  dryRun: boolean;
  /** Rows removed (or, dry, that would be), by table. */
  removed: Record<RetainedTable, number>;
  /** Partitions dropped (or that would be). */
  partitions: string[];
  /** Partitions past their window that must stay, and why. */
  held: Array<{ partition: string; reason: string }>;
  partitionsCreated: number;
  /** Unfinished deliveries whose event was gone, removed (or that would be; see removeOrphanedDeliveries). */
  orphaned: string[];
}

const dayMs = 86_400_000;
const batch = 5_000;

export class Retention {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<unknown> | undefined;
  /** Ends the timer's run in progress at stop(): the next process's run goes on from where it left. */
  private current: AbortController | undefined;

  constructor(private readonly deps: { db: Knex; policy: RetentionPolicy; logger: Logger }) {}

  /**
   * Creates the partitions the next days need; every role calls it at start. `now` is PostgreSQL's
   * clock when the caller has read it already (a retention run has).
   */
  async ensureAhead(now?: Date, signal?: AbortSignal): Promise<number> {
    now ??= (await databaseCutoffs(this.deps.db, this.deps.policy)).now;
    return ensurePartitions(this.deps.db, new Date(now.getTime() - dayMs), new Date(now.getTime() + partitionDaysAhead * dayMs), dayTablesPeriod(this.deps.policy), signal);
  }

  /**
   * Runs now, then every `intervalMs`: a whole retention run when `remove` (the worker role), else
   * only partition creation (the api role, so intake never outruns its partitions without a worker).
   * Failures are logged and retried on the next tick.
   */
  start({ remove, intervalMs = 3_600_000 }: { remove: boolean; intervalMs?: number }): void {
    const tick = () => {
      if (this.running) return;
      const { signal } = (this.current = new AbortController());
      this.running = (remove ? this.run({ dryRun: false, signal }) : this.ensureAhead(undefined, signal))
        .catch((err: unknown) => {
          if (!signal.aborted) this.deps.logger.warn({ err }, remove ? 'retention run failed; will retry' : 'creating partitions failed; will retry');
        })
        .finally(() => (this.running = undefined));
    };
    tick();
    this.timer = setInterval(tick, intervalMs);
    this.timer.unref();
  }

  /**
   * Stops the timer and ends its run in progress between two steps (a batch, a partition, a wait to
   * retry a lock), so that shutdown does not wait out a long removal or a contended upkeep.
   */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.current?.abort();
    await this.running;
  }

  /**
   * One run. Answers undefined when another process holds the retention lock (it is running). An
   * aborted `signal` ends it between steps, with what it removed so far counted and logged.
   */
  async run({ dryRun, signal }: { dryRun: boolean; signal?: AbortSignal }): Promise<RetentionReport | undefined> {
    return withAdvisoryLock(this.deps.db, advisoryLocks.retentionRun, async (session) => {
      const started = Date.now();
      const removed = Object.fromEntries(RETAINED_TABLES.map((t) => [t, 0])) as Record<RetainedTable, number>;
      const report: RetentionReport = { dryRun, removed, partitions: [], held: [], orphaned: [], partitionsCreated: 0 };
      try {
        await this.removeExpired(report, session, signal);
      } catch (err) {
        if (!signal?.aborted) throw err;
      }
      const stopped = signal?.aborted ?? false;
      if (!dryRun) for (const table of RETAINED_TABLES) if (report.removed[table] > 0) metrics.retentionRemoved.inc({ table }, report.removed[table]);
      this.deps.logger.info(
        { dryRun, removed: report.removed, partitions: report.partitions, held: report.held, partitionsCreated: report.partitionsCreated, ms: Date.now() - started },
        stopped ? 'retention run stopped by shutdown; the next run goes on' : dryRun ? 'retention dry run: nothing changed' : 'retention run',
      );
      return report;
    });
  }

  private async removeExpired(report: RetentionReport, session: LockSession, signal: AbortSignal | undefined): Promise<void> {
    const { db, policy } = this.deps;
    const { dryRun, removed } = report;
    const { now, cut } = await databaseCutoffs(db, policy);
    if (!dryRun) report.partitionsCreated = await this.ensureAhead(now, signal);
    if (!dryRun) report.partitions.push(...(await dropDetachedLeftovers(db)));
    const partitions = await listPartitions(db);
    const of = (parent: string) => partitions.filter((p): p is PartitionBounds & { upper: string } => p.parent === parent && p.upper !== null);
    const count = (r: RemovedDeliveries) => {
      removed.deliveries += r.deliveries;
      removed.attempts += r.attempts;
    };
    const drop = async (p: PartitionBounds, table: RetainedTable) => {
      removed[table] += await partitionRows(db, p.name);
      if (!dryRun) await detachAndDrop(db, p);
      report.partitions.push(p.name);
    };
    // A delivery made after the later cutoff cannot have finished before it: no need to look.
    const latestCut = new Date(Math.max(cut.succeeded.getTime(), cut.dead.getTime()));
    const droppedDays: IdRange[] = [];

    // 1. Whole partitions of attempts, then their deliveries.
    const attemptsFrom = await partitionFloor(db, 'attempts', latestCut);
    for (const p of of('attempts')) {
      signal?.throwIfAborted();
      if (p.upper > attemptsFrom) break;
      if (!(await deliveriesAllRemovable(db, p, cut))) {
        report.held.push({ partition: p.name, reason: 'a delivery made in it is unfinished or inside its window' });
        continue;
      }
      // The deliveries' attempts are counted as listed (delivery_attempts): in a dry run that takes
      // in the partition's rows, still there; otherwise the partition is dropped first (so the
      // cascade finds nothing), and only the first tries stored in the deliveries remain to list.
      const rows = dryRun ? 0 : await partitionRows(db, p.name);
      if (!dryRun) await detachAndDrop(db, p);
      report.partitions.push(p.name);
      removed.attempts += rows;
      // Not stopped part-way: under windows a deploy lengthened, the rest would stay without their attempts.
      count(await removeDeliveries(db, { ids: p }, cut, { dryRun, batch }));
      droppedDays.push(p);
    }
    // 2. Removable deliveries of days held back, one batch at a time (their attempts cascade).
    const excluding = dryRun ? droppedDays : []; // already deleted otherwise
    count(await removeDeliveries(db, { eventsBefore: uuidFloor(latestCut), excluding }, cut, { dryRun, batch, signal }));
    signal?.throwIfAborted();

    // 3. Whole partitions of events with their receipts and keys, once nothing points into them. A
    // dry run has removed no deliveries, so it counts a partition as free when steps 1 and 2 would.
    // Only the check and the watermark's rise are under eventDaysLock: a backfill either committed
    // before the check (and its deliveries hold the day) or starts after and reads past the
    // watermark (windowEvents). The removal itself, seconds for a large day, holds no backfill.
    const receipts = of('receipts');
    const eventsFrom = await partitionFloor(db, 'events', cut.succeeded);
    for (const p of of('events')) {
      signal?.throwIfAborted();
      if (p.upper > eventsFrom) break;
      const free = async () => {
        if (await deliveriesReferenceEvents(db, p, cut, dryRun)) return false;
        // The watermark never moves back, and backfills read only above it: a wrong one hides events.
        const upper = uuidTime(p.upper);
        if (!upper) throw new Error(`partition ${p.name} ends at ${p.upper}, which is not an event id`);
        if (!dryRun) await raiseWatermark(db, 'events', upper);
        return true;
      };
      if (!(dryRun ? await free() : await session.hold(eventDaysLock, free))) {
        report.held.push({ partition: p.name, reason: 'a delivery of one of its events is still kept' });
        continue;
      }
      // Not stopped part-way either: under windows a deploy lengthened, a day would stay below the
      // watermark, hidden from backfills, with some of its keys gone.
      removed.event_keys += await removeEventKeys(db, p.name, { dryRun, batch });
      // Receipts are cut on the same event-id bounds: the partition of this day's receipts.
      for (const r of receipts.filter((r) => r.upper === p.upper && r.lower === p.lower)) await drop(r, 'receipts');
      await drop(p, 'events');
    }
    // After the drops: a backfill that read a dropped day had to commit before its detach ended.
    report.orphaned = await removeOrphanedDeliveries(db, eventsKeptFromId(await watermark(db, 'events')), dryRun);
    if (report.orphaned.length > 0) {
      removed.deliveries += report.orphaned.length;
      this.deps.logger.warn(
        { dryRun, count: report.orphaned.length, deliveryIds: report.orphaned.slice(0, 10) },
        `unfinished deliveries of events retention had removed (written by a backfill that raced it): ${dryRun ? 'would be removed' : 'removed'}`,
      );
    }

    // 4. Messages, audit log, replays.
    removed.messages += await removeOlderThan(db, 'messages', 'updated_at', cut.succeeded, { dryRun, batch, signal });
    signal?.throwIfAborted();
    const auditFrom = await partitionFloor(db, 'audit_log', cut.audit);
    for (const p of of('audit_log')) {
      signal?.throwIfAborted();
      if (p.upper > auditFrom) break;
      await drop(p, 'audit_log');
    }
    removed.replays += await removeOlderThan(db, 'replays', 'created_at', cut.audit, { dryRun, batch, signal });
  }
}
