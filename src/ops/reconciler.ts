import type { Knex } from 'knex';
import pLimit from 'p-limit';
import type { Logger } from 'pino';
import { digestHex } from '../domain/dedupe.js';
import { advances, messageStatus } from '../domain/message-status.js';
import type { SecretBox } from '../domain/secret-box.js';
import type { DeliveryClient } from '../outbound/http-client.js';
import { getAdapter } from '../inbound/adapters/index.js';
import type { IntakeService } from '../inbound/intake-service.js';
import { metrics, type ReconcileOutcome } from '../metrics/registry.js';
import { claimReconcileBatch, type ReconcileCandidate } from '../store/reconcile-store.js';

export interface ReconcilerDeps {
  db: Knex;
  box: SecretBox;
  intake: IntakeService;
  client: DeliveryClient;
  logger: Logger;
  intervalSeconds: number;
  /** Messages polled per run; the rest wait for the next run. */
  batchSize?: number;
  concurrency?: number;
  random?: () => number;
}

/**
 * Recovers what a non-retrying provider never sent (Momo communication callbacks have no retries):
 * for messages stuck in a non-final status, ask the provider, and feed a newer status through the
 * same intake path as a callback. The dedupe key is the callback's, so a real callback for the same
 * transition arriving later is a duplicate and nothing is forwarded twice.
 */
export class Reconciler {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private stopped = false;

  constructor(private readonly deps: ReconcilerDeps) {}

  start(): void {
    this.stopped = false;
    // Jittered start so many worker processes (and many deployments) don't poll in lockstep.
    const random = this.deps.random ?? Math.random;
    const tick = () => {
      // A run that was under way when stop() was called must not schedule another one.
      if (this.stopped) return;
      this.timer = setTimeout(() => {
        this.running = this.runOnce().then(() => undefined).finally(tick);
      }, this.deps.intervalSeconds * 1000 * (0.8 + 0.4 * random()));
      this.timer.unref();
    };
    tick();
  }

  /** Stops the timer and waits for a run in progress; runOnce() may still be called directly. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running?.catch(() => undefined);
  }

  async runOnce(): Promise<Record<ReconcileOutcome, number>> {
    const counts: Record<ReconcileOutcome, number> = { changed: 0, unchanged: 0, provider_error: 0, invalid_response: 0 };
    let batch: ReconcileCandidate[];
    try {
      batch = await claimReconcileBatch(this.deps.db, this.deps.batchSize ?? 100, this.deps.intervalSeconds);
    } catch (err) {
      this.deps.logger.warn({ err }, 'reconciliation could not read its work; next run retries');
      return counts;
    }
    const random = this.deps.random ?? Math.random;
    const limit = pLimit(this.deps.concurrency ?? 4);
    // Spread the polls over a fraction of the interval instead of firing them all at once.
    const spreadMs = Math.min(this.deps.intervalSeconds * 250, 5_000);
    await Promise.all(
      batch.map((candidate) =>
        limit(async () => {
          await new Promise((r) => setTimeout(r, Math.floor(random() * (spreadMs / Math.max(1, batch.length)))));
          const outcome = await this.poll(candidate).catch((err: unknown) => {
            this.deps.logger.warn({ err, messageId: candidate.message_id }, 'reconciliation poll failed');
            return 'provider_error' as const;
          });
          counts[outcome]++;
          metrics.reconcilePolls.inc({ outcome });
        }),
      ),
    );
    return counts;
  }

  private async poll(c: ReconcileCandidate): Promise<ReconcileOutcome> {
    const apiKey = this.deps.box.open(c.api_key_enc, `${c.source_id}:reconcile`);
    const url = `${c.base_url.replace(/\/+$/, '')}/messages/${encodeURIComponent(c.message_id)}`;
    const result = await this.deps.client.send({ url, method: 'GET', headers: { authorization: `Bearer ${apiKey}`, accept: 'application/json' } });
    if (result.outcome.kind !== 'response' || result.outcome.statusCode < 200 || result.outcome.statusCode >= 300) return 'provider_error';
    let answer: unknown;
    try {
      answer = JSON.parse(result.responseExcerpt ?? '');
    } catch {
      return 'invalid_response';
    }
    const a = answer as { message_id?: unknown; status?: unknown; updated_at?: unknown };
    if (a === null || typeof a !== 'object' || a.message_id !== c.message_id || typeof a.status !== 'string') return 'invalid_response';
    const reported = messageStatus(a.status);
    if (reported === undefined) return 'invalid_response';
    // A provider that is not ahead of us has nothing to tell. Feeding its answer to intake anyway would
    // add a duplicate or stale receipt on every run, for as long as the message stays open.
    const current = c.status === null ? undefined : messageStatus(c.status);
    if (current !== undefined && !advances(current, reported)) return 'unchanged';
    // Shaped exactly like the provider's own callback, so the adapter derives the same dedupe key.
    const body = JSON.stringify({ event: 'message.status', message_id: c.message_id, status: a.status, timestamp: typeof a.updated_at === 'string' ? a.updated_at : undefined });
    const parsed = getAdapter('momo-communication').parse({ rawBody: Buffer.from(body), headers: {}, now: new Date() });
    if (!parsed.ok) return 'invalid_response';
    const record = await this.deps.intake.accept({ id: c.source_id, tenantId: c.tenantId }, parsed.event, digestHex(body), 'reconcile', new Date());
    return record.outcome === 'accepted' ? 'changed' : 'unchanged';
  }
}
