import { Worker, type Queue } from 'bullmq';
import type { Logger } from 'pino';
import type { Config } from '../config/index.js';
import type { SecretBox } from '../domain/secret-box.js';
import type { ClaimedDelivery, DeliveryLifecycle, Recorded, SuccessItem } from '../delivery/index.js';
import { Batcher, groupCommit } from '../infra/batcher.js';
import { mayBeOneRowsFault } from '../infra/db.js';
import { within } from '../infra/within.js';
import type { RedisClient } from '../infra/redis.js';
import { setTimeout as sleep } from 'node:timers/promises';
import { metrics } from '../metrics/registry.js';
import { AdmissionLoop } from './admission-loop.js';
import { BacklogPacing } from './backlog-pacing.js';
import { FairShare } from './fair-share.js';
import { deliverQueued, firstAttemptWaitMs, runSlot, type DeliverDeps } from './deliver.js';
import type { EndpointHeaders } from './endpoint-headers.js';
import { createDeliveryClient, type DeliveryClient, type LookupFn } from './http-client.js';
import { createJobQueue, deliveryJobId, jobQueueName, shardOf, shardPrefixes, type DeliveryJob } from './job-queue.js';

export interface DispatcherDeps {
  config: Config;
  lifecycle: DeliveryLifecycle;
  box: SecretBox;
  logger: Logger;
  /** The endpoints' own request headers, added to every attempt. */
  endpointHeaders?: EndpointHeaders;
  /** Tracing is on: the attempts of traced work make spans. */
  tracing?: boolean;
  /** The job queues' and workers' Redis connection (role `worker`); the dispatcher closes it when it stops. */
  connection: RedisClient;
  /** Separates job queues of parallel test runs sharing one Redis (default: QUEUE_PREFIX). */
  queuePrefix?: string;
  lookup?: LookupFn;
}

/**
 * The in-flight lease beyond the attempt timeout: a paced wait (backlog-pacing.ts), reading the
 * endpoint's settings, recording the result. Its length sets how soon a crashed worker's attempts
 * come back, so the wait gets a small part of it rather than a longer lease.
 */
const inFlightLeaseMarginMs = 10_000;
/** The longest a late attempt waits for its pace: the rest of the margin is the record's. */
const maxPacingWaitMs = 2_000;

/** How often a worker counts the worker processes on its job queue. */
const workerCountIntervalMs = 5_000;
/**
 * Counts soon after this process's own connections are up, before the periodic ones: processes
 * started together may count before the others connect, and believe they are alone only until one of these.
 */
const earlyRecountsMs = [250, 1_000, 2_500] as const;

/**
 * Lock and stall-check timing of the delivery Worker. A job fetched by a worker that died before
 * claiming its delivery stays `active` in Redis, and re-admitting the same attempt (same job id)
 * finds it there and adds nothing: only BullMQ's stall check hands it to a live worker. With
 * BullMQ's defaults (30 s lock, 30 s checks) that took up to a minute; tied to the queued lease it
 * takes seconds. Losing a lock spuriously is harmless: the claim in PostgreSQL lets one job win.
 */
export function workerLockOptions(queuedLeaseSeconds: number): { lockDuration: number; stalledInterval: number } {
  return { lockDuration: Math.max(5_000, queuedLeaseSeconds * 1000), stalledInterval: Math.max(2_500, queuedLeaseSeconds * 500) };
}

/**
 * Splits WORKER_CONCURRENCY over the BullMQ workers of the shards: the shares add up to exactly
 * the total and are at least 1 each (the configuration refuses more shards than that).
 *
 * A split rather than every worker at full concurrency with a processor that waits for a free
 * slot: BullMQ fetches a job as soon as a worker is below its concurrency, and a job held by a
 * waiting processor is kept from every other process that could run it now (its lock, renewed
 * while it waits, keeps it from the stall check too). With the split a process never fetches
 * more jobs than it can start. The price is that one shard's worker may be full while another's
 * idles; shards are picked by a hash of the delivery id, so each gets an equal part of the queued
 * work on average, and that happens only near saturation.
 */
export function shardConcurrency(total: number, shards: number): number[] {
  return Array.from({ length: shards }, (_, i) => Math.floor(total / shards) + (i < total % shards ? 1 : 0));
}

/**
 * The worker role: admission (AdmissionLoop), the slots that make attempts, the BullMQ worker for work admitted
 * to Redis, and the sweeper that takes back lost work. PostgreSQL holds the truth; Redis only carries
 * admitted work that no slot of the admitting process was free to start.
 *
 * A slot is one chain of attempts for one endpoint (see `runSlot`). Slots start two ways: admission
 * puts a delivery straight in flight for a free slot of this process (the live path: no Redis), or a
 * BullMQ job claims a queued one. Both count against `WORKER_CONCURRENCY`.
 *
 * Work admitted to Redis is spread over `QUEUE_SHARDS` job queues (src/outbound/job-queue.ts), and every
 * worker process runs one BullMQ worker per shard.
 */
export class Dispatcher {
  /** The job queues, one per shard; a delivery's jobs go to `jobQueues[shardOf(id)]`. */
  readonly jobQueues: Queue<DeliveryJob>[];
  private readonly prefixes: string[];
  private readonly admission: AdmissionLoop;
  private readonly client: DeliveryClient;
  private workers: Worker<DeliveryJob>[] = [];
  private sweepTimer: NodeJS.Timeout | undefined;
  private workersTimer: NodeJS.Timeout | undefined;
  private recountTimers: NodeJS.Timeout[] = [];
  /** Whether other worker processes serve the job queue (counted every few seconds; assumed until the first count). */
  private otherWorkers = true;
  /**
   * Counts the times this process learnt that other workers are there. A slot started while it
   * believed itself alone ends its chain of hand-offs when this changes, so its endpoint's work
   * goes back through admission, which shares it with them.
   */
  private othersFound = 0;
  /** othersFound when the admission round now running chose its mode (rounds never overlap). */
  private roundOthersFound = 0;
  /** The count made once this process's own workers are connected; ready() waits for it. */
  private firstCount: Promise<void> = Promise.resolve();
  private sweeping = false;
  private stopping = false;
  /** Slots running in this process, started by admission or by a BullMQ job. */
  private readonly slots = new Set<Promise<void>>();
  /** What the slots' attempts left running beside them (latency samples waiting for a read). */
  private readonly besideSlots = new Set<Promise<void>>();
  /** Successes of concurrent slots share one statement and one commit (group commit). */
  private readonly successes: Batcher<SuccessItem, Recorded>;
  /** Lease on an in-flight attempt: a paced wait, the attempt timeout, and a margin for recording the result. */
  private readonly inFlightLeaseMs: number;
  private readonly deliverDeps: DeliverDeps;
  /** This process's slots per tenant and endpoint, and the work admission saw waiting for one. */
  private readonly fairShare = new FairShare();
  /** How fast late work starts while live work waits (backlog-pacing.ts). */
  private readonly pacing: BacklogPacing;
  /** Ends every pacing wait at stop: an attempt already in flight is made, not held. */
  private readonly stopped = new AbortController();

  constructor(private readonly deps: DispatcherDeps) {
    const { config, lifecycle } = deps;
    this.pacing = new BacklogPacing({ ...config.backlogPacing, maxWaitMs: maxPacingWaitMs });
    this.inFlightLeaseMs = config.attemptTimeoutMs + inFlightLeaseMarginMs;
    this.prefixes = shardPrefixes(deps.queuePrefix ?? config.queuePrefix, config.queueShards, config.redisClusterNodes !== undefined);
    this.jobQueues = this.prefixes.map((prefix) => createJobQueue(deps.connection, prefix));
    for (const queue of this.jobQueues) queue.on('error', (err) => deps.logger.warn({ err }, 'queue connection error'));
    this.admission = new AdmissionLoop({
      admit: (localSlots, mode) => lifecycle.admit({ count: localSlots, inFlightLeaseMs: this.inFlightLeaseMs, mode }),
      freeSlots: () => (this.stopping ? 0 : Math.max(0, config.workerConcurrency - this.slots.size)),
      othersWorking: () => {
        // What this round's slots believe: a count that finds others while the round admits must
        // still end their chains (slotDeps).
        this.roundOthersFound = this.othersFound;
        return config.shareViaRedis === 'always' || this.otherWorkers;
      },
      startLocal: (claimed) => this.startSlot(() => runSlot(this.slotDeps(this.roundOthersFound), claimed)),
      shardOf: (d) => shardOf(d.id, this.jobQueues.length),
      enqueue: async (shard, queued) => {
        await this.jobQueues[shard]!.addBulk(
          queued.map((d) => ({ name: 'deliver', data: { deliveryId: d.id, eventId: d.event_id }, opts: { jobId: deliveryJobId(d.id, d.attempt_count + 1) } })),
        );
      },
      unqueue: async (queued) => void (await lifecycle.unqueue(queued.map((d) => d.id))),
      logger: deps.logger,
      fairShare: this.fairShare,
    });
    this.successes = new Batcher({
      // A record's fixed cost is most of a small batch's: a second statement only for a queue.
      ...groupCommit,
      retryAlone: mayBeOneRowsFault,
      run: (items) => lifecycle.recordSuccesses(items, this.inFlightLeaseMs),
    });
    this.client = createDeliveryClient({
      allowPrivateTargets: config.allowPrivateTargets,
      proxy: config.egressProxy,
      connectTimeoutMs: config.connectTimeoutMs,
      attemptTimeoutMs: config.attemptTimeoutMs,
      maxResponseBytes: 64 * 1024,
      excerptBytes: 2 * 1024,
      lookup: deps.lookup,
    });
    this.deliverDeps = {
      lifecycle,
      box: deps.box,
      client: this.client,
      endpointHeaders: deps.endpointHeaders,
      tracing: deps.tracing,
      circuitFailureThreshold: config.circuitFailureThreshold,
      logger: deps.logger,
      defaults: config.retry,
      inFlightLeaseMs: this.inFlightLeaseMs,
      mayContinue: () => !this.stopping,
      recordSuccess: (item) => this.successes.submit(item),
      fairShare: this.fairShare,
      track: (work) => {
        this.besideSlots.add(work);
        void work.finally(() => this.besideSlots.delete(work));
      },
      pace: (claimed) => {
        const waitMs = this.pacing.beforeAttempt(firstAttemptWaitMs(claimed, Date.now()), claimed.endpoint.id);
        return waitMs > 0 ? sleep(waitMs, undefined, { signal: this.stopped.signal }).catch(() => undefined) : undefined;
      },
    };
  }

  /** Lets intake in the same process start dispatch without waiting for the next timer tick. */
  wake = (): void => {
    this.pacing.workArrived();
    this.admission.wake();
  };

  start(): void {
    const { config, logger } = this.deps;
    // While stopping, a job fetched anyway is left alone: its delivery stays queued and its lease
    // brings it back to whichever worker is running then.
    const processor = async (job: { data: DeliveryJob }) => {
      if (!this.stopping) await this.startSlot(() => deliverQueued(this.deliverDeps, job.data.deliveryId, job.data.eventId));
    };
    const concurrency = shardConcurrency(config.workerConcurrency, this.prefixes.length);
    this.workers = this.prefixes.map((prefix, shard) => {
      const worker = new Worker<DeliveryJob>(jobQueueName, processor, {
        connection: this.deps.connection,
        prefix,
        concurrency: concurrency[shard],
        ...workerLockOptions(config.queuedLeaseSeconds),
        removeOnComplete: { count: 0 },
        removeOnFail: { count: 0 },
      });
      worker.on('error', (err) => logger.warn({ err, shard }, 'worker connection error'));
      worker.on('failed', (job, err) => logger.warn({ err, deliveryId: job?.data.deliveryId }, 'attempt could not be recorded; its lease will bring it back'));
      return worker;
    });
    this.admission.start();
    metrics.backlogPace.readFrom(() => this.pacing.pacedPerSecond());
    this.sweepTimer = setInterval(() => void this.sweepOnce(), config.sweepIntervalMs);
    this.sweepTimer.unref();
    // Counted once this process's own workers are connected, so that a process alone runs its
    // first events locally instead of through Redis (latency.coldP99Ms); the early recounts are
    // timed from then too (a count made before could take one other worker for itself), then every
    // few seconds.
    const connected = this.workersReady(2_000);
    this.firstCount = connected.then(() => this.countWorkers());
    void connected.then(() => {
      if (!this.stopping) this.recountTimers = earlyRecountsMs.map((ms) => setTimeout(() => void this.countWorkers(), ms).unref());
    });
    this.workersTimer = setInterval(() => void this.countWorkers(), workerCountIntervalMs);
    this.workersTimer.unref();
  }

  /**
   * Resolves once the BullMQ workers are connected and the job queue has been counted, or after
   * `withinMs` (with Redis down they never would be): a process reports ready after this, so its
   * first events do not wait for those connections.
   */
  async ready(withinMs = 2_000): Promise<void> {
    await within(withinMs, this.firstCount, 'BullMQ workers connecting').catch(() => undefined);
  }

  /** The BullMQ workers connected, or `ms` passed: with Redis down they never are. */
  private async workersReady(ms: number): Promise<void> {
    await within(ms, Promise.allSettled(this.workers.map((worker) => worker.waitUntilReady())), 'BullMQ workers connecting').catch(() => undefined);
  }

  /** Runs a slot, counted while it lasts; when it ends its endpoint has a free slot again. */
  private startSlot(run: () => Promise<void>): Promise<void> {
    const slot = run().finally(() => {
      this.slots.delete(slot);
      this.admission.slotFreed();
    });
    this.slots.add(slot);
    // A local slot's failure is a storage failure; the delivery's lease brings it back.
    slot.catch((err: unknown) => this.deps.logger.warn({ err }, 'attempt could not be recorded; its lease will bring it back'));
    return slot;
  }

  /**
   * Counts the worker processes connected to the job queue (BullMQ names its connections). Every
   * worker process serves every shard, so the first shard's workers are the processes. Unknown,
   * for instance where CLIENT LIST is not allowed, counts as "others may be there".
   */
  private async countWorkers(): Promise<void> {
    let others: boolean;
    try {
      others = (await this.jobQueues[0]!.getWorkersCount()) > 1;
    } catch {
      others = true;
    }
    if (others && !this.otherWorkers) this.othersFound++;
    this.otherWorkers = others;
  }

  /** A slot's dependencies: it hands on while this process runs and has not found other workers since `found`. */
  private slotDeps(found: number): DeliverDeps {
    return { ...this.deliverDeps, mayContinue: () => !this.stopping && this.othersFound === found };
  }

  async sweepOnce(): Promise<void> {
    if (this.sweeping) return;
    this.sweeping = true;
    try {
      const r = await this.deps.lifecycle.sweep();
      if (r.requeued || r.lostInFlight) {
        this.deps.logger.info({ requeued: r.requeued, lostInFlight: r.lostInFlight }, 'took back work lost by Redis or a worker');
      }
      for (const ep of r.failingEndpoints) this.deps.logger.info({ endpointId: ep.id, thresholds: ep.thresholds }, 'endpoint failing: warned');
      for (const ep of r.disabledEndpoints) this.deps.logger.warn({ endpointId: ep.id }, 'endpoint auto-disabled');
      await this.deps.lifecycle.announce(r.deadIds, r.disabledEndpoints, r.failingEndpoints);
    } catch (err) {
      this.deps.logger.warn({ err }, 'sweep failed; will retry');
    }
    // On its own: a vacuum that fails must not cost the sweep its metrics and announcements.
    await this.deps.lifecycle.vacuumMirror().catch((err: unknown) => this.deps.logger.warn({ err }, 'vacuum of delivery_queue failed; will retry'));
    this.sweeping = false;
  }

  /**
   * Stops taking work, lets in-flight attempts finish and record (bounded by the attempt timeout),
   * then closes. The slots are this process's own record of what is in flight, so the BullMQ workers
   * are closed without waiting for their jobs (a graceful close could wait forever on a connection
   * that a network partition left half-open), and the shared connection is dropped, not quit, for
   * the same reason.
   */
  async stop(): Promise<void> {
    this.stopping = true;
    this.stopped.abort();
    metrics.backlogPace.readFrom(undefined);
    // A round already running finishes first: what it claims becomes slots, awaited below.
    await this.admission.stop();
    clearInterval(this.sweepTimer);
    for (const timer of this.recountTimers) clearTimeout(timer);
    clearInterval(this.workersTimer);
    await Promise.allSettled([...this.slots]);
    // A late first attempt's latency sample waits for its endpoint's next read (a quarter second at
    // most): taken before the pools close, not dropped.
    await Promise.allSettled([...this.besideSlots]);
    // A worker stopped just after it started may still be connecting its BullMQ workers, whose
    // commands would then fail unhandled when the connection drops: they get a moment to be ready,
    // bounded, since with Redis down they never would be.
    await this.workersReady(1_000);
    await Promise.all(this.workers.map((worker) => worker.close(true)));
    await Promise.all(this.jobQueues.map((queue) => queue.close()));
    this.deps.connection.disconnect();
    await this.client.close();
  }
}
