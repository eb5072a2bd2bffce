import type { Knex } from 'knex';

/**
 * Creating a partition locks its parent (ACCESS EXCLUSIVE) and then, for the foreign keys, the
 * tables on their other side (SHARE ROW EXCLUSIVE): attempts, then deliveries. The platform locks
 * them the other way round: recording a result updates the delivery and then logs the attempt.
 * So a new attempts partition created while a result was being recorded could deadlock with it
 * (seen in CI: the retention test's partition creation against its own worker), and PostgreSQL
 * then aborted one of the two.
 *
 * `ensure_time_partitions` now takes, before each CREATE, the locks that CREATE is about to take, in
 * the order the writers take them (events, receipts, deliveries, attempts: intake writes an event, its
 * receipt and its deliveries; a result updates its delivery and logs its attempt; operator actions
 * audit last), and walks the tables in that order. A writer then waits for the partition, or the
 * partition for the writer, never both for each other. It only happens when a partition is
 * missing: once a day, ahead of need.
 *
 * The function is rewritten from its stored definition, and back.
 */
const lockBefore = `
    -- The locks CREATE TABLE ... PARTITION OF p_parent takes, in the order the platform's writers take
    -- them, so that creating a partition never holds one while waiting for a writer holding the other.
    CREATE FUNCTION lock_for_new_partition(p_parent text) RETURNS void LANGUAGE plpgsql AS $$
    BEGIN
      CASE p_parent
        WHEN 'events' THEN
          LOCK TABLE events IN ACCESS EXCLUSIVE MODE;
          LOCK TABLE receipts, deliveries IN SHARE ROW EXCLUSIVE MODE;
        WHEN 'receipts' THEN
          LOCK TABLE events IN SHARE ROW EXCLUSIVE MODE;
          LOCK TABLE receipts IN ACCESS EXCLUSIVE MODE;
        WHEN 'attempts' THEN
          LOCK TABLE deliveries IN SHARE ROW EXCLUSIVE MODE;
          LOCK TABLE attempts IN ACCESS EXCLUSIVE MODE;
        ELSE
          EXECUTE format('LOCK TABLE %I IN ACCESS EXCLUSIVE MODE', p_parent);
      END CASE;
    END
    $$;`;

const rewrites: Array<[string, string]> = [
  [
    'FOR v_plan IN SELECT * FROM partition_plan LOOP',
    "FOR v_plan IN SELECT * FROM partition_plan ORDER BY array_position(ARRAY['events', 'receipts', 'attempts', 'audit_log'], table_name), table_name LOOP",
  ],
  [
    "EXECUTE format('CREATE TABLE %I PARTITION OF %I",
    "PERFORM lock_for_new_partition(v_plan.table_name);\n            EXECUTE format('CREATE TABLE %I PARTITION OF %I",
  ],
];

async function rewriteEnsure(knex: Knex, pairs: Array<[string, string]>): Promise<void> {
  const { rows } = await knex.raw<{ rows: Array<{ def: string }> }>(
    "SELECT pg_get_functiondef('ensure_time_partitions(timestamptz, timestamptz)'::regprocedure) AS def",
  );
  let def = rows[0]!.def;
  for (const [from, to] of pairs) {
    if (!def.includes(from)) throw new Error(`ensure_time_partitions: expected "${from}" in its definition`);
    def = def.split(from).join(to);
  }
  await knex.raw(def.replaceAll('?', '\\?'));
}

export async function up(knex: Knex): Promise<void> {
  await knex.raw(lockBefore);
  await rewriteEnsure(knex, rewrites);
}

export async function down(knex: Knex): Promise<void> {
  await rewriteEnsure(
    knex,
    rewrites.map(([from, to]) => [to, from]),
  );
  await knex.raw('DROP FUNCTION lock_for_new_partition(text)');
}
