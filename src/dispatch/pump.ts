import type { Knex } from 'knex';
import type { Queue } from 'bullmq';
import type { Logger } from 'pino';
import { admitDue, type AdmissionLimits } from '../store/admission-store.js';
import { deliveryJobId, type DeliveryJob } from './queue.js';

/**
 * Hands due work from PostgreSQL to Redis, as much as each endpoint has room for. Runs when woken
 * (new work, a freed slot) and on a short timer for retries coming due. Wake-ups while a round is
 * running coalesce into one more round, so a burst of commits costs a few rounds, not one each.
 */
export class Pump {
  private running = false;
  private again = false;
  private timer: NodeJS.Timeout | undefined;
  private retryTimer: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(
    private readonly db: Knex,
    private readonly queue: Queue<DeliveryJob>,
    private readonly limits: AdmissionLimits,
    private readonly logger: Logger,
    private readonly intervalMs = 250,
  ) {}

  start(): void {
    this.timer = setInterval(() => this.wake(), this.intervalMs);
    this.timer.unref();
    this.wake();
  }

  stop(): void {
    this.stopped = true;
    clearInterval(this.timer);
    clearTimeout(this.retryTimer);
  }

  wake = (): void => {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = true;
    void this.loop().finally(() => {
      this.running = false;
    });
  };

  private async loop(): Promise<void> {
    do {
      this.again = false;
      try {
        // Waits while another process admits (one at a time, platform-wide), then sees its result.
        const admitted = await admitDue(this.db, this.limits);
        if (admitted.length > 0) {
          await this.queue.addBulk(
            admitted.map((d) => ({ name: 'deliver', data: { deliveryId: d.id }, opts: { jobId: deliveryJobId(d.id, d.attempt_count + 1) } })),
          );
          // A full round may have left more due work behind.
          this.again = true;
        }
      } catch (err) {
        // Admitted rows that never reached Redis keep their lease and come back through the sweeper.
        this.logger.warn({ err }, 'admission round failed; retrying');
        this.scheduleRetry(500);
        return;
      }
    } while (this.again && !this.stopped);
  }

  private scheduleRetry(ms: number): void {
    clearTimeout(this.retryTimer);
    this.retryTimer = setTimeout(this.wake, ms);
    this.retryTimer.unref();
  }
}
