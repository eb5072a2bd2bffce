import { Worker, type ConnectionOptions, type Queue } from 'bullmq';
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import type { Config } from '../config/index.js';
import type { SecretBox } from '../domain/secret-box.js';
import { metrics } from '../metrics/registry.js';
import { emitDeliveriesDead, emitEndpointDisabled } from '../ops/platform-events.js';
import { Batcher } from '../infra/batcher.js';
import { mayBeOneRowsFault } from '../infra/db.js';
import { recordSuccesses, type Recorded, type SuccessItem } from '../store/dispatch-store.js';
import { sweep } from '../store/sweep-store.js';
import { deliverOnce, type DeliverDeps } from './deliver.js';
import { createDeliveryClient, type DeliveryClient, type LookupFn } from './http-client.js';
import { Pump } from './pump.js';
import { createDeliveryQueue, deliveryQueueName, type DeliveryJob } from './queue.js';

export interface DispatcherDeps {
  config: Config;
  db: Knex;
  box: SecretBox;
  logger: Logger;
  connection: ConnectionOptions;
  /** Separates queues of parallel test runs sharing one Redis. */
  queuePrefix?: string;
  lookup?: LookupFn;
}

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
 * The worker role: admission (Pump), the BullMQ worker that makes attempts, and the sweeper that
 * takes back lost work. PostgreSQL holds the truth; Redis only carries what is runnable right now.
 */
export class Dispatcher {
  readonly queue: Queue<DeliveryJob>;
  private readonly pump: Pump;
  private readonly client: DeliveryClient;
  private worker: Worker<DeliveryJob> | undefined;
  private sweepTimer: NodeJS.Timeout | undefined;
  private sweeping = false;
  private stopping = false;
  /** Successes of concurrent slots share one statement and one commit (group commit). */
  private readonly successes: Batcher<SuccessItem, Recorded>;
  /** Lease on an in-flight attempt: the attempt timeout plus a margin for recording the result. */
  private readonly inFlightLeaseMs: number;

  constructor(private readonly deps: DispatcherDeps) {
    const { config } = deps;
    this.inFlightLeaseMs = config.attemptTimeoutMs + 10_000;
    this.queue = createDeliveryQueue(deps.connection, deps.queuePrefix);
    this.queue.on('error', (err) => deps.logger.warn({ err }, 'queue connection error'));
    this.pump = new Pump(deps.db, this.queue, {
      queuedLeaseSeconds: config.queuedLeaseSeconds,
      circuitFailureThreshold: config.circuitFailureThreshold,
      perEndpointBatch: 500,
    }, deps.logger);
    this.successes = new Batcher({
      maxBatch: 64,
      maxInFlight: 2,
      retryAlone: mayBeOneRowsFault,
      run: (items) => recordSuccesses(deps.db, items, this.inFlightLeaseMs),
    });
    this.client = createDeliveryClient({
      allowPrivateTargets: config.allowPrivateTargets,
      connectTimeoutMs: config.connectTimeoutMs,
      attemptTimeoutMs: config.attemptTimeoutMs,
      maxResponseBytes: 64 * 1024,
      excerptBytes: 2 * 1024,
      lookup: deps.lookup,
    });
  }

  /** Lets intake in the same process start dispatch without waiting for the next timer tick. */
  wake = (): void => this.pump.wake();

  start(): void {
    const { config, logger } = this.deps;
    const deliverDeps: DeliverDeps = {
      db: this.deps.db,
      box: this.deps.box,
      client: this.client,
      logger,
      defaults: config.retry,
      health: { circuitFailureThreshold: config.circuitFailureThreshold, circuitCooldownSeconds: config.circuitCooldownSeconds },
      inFlightLeaseMs: this.inFlightLeaseMs,
      onWork: this.pump.wake,
      mayContinue: () => !this.stopping,
      recordSuccess: (item) => this.successes.submit(item),
    };
    this.worker = new Worker<DeliveryJob>(
      deliveryQueueName,
      async (job) => {
        try {
          await deliverOnce(deliverDeps, job.data.deliveryId);
        } finally {
          this.pump.wake(); // a slot is free for the endpoint
        }
      },
      {
        connection: this.deps.connection,
        prefix: this.deps.queuePrefix,
        concurrency: config.workerConcurrency,
        ...workerLockOptions(config.queuedLeaseSeconds),
        removeOnComplete: { count: 0 },
        removeOnFail: { count: 0 },
      },
    );
    this.worker.on('error', (err) => logger.warn({ err }, 'worker connection error'));
    this.worker.on('failed', (job, err) => logger.warn({ err, deliveryId: job?.data.deliveryId }, 'attempt could not be recorded; its lease will bring it back'));
    this.pump.start();
    this.sweepTimer = setInterval(() => void this.sweepOnce(), config.sweepIntervalMs);
    this.sweepTimer.unref();
  }

  async sweepOnce(): Promise<void> {
    if (this.sweeping) return;
    this.sweeping = true;
    try {
      const r = await sweep(this.deps.db, {
        defaultMaxAttempts: this.deps.config.retry.maxAttempts,
        autoDisableAfterSeconds: this.deps.config.autoDisableAfterSeconds,
      });
      if (r.deadMaxAge) metrics.deadLettered.inc({ reason: 'max_age' }, r.deadMaxAge);
      if (r.deadMaxAttempts) metrics.deadLettered.inc({ reason: 'max_attempts' }, r.deadMaxAttempts);
      if (r.deadDisabled) metrics.deadLettered.inc({ reason: 'endpoint_disabled' }, r.deadDisabled);
      if (r.requeued || r.lostInFlight) {
        this.deps.logger.info({ requeued: r.requeued, lostInFlight: r.lostInFlight }, 'took back work lost by Redis or a worker');
        this.pump.wake();
      }
      for (const ep of r.disabledEndpoints) this.deps.logger.warn({ endpointId: ep.id }, 'endpoint auto-disabled');
      await this.announce(r.deadIds, r.disabledEndpoints);
    } catch (err) {
      this.deps.logger.warn({ err }, 'sweep failed; will retry');
    } finally {
      this.sweeping = false;
    }
  }

  /** Operational events for what the sweep dead-lettered or disabled; best effort, like in deliver. */
  private async announce(deadIds: string[], disabled: Array<{ id: string; tenant_id: string; reason: string }>): Promise<void> {
    const maxAge = this.deps.config.retry.maxEventAgeSeconds;
    let created = await emitDeliveriesDead(this.deps.db, deadIds, maxAge);
    for (const ep of disabled) {
      created = (await emitEndpointDisabled(this.deps.db, { id: ep.id, tenantId: ep.tenant_id, reason: ep.reason }, maxAge)) || created;
    }
    if (created) this.pump.wake();
  }

  /** Stops taking work, lets in-flight attempts finish (bounded by the attempt timeout), then closes. */
  async stop(): Promise<void> {
    this.stopping = true;
    this.pump.stop();
    clearInterval(this.sweepTimer);
    await this.worker?.close();
    await this.queue.close();
    await this.client.close();
  }
}
