import type { Knex } from 'knex';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.js';

/**
 * The platform's statements are short, and their plans are cached generic plans whose cost follows
 * the statistics they were planned with. Once those counted a large backlog, PostgreSQL's JIT
 * compiled a hand-off's pick of a few rows on every call (docs/performance.md, "A backlog that
 * made every statement compile"). Every pool the platform opens runs with JIT off.
 */
describe('JIT is off on every connection the platform opens', () => {
  let t: TestPlatform;
  let plain: pg.Client;

  beforeAll(async () => {
    t = await startTestPlatform({ role: 'all' });
    plain = new pg.Client({ connectionString: t.config.databaseUrl });
    await plain.connect();
  });
  afterAll(async () => {
    await plain?.end();
    await t?.stop();
  });

  /** The plan of a queue read whose cost crosses jit_above_cost (lowered to 0 for this transaction). */
  const planned = "EXPLAIN (ANALYZE, FORMAT JSON) SELECT count(*) FROM delivery_queue WHERE status = 'pending'";
  type Explained = Array<{ 'QUERY PLAN': Array<Record<string, unknown>> }>;

  async function compiledThrough(db: Knex): Promise<boolean> {
    return db.transaction(async (trx) => {
      await trx.raw('SET LOCAL jit_above_cost = 0');
      const { rows } = await trx.raw<{ rows: Explained }>(planned);
      return 'JIT' in rows[0]!['QUERY PLAN'][0]!;
    });
  }

  it('the pool of requests and dispatch, and the maintenance pool, say so', async () => {
    for (const pool of [t.platform.db, t.platform.maintenanceDb]) {
      const { rows } = await pool.raw<{ rows: Array<{ jit: string }> }>('SHOW jit');
      expect(rows[0]!.jit).toBe('off');
    }
  });

  it('a statement whose plan crosses jit_above_cost is compiled on a plain connection, not through the platform', async () => {
    const { rows: available } = await plain.query<{ ok: boolean }>('SELECT pg_jit_available() AS ok');
    // Without a JIT provider on the server there is nothing to compile either way; the setting
    // itself is held by the case above.
    if (available[0]!.ok) {
      await plain.query('BEGIN');
      await plain.query('SET LOCAL jit_above_cost = 0');
      const { rows } = await plain.query<Explained[number]>(planned);
      await plain.query('ROLLBACK');
      expect('JIT' in rows[0]!['QUERY PLAN'][0]!).toBe(true);
    }
    expect(await compiledThrough(t.platform.db)).toBe(false);
  });
});
