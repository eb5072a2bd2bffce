/**
 * The words of a delivery's life, defined once. The SQL that moves deliveries between these states
 * lives in src/delivery/ (see lifecycle.ts); migrations check the same lists in CHECK constraints,
 * and db/functions/attempt_triggers.sql and attempt_outcomes.sql give attempts' triggers and
 * outcomes their stored codes (test/unit/delivery-status.test.ts holds them all to these).
 */

export const DELIVERY_STATUSES = ['pending', 'queued', 'in_flight', 'succeeded', 'dead'] as const;
export type DeliveryStatus = (typeof DELIVERY_STATUSES)[number];

/** Not finished: the platform still owes an attempt or a result. */
export const UNFINISHED_STATUSES = ['pending', 'queued', 'in_flight'] as const satisfies readonly DeliveryStatus[];
export type UnfinishedStatus = (typeof UNFINISHED_STATUSES)[number];

export const isUnfinished = (status: string | undefined): status is UnfinishedStatus =>
  (UNFINISHED_STATUSES as readonly string[]).includes(status ?? '');

/** Finished for now; only a replay (an explicit operator action) moves one back to `pending`. */
export const FINAL_STATUSES = ['succeeded', 'dead'] as const satisfies readonly DeliveryStatus[];

/** Why a delivery was dead-lettered: the `dead_reason` column and the metric label. */
export const DEAD_LETTER_REASONS = ['max_attempts', 'max_age', 'terminal', 'endpoint_disabled', 'endpoint_deleted'] as const;
export type DeadLetterReason = (typeof DEAD_LETTER_REASONS)[number];

/** The reasons an attempt's own result can give; the endpoint's state gives the others. */
export type AttemptDeadReason = Extract<DeadLetterReason, 'max_attempts' | 'max_age' | 'terminal'>;

/** What one recorded attempt came to: the `attempts.outcome` column and the attempts metric label. */
export const ATTEMPT_OUTCOMES = ['success', 'retry', 'terminal'] as const;
export type AttemptOutcome = (typeof ATTEMPT_OUTCOMES)[number];

/** Why a pending delivery is not being sent yet: an open circuit, a retry's delay, a paced start. */
export const WAIT_REASONS = ['circuit', 'retry_delay', 'scheduled'] as const;
export type WaitReason = (typeof WAIT_REASONS)[number];

/** What the next attempt of a delivery is: its first, a retry, or one after a replay. */
export const TRIGGERS = ['initial', 'retry', 'replay'] as const;
export type Trigger = (typeof TRIGGERS)[number];

/**
 * Every transition the platform makes, by who makes it. Anything not listed never happens: the test
 * databases record every status change of every delivery, and the invariant checker
 * (test/helpers/invariants.ts, run by the chaos suite) reports any change no entry allows.
 */
export const TRANSITIONS = {
  fanOut: { from: null, to: ['pending', 'dead'] },
  backfill: { from: null, to: ['pending'] },
  admit: { from: ['pending'], to: ['queued', 'in_flight'] },
  claim: { from: ['queued'], to: ['in_flight', 'pending', 'dead'] },
  record: { from: ['in_flight'], to: ['succeeded', 'pending', 'dead'] },
  handOff: { from: ['pending'], to: ['in_flight'] },
  // The egress proxy failed before the target was reached: the attempt is given back, not recorded.
  egressFailed: { from: ['in_flight'], to: ['pending'] },
  sweepLostJob: { from: ['queued'], to: ['pending'] },
  unqueue: { from: ['queued'], to: ['pending'] },
  sweepLostWorker: { from: ['in_flight'], to: ['pending', 'dead'] },
  sweepExpired: { from: ['pending'], to: ['dead'] },
  sweepDisabledEndpoint: { from: ['pending'], to: ['dead'] },
  deleteEndpoint: { from: ['pending', 'queued'], to: ['dead'] },
  replay: { from: ['dead', 'succeeded'], to: ['pending'] },
} as const satisfies Record<string, { from: readonly DeliveryStatus[] | null; to: readonly DeliveryStatus[] }>;

export type Transition = keyof typeof TRANSITIONS;

export function allows(transition: Transition, from: DeliveryStatus | null, to: DeliveryStatus): boolean {
  const t = TRANSITIONS[transition];
  const fromOk = t.from === null ? from === null : from !== null && (t.from as readonly DeliveryStatus[]).includes(from);
  return fromOk && (t.to as readonly DeliveryStatus[]).includes(to);
}
