-- record_successes_v4: several slots' successes in one call (group commit), each recorded exactly as
-- record_attempt_v4 records one: the same guard against late results, a first try stored in its
-- delivery rather than in `attempts` (attempt_stored_in_delivery), the circuit closed
-- (endpoint_health_after_attempts), and the hand-off. An endpoint with k applied successes whose
-- slots want to go on hands on up to k deliveries, all endpoints in one hand_off_v4 call, so two
-- slots are never given the same delivery.
--
-- Its commit does not wait for the WAL flush (synchronous_commit off for this transaction only):
-- a success that a crash of PostgreSQL loses leaves its delivery in flight, and the lease sends it
-- again, exactly as when a worker dies between the receiver's answer and the record. Delivery is
-- at-least-once either way and receivers dedupe by webhook-id. Failures, dead letters and every
-- operator action keep the synchronous commit: what they announce or audit must not be undone.
--
-- Inputs:  parallel arrays, one element per success (delivery, attempt number and id, tenant,
--          trigger (a word, stored as its code: attempt_triggers), start, duration, status code,
--          excerpt, endpoint, whether its slot goes on, its claim's token: claim_held_v2; a token
--          missing records nothing, arrays of other lengths are refused),
--          p_threshold (circuit), p_lease_ms (lease of a handed attempt). p_tenant_ids is not read
--          (since release 0.3.0, which passes NULL): an attempt's tenant is its delivery's. The
--          column stays, unwritten, because the down step of migration 20261201000015 copies
--          attempts back by column position (docs/architecture.md).
-- Outputs: a first row with `applied`, the 1-based positions of the successes that were taken,
--          and no delivery; then one row per handed delivery (columns as src/delivery/sql/claimed.ts).
-- Effects: deliveries (succeeded, the attempt's number as its attempt_count, first_try_* for a
--          first try), and through the triggers their queue rows; attempts, endpoints (circuit
--          reset), the handed deliveries.
-- Locks:   the deliveries' rows, the endpoints' rows in id order,
--          the handed rows.
-- Plans:   generic, joining by nested loop only, with sequential scans priced out, as hand_off_v4
--          (see its header): planned on a near-empty table, the update below found its deliveries
--          by hashing the whole table.
--
-- The columns of a delivery in flight are those of src/delivery/sql/claimed.ts, ending with the
-- stored trace contexts (its event's fan-out, and a replay's own), so an attempt's span needs no
-- read of its own, then the claim's token (lease_token), which its result is recorded under
-- (claim_held_v2: the claim in the delivery's queue row or in the delivery, as claim_in_queue says). A
-- claim kept in the queue is why this is a new function: release 0.5.0's processes recorded their
-- claims, all written to `deliveries`, through the `_v3` (dropped by migration 20261205000050).
CREATE OR REPLACE FUNCTION record_successes_v4(
  p_delivery_ids uuid[], p_attempt_numbers integer[], p_attempt_ids uuid[], p_tenant_ids text[], p_triggers text[],
  p_started_ats timestamptz[], p_durations integer[], p_status_codes integer[], p_excerpts text[],
  p_endpoint_ids uuid[], p_hand_offs boolean[], p_threshold integer, p_lease_ms integer, p_lease_tokens bigint[])
RETURNS TABLE (
  applied integer[], id uuid, tenant_id uuid, status text, attempt_count integer, attempt_base integer,
  replayed_at timestamptz, next_trigger text, deadline_at timestamptz, succeeded_at timestamptz,
  event_id uuid, event_type text, event_created_at timestamptz, body text,
  ep_id uuid, url text, ep_status text, retry_policy jsonb, secret_enc text, previous_secret_enc text,
  previous_secret_expires_at timestamptz, deleted_at timestamptz, event_trace_parent text, trace_parent text,
  lease_token bigint
)
LANGUAGE plpgsql VOLATILE SET plan_cache_mode = force_generic_plan SET enable_seqscan = off
  SET enable_hashjoin = off SET enable_mergejoin = off AS $$
#variable_conflict use_column
DECLARE
  v_done integer[];
BEGIN
  IF cardinality(p_lease_tokens) IS DISTINCT FROM cardinality(p_delivery_ids) THEN
    RAISE EXCEPTION 'record_successes_v4: % claim tokens for % deliveries', cardinality(p_lease_tokens), cardinality(p_delivery_ids);
  END IF;
  PERFORM set_config('synchronous_commit', 'off', true);
  WITH input AS (
    SELECT i.*, attempt_stored_in_delivery(i.trigger, i.attempt_number, 'success') AS in_delivery
      FROM unnest(p_delivery_ids, p_attempt_numbers, p_attempt_ids, p_triggers, p_started_ats,
                  p_durations, p_status_codes, p_excerpts, p_lease_tokens)
           WITH ORDINALITY AS i(delivery_id, attempt_number, attempt_id, trigger, started_at, duration_ms,
                                status_code, response_excerpt, lease_token, n)
  ), done AS (
    UPDATE deliveries d SET
      status = 'succeeded', attempt_count = i.attempt_number, next_attempt_at = NULL, lease_until = NULL, next_trigger = 'retry',
      dead_reason = NULL, last_status_code = i.status_code, last_error = NULL,
      succeeded_at = COALESCE(d.succeeded_at, now()), updated_at = now(),
      first_try_started_at = CASE WHEN i.in_delivery THEN i.started_at ELSE d.first_try_started_at END,
      first_try_duration_ms = CASE WHEN i.in_delivery THEN i.duration_ms ELSE d.first_try_duration_ms END,
      first_try_status_code = CASE WHEN i.in_delivery THEN i.status_code ELSE d.first_try_status_code END,
      first_try_excerpt = CASE WHEN i.in_delivery THEN i.response_excerpt ELSE d.first_try_excerpt END
      FROM input i, delivery_queue q
     -- The arrays bound the reads to these ids whichever side the plan starts from: statistics
     -- that say few deliveries are in flight made it walk all of them for a match.
     WHERE d.id = ANY(p_delivery_ids) AND d.id = i.delivery_id
       AND q.delivery_id = ANY(p_delivery_ids) AND q.delivery_id = i.delivery_id
       AND claim_held_v2(d.status, d.attempt_count, d.lease_until, q.status, q.attempt_count, q.lease_until, i.attempt_number, i.lease_token)
    RETURNING i.n
  ), logged AS (
    INSERT INTO attempts (id, delivery_id, attempt_number, trigger, started_at, duration_ms, status_code,
                          outcome, response_excerpt)
    SELECT i.attempt_id, i.delivery_id, i.attempt_number, array_position(attempt_triggers(), i.trigger), i.started_at,
           i.duration_ms, i.status_code, array_position(attempt_outcomes(), 'success'), i.response_excerpt
      FROM input i JOIN done ON done.n = i.n
     WHERE NOT i.in_delivery
  )
  SELECT COALESCE(array_agg(done.n::integer ORDER BY done.n), '{}') INTO v_done FROM done;
  applied := v_done;
  RETURN NEXT;
  applied := NULL;
  IF cardinality(v_done) = 0 THEN
    RETURN;
  END IF;
  PERFORM endpoint_health_after_attempts(ARRAY(SELECT DISTINCT p_endpoint_ids[k] FROM unnest(v_done) k), false, p_threshold, 0);
  RETURN QUERY
    SELECT NULL::integer[], h.*
      FROM (SELECT array_agg(w.endpoint_id ORDER BY w.endpoint_id) AS ids, array_agg(w.slots ORDER BY w.endpoint_id) AS slots
              FROM (SELECT p_endpoint_ids[k] AS endpoint_id, count(*)::integer AS slots
                      FROM unnest(v_done) k WHERE p_hand_offs[k] GROUP BY 1) w) want
           CROSS JOIN LATERAL hand_off_v4(want.ids, want.slots, p_threshold, p_lease_ms) h
     WHERE want.ids IS NOT NULL;
END $$;
