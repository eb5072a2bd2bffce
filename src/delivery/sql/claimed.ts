/**
 * What an attempt needs of a delivery, its event and its endpoint, as every statement that puts a
 * delivery in flight returns it: the claim, admission straight to a local slot, and slot hand-off
 * (the SQL functions claim_delivery, admit_due_v4, hand_off_v4, record_attempt_v4 and
 * record_successes_v4 return the same columns).
 */
import type { EndpointRow } from '../../store/endpoints-store.js';
import type { Trigger } from '../../domain/delivery-status.js';
import { idOfUuid } from '../../domain/ids.js';

export interface ClaimedDelivery {
  id: string;
  tenant_id: string;
  /**
   * `in_flight`: this worker holds it. `pending`: its endpoint was paused before it could be sent,
   * so it waits again. `dead`: its endpoint was disabled or deleted before it could be sent.
   */
  status: 'in_flight' | 'pending' | 'dead';
  attempt_count: number;
  /** Attempts made before the last replay; a replay gets a fresh attempt budget. */
  attempt_base: number;
  replayed_at: Date | null;
  next_trigger: Trigger;
  deadline_at: Date;
  succeeded_at: Date | null;
  event_id: string;
  event_type: string;
  event_created_at: Date;
  body: string;
  /** The event's fan-out span (a W3C `traceparent`), null when the event was not traced. */
  event_trace_parent: string | null;
  /** A replay's own span, null for a delivery never replayed (src/outbound/attempt-spans.ts). */
  trace_parent: string | null;
  /**
   * The claim's token (db/functions/lease_token.sql): its result is recorded under it, so that a
   * claim lost in a crash of PostgreSQL cannot record over the claim made after it (microseconds;
   * int8 is parsed as a number, src/infra/db.ts). Null only beside a `status` other than
   * `in_flight`, a claim that makes no attempt.
   */
  lease_token: number;
  endpoint: Pick<EndpointRow, 'id' | 'url' | 'status' | 'retry_policy' | 'secret_enc' | 'previous_secret_enc' | 'previous_secret_expires_at' | 'deleted_at'>;
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export function rowToClaimed(r: any): ClaimedDelivery {
  return {
    id: idOfUuid('delivery', r.id),
    tenant_id: idOfUuid('tenant', r.tenant_id),
    status: r.status,
    attempt_count: r.attempt_count,
    attempt_base: r.attempt_base,
    replayed_at: r.replayed_at,
    next_trigger: r.next_trigger,
    deadline_at: r.deadline_at,
    succeeded_at: r.succeeded_at,
    event_id: idOfUuid('event', r.event_id),
    event_type: r.event_type,
    event_created_at: r.event_created_at,
    body: r.body,
    event_trace_parent: r.event_trace_parent,
    trace_parent: r.trace_parent,
    lease_token: r.lease_token,
    endpoint: {
      id: idOfUuid('endpoint', r.ep_id),
      url: r.url,
      status: r.ep_status,
      retry_policy: r.retry_policy,
      secret_enc: r.secret_enc,
      previous_secret_enc: r.previous_secret_enc,
      previous_secret_expires_at: r.previous_secret_expires_at,
      deleted_at: r.deleted_at,
    },
  };
}

