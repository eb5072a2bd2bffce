-- claim_in_queue: whether a delivery's claim is the one kept in its delivery_queue row.
--
-- A claim is kept in one of two places. A slot of this release's processes claims a delivery in its
-- queue row only (admit_due_v4, hand_off_v4: status `in_flight`, lease, the attempt's number in
-- attempt_count, claimed_at), and `deliveries` stays `pending` with the count of the attempts before.
-- A Redis job's claim is written to `deliveries` (`in_flight`, the count including the attempt).
-- This says which: the queue row holds a claim and the delivery's row is still as that claim found
-- it. Readers take the claim from the queue row
-- when it answers true, from `deliveries` otherwise (claim_held_v2, delivery_state, the lost-worker
-- sweep in src/delivery/sql/sweep.ts).
--
-- Every statement that ends a claim writes the delivery's row, and the triggers put its queue row
-- back to pending. A result and a lost worker count the attempt, so a statement that found the
-- claim in an older snapshot of the queue is stopped by the row it updates: PostgreSQL judges the
-- updated row again, and its attempt count no longer fits. An attempt given back (the egress
-- proxy failed) leaves the count as the claim found it: only the queue row, locked and judged
-- again, shows the claim gone (the lost-worker sweep locks both). The record guards need not: the
-- only claim a give-back ends is the giver's own, which records nothing after it.
--
-- Inputs:  the delivery's status and attempt_count; its queue row's status and attempt_count.
-- Inlined by the planner: a plain SQL expression of its arguments.
CREATE OR REPLACE FUNCTION claim_in_queue(p_status text, p_attempt_count integer, p_queue_status text, p_queue_attempt integer)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT COALESCE(p_status = 'pending' AND p_queue_status = 'in_flight' AND p_attempt_count = p_queue_attempt - 1, false)
$$;
