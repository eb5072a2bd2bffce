import type { Knex } from 'knex';

/** Resolves once PostgreSQL has answered a trivial query through the pool: what readiness asks. */
export async function pingDatabase(platformDb: Knex): Promise<void> {
  await platformDb.raw('SELECT 1');
}
