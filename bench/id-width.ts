/**
 * Evidence for docs/performance.md ("What the ids cost"): the bytes per event of `deliveries` and
 * `events` with their ids stored as they are and with every id still stored as text (31 bytes)
 * converted to `uuid` (the 128 bits a TypeID encodes); ids already stored as `uuid`
 * (docs/architecture.md, "Ids in the database") are the same in both copies. Each table is copied twice into temporary tables, the same way: the live table's own
 * indexes (read from pg_indexes, so none is written here again) created first, then the rows
 * inserted in id order, as the writers append them. Both copies are fresh, with no dead row
 * versions, so their difference is the ids' alone; the live table's size beside them shows what
 * its dead row versions add.
 *
 * Run on the storage scenario's database:
 *   BENCH_KEEP_DB=1 BENCH_ONLY=storage BENCH_STORAGE_PASSES=1 npm run bench
 *   npx tsx bench/id-width.ts [database, default whr_bench]
 */
import pg from 'pg';
import { typeidToUuidSql } from './lib/typeid-sql.js';

const database = process.argv[2] ?? 'whr_bench';
const client = new pg.Client({ connectionString: process.env.BENCH_DATABASE_URL ?? `postgres://postgres@127.0.0.1:5432/${database}` });

async function copy(table: string, as: 'text' | 'uuid'): Promise<Record<string, number>> {
  const target = `id_width_${table}_${as}`;
  const { rows: columns } = await client.query<{ name: string; isId: boolean }>(
    `SELECT column_name AS name, data_type = 'text' AND (column_name = 'id' OR column_name LIKE '%\\_id') AS "isId"
       FROM information_schema.columns WHERE table_schema = 'public' AND table_name = $1 ORDER BY ordinal_position`,
    [table],
  );
  const select = columns.map((c) => (as === 'uuid' && c.isId ? `pg_temp.typeid_to_uuid(${c.name}) AS ${c.name}` : c.name)).join(', ');
  await client.query(`CREATE TEMP TABLE ${target} AS SELECT ${select} FROM ${table} LIMIT 0`);
  const fillfactor = (await client.query<{ ff: string | null }>(
    `SELECT (SELECT option_value FROM pg_options_to_table(reloptions) WHERE option_name = 'fillfactor') AS ff FROM pg_class WHERE relname = $1`,
    [table],
  )).rows[0]?.ff;
  if (fillfactor) await client.query(`ALTER TABLE ${target} SET (fillfactor = ${Number(fillfactor)})`);
  const { rows: indexes } = await client.query<{ def: string }>(`SELECT indexdef AS def FROM pg_indexes WHERE schemaname = 'public' AND tablename = $1`, [table]);
  for (const { def } of indexes) {
    await client.query(def.replace(/^CREATE (UNIQUE )?INDEX \S+ ON (ONLY )?public\.\S+/, (_m, unique: string | undefined) => `CREATE ${unique ?? ''}INDEX ON ${target}`));
  }
  await client.query(`INSERT INTO ${target} SELECT ${select} FROM ${table} ORDER BY id`);
  const { rows: sizes } = await client.query<{ name: string; bytes: string }>(
    `SELECT CASE WHEN c.oid = $1::regclass THEN 'heap' ELSE pg_get_indexdef(c.oid) END AS name, pg_relation_size(c.oid) AS bytes
       FROM pg_class c WHERE c.oid = $1::regclass OR c.oid IN (SELECT indexrelid FROM pg_index WHERE indrelid = $1::regclass)`,
    [target],
  );
  return Object.fromEntries(sizes.map((s) => [s.name.replace(/^.* USING btree /, '').replace(`pg_temp_`, ''), Number(s.bytes)]));
}

await client.connect();
try {
  await client.query(typeidToUuidSql);
  await client.query("SET maintenance_work_mem = '256MB'");
  const events = Number((await client.query<{ n: string }>('SELECT count(*) AS n FROM events')).rows[0]!.n);
  if (events === 0) throw new Error(`${database} holds no events: run the storage scenario with BENCH_KEEP_DB=1 first`);
  const perEvent = (bytes: number) => Math.round((bytes / events) * 10) / 10;
  const report: Record<string, unknown> = { eventsCounted: events };
  for (const table of ['deliveries', 'events']) {
    const text = await copy(table, 'text');
    const uuid = await copy(table, 'uuid');
    const total = (m: Record<string, number>) => Object.values(m).reduce((a, b) => a + b, 0);
    const live = Number((await client.query<{ bytes: string }>(
      `SELECT sum(pg_total_relation_size(c.oid)) AS bytes FROM pg_class c
        WHERE c.relkind = 'r' AND (c.oid = $1::regclass OR c.oid IN (SELECT inhrelid FROM pg_inherits WHERE inhparent = $1::regclass))`,
      [table],
    )).rows[0]!.bytes);
    report[table] = {
      livePerEvent: perEvent(live),
      text: Object.fromEntries(Object.entries(text).map(([k, v]) => [k, perEvent(v)])),
      uuid: Object.fromEntries(Object.entries(uuid).map(([k, v]) => [k, perEvent(v)])),
      textPerEvent: perEvent(total(text)),
      uuidPerEvent: perEvent(total(uuid)),
    };
  }
  console.log(JSON.stringify(report, null, 2));
} finally {
  await client.end();
}
