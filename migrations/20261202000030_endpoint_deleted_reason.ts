import type { Knex } from 'knex';

/**
 * A deleted endpoint's deliveries are dead-lettered as `endpoint_deleted`, apart from a disabled
 * endpoint's (`endpoint_disabled`), so an operator can tell "turned off, may come back" from "gone".
 * The lists are written out here, not imported, so this migration means the same thing forever.
 */
const check = (reasons: string[]) => `
  ALTER TABLE deliveries DROP CONSTRAINT deliveries_dead_reason_check;
  ALTER TABLE deliveries ADD CONSTRAINT deliveries_dead_reason_check
    CHECK (dead_reason IN (${reasons.map((r) => `'${r}'`).join(', ')}));`;

export async function up(knex: Knex): Promise<void> {
  await knex.raw(check(['max_attempts', 'max_age', 'terminal', 'endpoint_disabled', 'endpoint_deleted']));
}

/** Before this migration a deleted endpoint's deliveries were called `endpoint_disabled`. */
export async function down(knex: Knex): Promise<void> {
  await knex.raw(`UPDATE deliveries SET dead_reason = 'endpoint_disabled' WHERE dead_reason = 'endpoint_deleted'`);
  await knex.raw(check(['max_attempts', 'max_age', 'terminal', 'endpoint_disabled']));
}
