import type { KeyObject } from 'node:crypto';
import type { Logger } from 'pino';
import { isPlatformHeader } from '../domain/endpoint-headers.js';
import type { AttemptRecord, ClaimedDelivery, DeliveryLifecycle, Recorded, SuccessItem } from '../delivery/index.js';
import { decide, proxyRetryAt, resolvePolicy, type AttemptResult, type ProxyFailure, type RetryPolicy } from '../domain/retry-policy.js';
import type { SecretBox } from '../domain/secret-box.js';
import { ed25519PrivateKey, signatureHeader } from '../domain/signing.js';
import { RecentMap } from '../domain/recent.js';
import { metrics, statusClass } from '../metrics/registry.js';
import { signingSecrets } from '../store/endpoints-store.js';
import type { EndpointHeaders } from './endpoint-headers.js';
import type { FairShare } from './fair-share.js';
import type { DeliveryClient } from './http-client.js';
import { AttemptTracing } from './attempt-spans.js';
import { traceIds, type Span } from '../infra/tracing.js';
import { countsTowardLatencyObjective, startedOnTime } from '../domain/slo.js';
import { setImmediate as afterPendingReads } from 'node:timers/promises';

export interface DeliverDeps {
  lifecycle: DeliveryLifecycle;
  box: SecretBox;
  client: DeliveryClient;
  /** The endpoints' own request headers; without it, attempts carry the platform's headers only. */
  endpointHeaders?: EndpointHeaders;
  logger: Logger;
  defaults: RetryPolicy;
  /** Lease on an in-flight attempt: the attempt timeout plus a margin for recording the result. */
  inFlightLeaseMs: number;
  random?: () => number;
  now?: () => Date;
  /** False while shutting down: a slot then stops taking its endpoint's next delivery. */
  mayContinue?: () => boolean;
  /** Records a success together with other slots' (group commit); without it, each alone. */
  recordSuccess?: (item: SuccessItem) => Promise<Recorded>;
  /** CIRCUIT_FAILURE_THRESHOLD, for telling a held endpoint apart (src/domain/slo.ts). */
  circuitFailureThreshold?: number;
  /** Tracing is on: the attempts of traced work make spans. */
  tracing?: boolean;
  /** The process's fair share of slots between tenants; without it, a slot hands off while it may. */
  fairShare?: FairShare;
  /** Waits while late work yields to live work (backlog-pacing.ts); without it, nothing is paced. */
  pace?: (claimed: ClaimedDelivery) => Promise<void> | undefined;
  /** Keeps what an attempt leaves running beside its slot (a latency sample), for stopping to await. */
  track?: (work: Promise<void>) => void;
}

/**
 * How long after its event's acceptance a delivery's first attempt starts at `atMs`; undefined
 * for any other attempt (a retry, a replay, a backfill). The delivery-latency SLI and the backlog
 * pacing both read it.
 */
export function firstAttemptWaitMs(claimed: ClaimedDelivery, atMs: number): number | undefined {
  if (claimed.next_trigger !== 'initial' || claimed.attempt_count - claimed.attempt_base !== 1) return undefined;
  return atMs - claimed.event_created_at.getTime();
}

/** Deliveries one job may carry through slot hand-off before it lets admission decide again. */
const maxHandOffs = 500;
/**
 * How long one chain of hand-offs may hold its endpoint's slot before admission decides again. At
 * 100 ms an answer, 500 hand-offs held a slot for 50 s, so a worker that joined a backlog could
 * wait that long for its first share of it.
 */
const maxChainMs = 5_000;

const userAgent = 'webhook-relay/1.0';

/**
 * Ed25519 private keys already parsed, by their `whsk_` text: parsing builds a key object, which
 * signing every attempt of a busy endpoint need not repeat. A rotated-out key simply ages out.
 */
const parsedKeys = new RecentMap<KeyObject>(10_000);
function cachedPrivateKey(secret: string): KeyObject {
  let key = parsedKeys.get(secret);
  if (!key) parsedKeys.set(secret, (key = ed25519PrivateKey(secret)));
  return key;
}

/**
 * The request headers of one attempt, following Standard Webhooks, after the endpoint's own
 * (`own`). A platform header's name is refused on write; it is skipped here too, whatever its case,
 * so that no stored value can ever replace or duplicate one.
 */
export function outboundHeaders(d: ClaimedDelivery, secrets: string[], timestampSec: number, own: Record<string, string> = {}): Record<string, string> {
  return {
    ...Object.fromEntries(Object.entries(own).filter(([name]) => !isPlatformHeader(name))),
    'content-type': 'application/json',
    'user-agent': userAgent,
    'webhook-id': d.event_id,
    'webhook-timestamp': String(timestampSec),
    'webhook-signature': signatureHeader(secrets, d.event_id, timestampSec, d.body, cachedPrivateKey),
    'webhook-delivery-id': d.id,
    'webhook-attempt': String(d.attempt_count),
    // Every try after a replay, including its retries, says so.
    'webhook-replay': d.replayed_at ? 'true' : 'false',
  };
}

/** Claims a delivery admitted to Redis (queued → in_flight) and runs its slot; `eventId` as in DeliveryJob. */
export async function deliverQueued(deps: DeliverDeps, deliveryId: string, eventId?: string): Promise<void> {
  const claimed = await deps.lifecycle.claim(deliveryId, deps.inFlightLeaseMs, eventId);
  if (claimed?.status === 'in_flight') await runSlot(deps, claimed);
}

/**
 * Runs one slot of an endpoint, starting with a delivery already in flight for it: while the
 * endpoint has due work, each result hands the slot on to the next delivery (whatever the outcome)
 * instead of sending the endpoint back through admission and Redis.
 */
export async function runSlot(deps: DeliverDeps, first: ClaimedDelivery): Promise<void> {
  const { tenant_id: tenantId, endpoint } = first;
  const leave = deps.fairShare?.enter(tenantId, endpoint.id, first.id);
  try {
    let claimed: ClaimedDelivery | undefined = first;
    const now = deps.now ?? (() => new Date());
    const until = now().getTime() + maxChainMs;
    for (let handOffs = 0; claimed; handOffs++) {
      // Asked when the attempt is done, so a shutdown signalled meanwhile stops the hand-off, and
      // work of another tenant that came in meanwhile gets this slot (fair-share.ts).
      const mayHandOff = () =>
        handOffs < maxHandOffs &&
        now().getTime() < until &&
        (deps.mayContinue?.() ?? true) &&
        (deps.fairShare?.mayHandOff(tenantId, endpoint.id) ?? true);
      claimed = await attemptClaimed(deps, claimed, mayHandOff);
      // A group commit hands on to many slots at once; started here, in the record's callback,
      // they would all run before the event loop reads its next socket. After it, they run once
      // the loop has read what else is ready: another tenant's wake-up, round or response.
      if (claimed) await afterPendingReads();
    }
  } finally {
    leave?.();
  }
}

/**
 * One attempt, in its span when its work is traced (src/outbound/attempt-spans.ts). The span is
 * passed down, not made active: a worker runs without the async context manager (src/infra/tracing.ts).
 */
async function attemptClaimed(deps: DeliverDeps, claimed: ClaimedDelivery, mayHandOff: () => boolean): Promise<ClaimedDelivery | undefined> {
  if (!deps.tracing) return attemptOnce(deps, claimed, mayHandOff);
  const tracing = new AttemptTracing(claimed);
  try {
    return await attemptOnce(deps, claimed, mayHandOff, tracing);
  } catch (err) {
    tracing.end(undefined, err);
    throw err;
  } finally {
    tracing.end();
  }
}

/**
 * One attempt of one claimed delivery: send it, decide what the outcome means, record both.
 * Every outcome of the receiver is a result, not an error; only a storage failure throws, and then
 * the delivery's lease brings it back. Returns the endpoint's next delivery when it was handed off.
 */
async function attemptOnce(deps: DeliverDeps, claimed: ClaimedDelivery, mayHandOff: () => boolean, tracing?: AttemptTracing): Promise<ClaimedDelivery | undefined> {
  const deliveryId = claimed.id;
  const now = deps.now ?? (() => new Date());
  const ep = claimed.endpoint;
  // Awaited only when there is a wait: most attempts are not paced, and this is every attempt's path.
  const paced = deps.pace?.(claimed);
  if (paced) await paced;
  const startedAt = now();
  const timestampSec = Math.floor(startedAt.getTime() / 1000);
  const own = deps.endpointHeaders ? await deps.endpointHeaders.settings(claimed.tenant_id, ep.id) : { headers: {}, tls: null, propagateTraceContext: false };
  const traceHeader = own.propagateTraceContext && tracing ? tracing.header() : {};
  const requestStartedAt = Date.now();
  const result = await deps.client.send({
    url: ep.url,
    headers: {
      ...outboundHeaders(claimed, signingSecrets(deps.box, ep, startedAt), timestampSec, own.headers),
      ...traceHeader,
    },
    body: claimed.body,
    ...(own.tls && { tls: { endpointId: ep.id, ...own.tls } }),
  });
  const answer = result.outcome;
  const span = tracing?.answered(requestStartedAt, {
    statusCode: answer.kind === 'response' ? answer.statusCode : null,
    errorClass: answer.kind === 'error' ? answer.errorClass : answer.kind === 'proxy_failure' ? `egress_proxy_${answer.reason}` : null,
    message: answer.kind === 'response' ? undefined : answer.message,
  });
  if (answer.kind === 'proxy_failure') {
    tracing?.end('egress_failed');
    return egressFailed(deps, claimed, answer);
  }
  const outcome: AttemptResult = answer;
  const policy = resolvePolicy(deps.defaults, ep.retry_policy);
  const decision = decide(outcome, {
    attemptNumber: claimed.attempt_count - claimed.attempt_base,
    now: now(),
    deadline: claimed.deadline_at,
    policy,
    random: deps.random ?? Math.random,
  });
  const statusCode = outcome.kind === 'response' ? outcome.statusCode : null;
  const record: AttemptRecord = {
    deliveryId,
    endpointId: ep.id,
    attemptNumber: claimed.attempt_count,
    leaseToken: claimed.lease_token,
    trigger: claimed.next_trigger,
    startedAt,
    durationMs: result.durationMs,
    statusCode,
    outcome: decision.action === 'succeed' ? 'success' : decision.action === 'retry' ? 'retry' : 'terminal',
    errorClass: outcome.kind === 'error' ? outcome.errorClass : statusCode !== null && (statusCode < 200 || statusCode >= 300) ? `http_${statusCode}` : null,
    errorMessage: outcome.kind === 'error' ? outcome.message : decision.action === 'dead' ? decision.detail : null,
    responseExcerpt: result.responseExcerpt ?? null,
    next:
      decision.action === 'succeed'
        ? { status: 'succeeded' }
        : decision.action === 'retry'
          ? { status: 'pending', at: decision.at }
          : { status: 'dead', reason: decision.reason },
    // Only failures that say "not reachable or not coping" count against the endpoint's health.
    endpointFailure: decision.action === 'retry' || (decision.action === 'dead' && decision.reason !== 'terminal'),
    disableEndpoint: decision.action === 'dead' && decision.disableEndpoint ? 'endpoint answered 410 Gone' : undefined,
  };
  // The span ends with the answer and what it means, not with the recording after it.
  tracing?.end(decision.action === 'succeed' ? 'success' : decision.action);
  // Counted as made before it is recorded: the receiver got the request whatever becomes of the
  // record. A record whose commit is lost with its connection may or may not have landed; if it did
  // not, the lease brings the delivery back with a `worker_lost` row for this attempt.
  const sc = statusClass(statusCode);
  metrics.attemptDuration.observe({ status_class: sc }, result.durationMs / 1000, span);
  metrics.deliveryAttempts.inc({ outcome: record.outcome, status_class: sc });
  const waitMs = firstAttemptWaitMs(claimed, startedAt.getTime());
  if (waitMs !== undefined) observeFirstAttemptDelay(deps, claimed, waitMs / 1000, startedAt, span);
  // Every attempt in flight may get the 410; only the one that disables the endpoint audits and
  // announces it. A failure to disable must not cost the record: the next 410 disables it.
  const disabledNow = record.disableEndpoint
    ? await deps.lifecycle.disableGoneEndpoint({ id: ep.id, tenantId: claimed.tenant_id, reason: record.disableEndpoint }).catch((err: unknown) => {
        deps.logger.warn({ err, endpointId: ep.id, ...traceIds(span) }, 'endpoint answered 410 but could not be disabled; its next 410 tries again');
        return false;
      })
    : false;
  const handOff = mayHandOff();
  const { applied, next } =
    decision.action === 'succeed' && deps.recordSuccess
      ? await deps.recordSuccess({ record, handOff })
      : await deps.lifecycle.record(record, handOff ? deps.inFlightLeaseMs : undefined);
  if (!applied) {
    deps.logger.warn({ deliveryId, ...traceIds(span) }, 'attempt finished after its lease was taken back; result kept only in metrics');
    return undefined;
  }
  if (decision.action === 'succeed' && claimed.succeeded_at === null) {
    metrics.deliveryLatency.observe((Date.now() - claimed.event_created_at.getTime()) / 1000, span);
  }
  if (decision.action === 'dead') {
    const disabled = disabledNow && record.disableEndpoint ? [{ id: ep.id, tenantId: claimed.tenant_id, reason: record.disableEndpoint }] : [];
    await deps.lifecycle.announce([claimed.id], disabled).catch((err: unknown) => {
      deps.logger.warn({ err, deliveryId: claimed.id, ...traceIds(span) }, 'operational event could not be published');
    });
  }
  return next;
}

/**
 * A first attempt's sample for the delivery-latency objective (src/domain/slo.ts). A late one
 * counts only if its endpoint was up, as read after the attempt started: a resume or a closed
 * circuit a moment ago must be seen, or the backlog it let go would count as late. That read is
 * waited for beside the slot, since it must hold neither the attempt's record nor the slot's next
 * attempt; stopping waits for it (DeliverDeps.track).
 */
function observeFirstAttemptDelay(deps: DeliverDeps, claimed: ClaimedDelivery, delaySeconds: number, startedAt: Date, span: Span | undefined): void {
  const observe = () => metrics.firstAttemptDelay.observe(delaySeconds, span);
  if (startedOnTime(delaySeconds) || !deps.endpointHeaders) return observe();
  const judged = deps.endpointHeaders
    .settingsAsOf(claimed.tenant_id, claimed.endpoint.id, startedAt.getTime())
    .then(
      ({ held }) => {
        const now = deps.now?.() ?? new Date();
        if (countsTowardLatencyObjective(delaySeconds, claimed.event_created_at, held, deps.circuitFailureThreshold ?? Number.POSITIVE_INFINITY, now)) observe();
      },
      (err: unknown) => {
        // A metric's read: when it fails (a saturated pool, when attempts are late), the late
        // attempt counts, as it would for an endpoint not held back.
        deps.logger.warn({ err, deliveryId: claimed.id }, 'endpoint state for the latency objective could not be read; this late attempt counts');
        observe();
      },
    )
    // Nothing awaits it but stopping, and an unhandled rejection would end the process.
    .catch((err: unknown) => deps.logger.warn({ err, deliveryId: claimed.id }, 'first attempt delay could not be sampled'));
  deps.track?.(judged);
}

/**
 * The egress proxy failed before the target answered: nothing reached the endpoint, so the attempt
 * is given back and the delivery waits on the platform's own short schedule, with no attempt row,
 * no attempt metric and no change to the endpoint's health. The slot ends: the proxy is likely to
 * fail the endpoint's next delivery too.
 */
async function egressFailed(deps: DeliverDeps, claimed: ClaimedDelivery, failure: ProxyFailure): Promise<undefined> {
  const applied = await deps.lifecycle.egressFailed({
    deliveryId: claimed.id,
    attemptNumber: claimed.attempt_count,
    leaseToken: claimed.lease_token,
    nextAt: proxyRetryAt((deps.now ?? (() => new Date()))(), deps.random ?? Math.random),
    lastError: `egress_proxy_${failure.reason}: ${failure.message}`,
  });
  if (!applied) deps.logger.warn({ deliveryId: claimed.id }, 'proxy failure reported after the lease was taken back; nothing changed');
  return undefined;
}
