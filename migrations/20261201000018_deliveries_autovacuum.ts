import type { Knex } from 'knex';

/**
 * Every delivery leaves two or three row versions behind (pending → in flight → succeeded), and each
 * version has entries in every index of the table. PostgreSQL's default autovacuum threshold (20 % of
 * the table dead) lets millions of them pile up on a large table before they are reclaimed; at 2 %
 * vacuum runs often and briefly, and the space of dead versions is reused while it is still warm.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE deliveries SET (autovacuum_vacuum_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.05)');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE deliveries RESET (autovacuum_vacuum_scale_factor, autovacuum_analyze_scale_factor)');
}
