-- claim_delivery: takes a queued delivery for one attempt, as a worker does when Redis gives it the
-- job. Only one worker can win: the row moves queued -> in_flight atomically, with a lease long
-- enough for the attempt, after which the sweeper may take it back. The endpoint row is read here,
-- at attempt time, so a URL or secret changed since admission applies.
--
-- Inputs:  p_id, the delivery; p_event_id, its event (admission returns it with the delivery, and
--          the job carries it); p_lease_ms, the attempt's lease.
-- Outputs: the delivery as src/delivery/sql/claimed.ts reads it, or no row when it is not queued
--          (another worker won, or the sweep took it back). `status` says what the claim made of it:
--          `in_flight`, to send now; `pending`, its endpoint was paused since admission, so nothing
--          is sent and it waits for the resume, with no attempt counted; `dead`, its endpoint was
--          disabled or deleted since admission, dead-lettered in this statement with no attempt
--          counted or logged, as if it had still been waiting when that happened.
-- Effects: the delivery's row (its queue row through the triggers).
-- Locks:   the delivery's row. PostgreSQL 15 locks every day of `events` in the plan before
--          running it, and reads only the event's. No lock order with the partition upkeep:
--          since the next release after 0.6.0 (which does not run beside it) every new partition
--          is attached, which needs none.
--
-- A function rather than a statement of the worker's, for its plan. The event is named by its id,
-- a value known when the statement starts, so only its day of `events` is read. As a prepared
-- statement, PostgreSQL priced a plan for any id over every day kept and chose to plan each call
-- for its values instead: 0.2 ms of planning for 0.04 of work at 30 days kept (docs/performance.md,
-- "A claim planned once per connection"). Here one plan serves any id, made again only when a
-- table it reads changes or is analyzed. It reads by key only: a day analyzed while still empty
-- (as `vacuumdb --analyze` leaves the days made ahead) would otherwise be planned as a sequential
-- scan, kept until the plan is made again.
CREATE OR REPLACE FUNCTION claim_delivery(p_id uuid, p_event_id uuid, p_lease_ms integer)
RETURNS TABLE (
  id uuid, tenant_id uuid, status text, attempt_count integer, attempt_base integer,
  replayed_at timestamptz, next_trigger text, deadline_at timestamptz, succeeded_at timestamptz,
  event_id uuid, event_type text, event_created_at timestamptz, body text,
  ep_id uuid, url text, ep_status text, retry_policy jsonb, secret_enc text, previous_secret_enc text,
  previous_secret_expires_at timestamptz, deleted_at timestamptz, event_trace_parent text, trace_parent text,
  lease_token bigint
)
LANGUAGE plpgsql VOLATILE SET plan_cache_mode = force_generic_plan SET enable_seqscan = off
  SET enable_hashjoin = off SET enable_mergejoin = off AS $$
#variable_conflict use_column
BEGIN
  RETURN QUERY
  UPDATE deliveries d
     SET status = CASE WHEN x.live THEN 'in_flight' WHEN x.held THEN 'pending' ELSE 'dead' END,
         attempt_count = d.attempt_count + CASE WHEN x.live THEN 1 ELSE 0 END,
         lease_until = CASE WHEN x.live THEN now() + make_interval(secs => p_lease_ms / 1000.0) END,
         next_attempt_at = CASE WHEN x.live OR x.held THEN d.next_attempt_at END,
         dead_reason = CASE WHEN x.live OR x.held THEN d.dead_reason WHEN ep.deleted_at IS NULL THEN 'endpoint_disabled' ELSE 'endpoint_deleted' END,
         last_error = CASE WHEN x.live OR x.held THEN d.last_error
                           WHEN ep.deleted_at IS NULL THEN 'endpoint is disabled' ELSE 'endpoint was deleted' END,
         updated_at = now()
    FROM events ev, endpoints ep,
         LATERAL (SELECT ep.status = 'active' AND ep.deleted_at IS NULL AS live, ep.status = 'paused' AND ep.deleted_at IS NULL AS held) x
   WHERE d.id = p_id AND d.status = 'queued' AND ev.id = p_event_id AND ev.id = d.event_id AND ep.id = d.endpoint_id
  RETURNING d.id, d.tenant_id, d.status, d.attempt_count, d.attempt_base, d.replayed_at, d.next_trigger, d.deadline_at, d.succeeded_at,
            ev.id, ev.type, ev.created_at, event_body(ev),
            ep.id, ep.url, ep.status, ep.retry_policy, ep.secret_enc, ep.previous_secret_enc,
            ep.previous_secret_expires_at, ep.deleted_at, ev.trace_parent, d.trace_parent,
            lease_token(d.lease_until);
END $$;
