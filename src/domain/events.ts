import type { MessageStatus } from './message-status.js';
import type { RawJson } from './raw-json.js';

/** One logical event as a provider adapter reads it from a verified callback. */
export interface ParsedEvent {
  /** Event type forwarded to endpoints and matched against their eventTypes filters. */
  type: string;
  /** Unique per source for one logical event: the same provider event always yields the same key. */
  dedupeKey: string;
  /** The business resource the event concerns (message, order, group...), if any. */
  messageId?: string;
  /** Set only where the contract defines an ordered status for the resource. */
  status?: MessageStatus;
  /** Provider's own ordering hint when it has one (sequence/version); used for per-message ordering. */
  sequence?: number;
  /** The provider's business payload as it wrote it, forwarded as `data` without being re-serialised. */
  data: RawJson;
}

/**
 * What intake made of an accepted callback or a published event: a new event, a repeat of a known
 * one, or (for ordered message statuses) a stale one recorded and forwarded to nobody.
 */
export const INTAKE_OUTCOMES = ['accepted', 'duplicate', 'stale'] as const;
export type IntakeOutcome = (typeof INTAKE_OUTCOMES)[number];
