import type { Knex } from 'knex';

/**
 * An endpoint may be `paused`: it starts no attempt and keeps its waiting work, unlike `disabled`.
 * `paused_at` lets a resume move the failure streak's start forward by the time spent paused, so a
 * pause never counts toward the auto-disable window. The lists are written out here, not imported,
 * so this migration means the same thing forever.
 */
const check = (statuses: string[]) => `
  ALTER TABLE endpoints DROP CONSTRAINT endpoints_status_check;
  ALTER TABLE endpoints ADD CONSTRAINT endpoints_status_check
    CHECK (status IN (${statuses.map((s) => `'${s}'`).join(', ')}));`;

export async function up(knex: Knex): Promise<void> {
  await knex.raw(check(['active', 'paused', 'disabled']));
  await knex.raw(`ALTER TABLE endpoints ADD COLUMN paused_at timestamptz`);
}

/** Before this migration there was no pause: a paused endpoint becomes active, its work still waiting. */
export async function down(knex: Knex): Promise<void> {
  await knex.raw(`UPDATE endpoints SET status = 'active' WHERE status = 'paused'`);
  await knex.raw(`ALTER TABLE endpoints DROP COLUMN paused_at`);
  await knex.raw(check(['active', 'disabled']));
}
