/**
 * How long finished data is kept, and the time arithmetic retention needs. Pure: no clock, no I/O.
 *
 * Ids are TypeIDs whose first 10 base32 characters after the prefix are a 48-bit Unix time in
 * milliseconds (UUIDv7), so an id says when it was made; the time-partitioned tables are cut by id
 * ranges (migration 20261201000015), of TypeIDs or of the uuids they encode, which start with the
 * same 48 bits (db/functions/partition_floor.sql), and an id older than what retention removed can be
 * told apart from an id that never existed.
 */

import { lowestStoredId } from './ids.js';

/** The tables retention removes rows from (the label of webhook_retention_removed_total). */
export const RETAINED_TABLES = ['events', 'receipts', 'attempts', 'deliveries', 'event_keys', 'messages', 'audit_log', 'replays'] as const;
export type RetainedTable = (typeof RETAINED_TABLES)[number];

export interface RetentionPolicy {
  /** Succeeded deliveries with their attempts, receipts, and events whose deliveries are all gone. */
  retentionDays: number;
  /** Dead deliveries, counted from when they died; until then they can be replayed. */
  deadLetterRetentionDays: number;
  auditRetentionDays: number;
}

export const defaultRetention: RetentionPolicy = { retentionDays: 30, deadLetterRetentionDays: 30, auditRetentionDays: 365 };

/** Days of partitions made ahead of today, so that a worker down for days does not stop intake. */
export const partitionDaysAhead = 8;

/** Days kept from which events, receipts and attempts are cut by week rather than by day. */
export const weeklyPartitionsFromDays = 56;

/**
 * How long a new partition of events, receipts and attempts is. Every cached plan that reads events
 * locks each of its partitions, which costs claims and lock table room by the partition
 * (docs/operations/postgres.md). A week's partition takes a seventh of a week of days' locks, and
 * keeps its rows up to 7 days past their window where days keep them 1: by the longer window,
 * because dead letters hold their days of events as long as they are kept, and by eight weeks,
 * where those days cost little beside it.
 */
export function dayTablesPeriod(policy: RetentionPolicy): 'day' | 'week' {
  return longerWindowDays(policy) >= weeklyPartitionsFromDays ? 'week' : 'day';
}

/**
 * The partitions of `events` a database holds once it has run for its retention windows: those of
 * the longer window (a day stays while a dead letter of it is kept), today and the days made ahead;
 * by week, the weeks those days touch.
 */
export function eventPartitionsKept(policy: RetentionPolicy): number {
  const days = longerWindowDays(policy) + 1 + partitionDaysAhead;
  return dayTablesPeriod(policy) === 'day' ? days : Math.ceil(days / 7) + 1;
}

function longerWindowDays(policy: RetentionPolicy): number {
  return Math.max(policy.retentionDays, policy.deadLetterRetentionDays);
}

/** Where each retention window begins (db/functions/retention_cutoff.sql computes them). */
export interface Cutoffs {
  /** Finished before this, a succeeded delivery (and an event with nothing left) may go. */
  succeeded: Date;
  /** Died before this, a dead delivery may go and can no longer be replayed. */
  dead: Date;
  audit: Date;
}

/**
 * A delivery may not outlive the data it is made of: its maximum event age (the platform's
 * MAX_EVENT_AGE_SECONDS or an endpoint's retryPolicy.maxEventAgeSeconds) must end within
 * RETENTION_DAYS. Returns the problem in words, or undefined.
 */
export function maxAgeProblem(maxEventAgeSeconds: number, policy: RetentionPolicy): string | undefined {
  const limit = policy.retentionDays * 86_400;
  if (maxEventAgeSeconds <= limit) return undefined;
  return `must not exceed RETENTION_DAYS (${policy.retentionDays} days = ${limit} seconds): an event's deliveries must end before retention may remove it`;
}

const alphabet = '0123456789abcdefghjkmnpqrstvwxyz';
const typeIdPattern = /^[a-z](?:[a-z_]*[a-z])?_[0-7][0-9a-hjkmnp-tv-z]{25}$/;

/** When a TypeID was made, or undefined for anything that is not one. */
export function typeIdTime(id: string): Date | undefined {
  if (!typeIdPattern.test(id)) return undefined;
  const suffix = id.slice(-26, -16);
  let ms = 0;
  for (const ch of suffix) ms = ms * 32 + alphabet.indexOf(ch);
  return new Date(ms);
}

/**
 * The lowest event id, as stored (a uuid), that retention has not removed or begun to remove, given
 * the events watermark (retention_watermarks); the lowest uuid before any removal. What reads old
 * events to make new rows starts there.
 */
export function eventsKeptFromId(removedBefore: Date | undefined): string {
  return removedBefore ? uuidFloor(removedBefore) : lowestStoredId;
}

/** When an id stored as a uuid was made (its first 48 bits), or undefined for anything that is not one. */
export function uuidTime(uuid: string): Date | undefined {
  if (!/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/.test(uuid)) return undefined;
  return new Date(Number.parseInt(uuid.slice(0, 8) + uuid.slice(9, 13), 16));
}

/**
 * The smallest uuid of an id made at or after `at` (as SQL's uuid_floor), for the kinds of ids the
 * stores keep as the uuid their TypeID encodes: its first 48 bits are the millisecond time.
 */
export function uuidFloor(at: Date): string {
  const hex = Math.floor(at.getTime()).toString(16).padStart(12, '0');
  return `${hex.slice(0, 8)}-${hex.slice(8)}-0000-0000-000000000000`;
}

/** The smallest TypeID of this prefix made at or after `at` (as SQL's typeid_floor). */
export function typeIdFloor(prefix: string, at: Date): string {
  let ms = Math.floor(at.getTime());
  let out = '';
  for (let i = 0; i < 10; i++) {
    out = alphabet[ms % 32]! + out;
    ms = Math.floor(ms / 32);
  }
  return `${prefix}_${out}${'0'.repeat(16)}`;
}
