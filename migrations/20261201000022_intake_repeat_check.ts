import type { Knex } from 'knex';
import { intakeAcceptClaimingKeys } from './20261201000016_claim_event_keys.js';

/**
 * intake_accept answers a byte-identical repeat itself (the receipts_source_digest look-up that
 * used to be a statement of its own, sent before every new callback), so accepting a new callback
 * is one round trip. A repeat the process recognises from its own recent digests still takes the
 * cheaper receipt-only statement, without parsing the body (src/inbound/intake-service.ts).
 *
 * Only the function's opening changes: the check comes first, and the fan-out targets are read
 * after it (a repeat needs none). Everything from the delivery-id check on is as migration
 * 20261201000016 left it, so the new function is that one with its opening replaced.
 */
const previousOpening = `
    DECLARE
      -- Read before anything is written, so that too few ids can be answered without writing.
      v_targets fan_out_target[] := fan_out_targets(p_tenant_id, p_type);
      v_inserted text;
      v_advanced integer := 0;
    BEGIN
      endpoint_count := cardinality(v_targets);
      pending := 0;
      dead_disabled := 0;
`;

const opening = `
    DECLARE
      v_targets fan_out_target[];
      v_inserted text;
      v_advanced integer := 0;
    BEGIN
      pending := 0;
      dead_disabled := 0;
      endpoint_count := 0;

      -- A byte-identical repeat of a body this source already sent: the same event, no work, one
      -- receipt. Checked here rather than in a statement of its own, so a new callback costs one
      -- round trip. Two identical bodies racing each other both miss this and meet on the key below.
      SELECT r.event_id INTO event_id FROM receipts r
       WHERE r.source_id = p_source_id AND r.body_digest = p_body_digest LIMIT 1;
      IF event_id IS NOT NULL THEN
        outcome := 'duplicate';
        INSERT INTO receipts (id, tenant_id, source_id, event_id, outcome, origin, body_digest, received_at)
        VALUES (p_receipt_id, p_tenant_id, p_source_id, event_id, outcome, p_origin, p_body_digest, p_received_at);
        RETURN;
      END IF;

      -- Read before anything is written, so that too few ids can be answered without writing.
      v_targets := fan_out_targets(p_tenant_id, p_type);
      endpoint_count := cardinality(v_targets);
`;

function withRepeatCheck(fn: string): string {
  // A changed migration 16 must fail here, loudly, rather than install a function missing the check.
  if (!fn.includes(previousOpening)) throw new Error('intake_accept of migration 20261201000016 is not as expected');
  return fn.replace(previousOpening, opening);
}

export async function up(knex: Knex): Promise<void> {
  await knex.raw(withRepeatCheck(intakeAcceptClaimingKeys));
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(intakeAcceptClaimingKeys);
}
