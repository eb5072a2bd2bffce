import type { Knex } from 'knex';

/**
 * Admission's candidate scan names the whole key of `deliveries_due` in its ORDER BY, so that no
 * statistics can make PostgreSQL walk another index instead.
 *
 * The skip scan asked for `ORDER BY endpoint_id LIMIT 1` among pending rows. `deliveries_endpoint`
 * (endpoint_id, id) gives that order too, and with statistics from when the table was mostly pending
 * (a backlog that has since drained) the planner preferred it and filtered out every finished
 * delivery on the way: 51,200 rows and 88 ms for one probe, in a round that admitted nothing. Ordered
 * by (endpoint_id, next_attempt_at, id), only the partial index gives the order without a sort.
 * The same holds for the earliest due time of each candidate.
 *
 * Only those two ORDER BYs change, so the function is rewritten from its own stored definition.
 */
const rewrites: Array<[string, string]> = [
  ['ORDER BY d.endpoint_id LIMIT 1', 'ORDER BY d.endpoint_id, d.next_attempt_at, d.id LIMIT 1'],
  ['ORDER BY p.next_attempt_at LIMIT 1', 'ORDER BY p.next_attempt_at, p.id LIMIT 1'],
];

async function rewriteAdmitDue(knex: Knex, pairs: Array<[string, string]>): Promise<void> {
  const { rows } = await knex.raw<{ rows: Array<{ def: string }> }>(
    "SELECT pg_get_functiondef('admit_due(integer, integer, integer, integer, integer, boolean)'::regprocedure) AS def",
  );
  let def = rows[0]!.def;
  for (const [from, to] of pairs) {
    if (!def.includes(from)) throw new Error(`admit_due: expected "${from}" in its definition`);
    def = def.split(from).join(to);
  }
  await knex.raw(def.replaceAll('?', '\\?'));
}

export async function up(knex: Knex): Promise<void> {
  await rewriteAdmitDue(knex, rewrites);
}

export async function down(knex: Knex): Promise<void> {
  await rewriteAdmitDue(knex, rewrites.map(([from, to]) => [to, from]));
}
