import type pg from 'pg';

/**
 * Makes `session` report, as notices into `plans`, the plan of every statement it runs from now on,
 * the statements inside SQL functions included (auto_explain, loaded for this session only). A plan
 * made for one call's values shows them; one made for any values shows its parameters.
 */
export async function reportPlans(session: pg.ClientBase, plans: string[]): Promise<void> {
  session.on('notice', (n) => plans.push(n.message ?? ''));
  for (const sql of ["LOAD 'auto_explain'", 'SET auto_explain.log_min_duration = 0', 'SET auto_explain.log_nested_statements = on', 'SET auto_explain.log_level = notice']) {
    await session.query(sql);
  }
}
