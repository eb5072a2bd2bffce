/**
 * Evidence for docs/architecture.md ("Ids in the database"): what converting a TypeID to the
 * `uuid` it encodes, and back, costs where the third way would convert. In PostgreSQL, the triggers
 * that keep a `uuid` copy of a table for one release convert every id of every row they write; in
 * the stores, every id of every row read or bound. Measures both against the same 100,000 ids made
 * by typeid-js, after checking every conversion against typeid-js itself:
 *
 * - SQL: PL/pgSQL functions, as µs of a backend's time per call beyond reading the id alone. The
 *   same conversions as SQL functions took 18-20 µs (decode) and 36 µs (encode): a function whose
 *   body needs a subquery is not inlined, and one without repeats its shared parts per use;
 * - TypeScript: typeid-js (parse and format) against the stores' own codec (src/domain/ids.ts).
 *
 * Experiment code for the SQL side: nothing in src/ converts ids in PostgreSQL. Needs PostgreSQL as the tests do.
 *   npx tsx bench/id-codec.ts
 */
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { TypeID, typeid } from 'typeid-js';
import { idOfUuid, uuidOf } from '../src/domain/ids.js';
import { typeidToUuidSql, uuidToTypeidSql } from './lib/typeid-sql.js';

const n = Number(process.env.ID_CODEC_N ?? 100_000);

/** The stores' codec (src/domain/ids.ts), on delivery ids as the ids below are. */
const toUuid = (id: string) => uuidOf('delivery', id);
const fromUuid = (uuid: string) => idOfUuid('delivery', uuid);

function perCallUs(fn: () => void, count: number): number {
  const start = process.hrtime.bigint();
  fn();
  return Number(process.hrtime.bigint() - start) / 1000 / count;
}

const ids = Array.from({ length: n }, () => typeid('dlv').toString());
const uuids = ids.map((id) => TypeID.fromString(id).toUUID());
// Ids made now all start with the same time bits; random uuids (v4) set the top bits too, the
// first character's 3 and the sign bits of both 64-bit halves.
const anyUuids = Array.from({ length: 10_000 }, () => randomUUID());
const anyIds = anyUuids.map((u) => TypeID.fromUUID('dlv', u).toString());

for (let i = 0; i < anyIds.length; i++) {
  if (toUuid(anyIds[i]!) !== anyUuids[i] || fromUuid(anyUuids[i]!) !== anyIds[i]) throw new Error(`codec differs from typeid-js on ${anyIds[i]}`);
}
for (let i = 0; i < n; i++) {
  if (toUuid(ids[i]!) !== uuids[i]) throw new Error(`toUuid(${ids[i]}) = ${toUuid(ids[i]!)}, typeid-js says ${uuids[i]}`);
  if (fromUuid(uuids[i]!) !== ids[i]) throw new Error(`fromUuid(${uuids[i]}) = ${fromUuid(uuids[i]!)}, expected ${ids[i]}`);
}

const client = new pg.Client({ connectionString: process.env.TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres' });
await client.connect();
try {
  await client.query(typeidToUuidSql);
  await client.query(uuidToTypeidSql);
  const checked = await client.query<{ wrong: string }>(
    `SELECT count(*) FILTER (WHERE pg_temp.typeid_to_uuid(i) <> u::uuid OR pg_temp.uuid_to_typeid('dlv', u::uuid) <> i) AS wrong
       FROM unnest($1::text[], $2::text[]) AS t(i, u)`,
    [[...ids, ...anyIds], [...uuids, ...anyUuids]],
  );
  if (Number(checked.rows[0]!.wrong) !== 0) throw new Error(`SQL codec: ${checked.rows[0]!.wrong} of ${n + anyIds.length} conversions differ from typeid-js`);
  await client.query('CREATE TEMP TABLE codec_ids AS SELECT i AS id, u::uuid AS uuid FROM unnest($1::text[], $2::text[]) AS t(i, u)', [ids, uuids]);
  const timed = async (sql: string) => {
    const best: number[] = [];
    for (let round = 0; round < 3; round++) {
      const start = process.hrtime.bigint();
      await client.query(sql);
      best.push(Number(process.hrtime.bigint() - start) / 1000 / n);
    }
    return Math.min(...best);
  };
  const readText = await timed('SELECT count(length(id)) FROM codec_ids');
  const decode = await timed('SELECT count(pg_temp.typeid_to_uuid(id)) FROM codec_ids');
  const readUuid = await timed('SELECT count(uuid) FROM codec_ids');
  const encode = await timed("SELECT count(length(pg_temp.uuid_to_typeid('dlv', uuid))) FROM codec_ids");
  const ts = { parse: [] as number[], format: [] as number[], libParse: [] as number[], libFormat: [] as number[] };
  for (let round = 0; round < 3; round++) {
    ts.parse.push(perCallUs(() => ids.forEach(toUuid), n));
    ts.format.push(perCallUs(() => uuids.forEach((u) => fromUuid(u)), n));
    ts.libParse.push(perCallUs(() => ids.forEach((id) => TypeID.fromString(id).toUUID()), n));
    ts.libFormat.push(perCallUs(() => uuids.forEach((u) => TypeID.fromUUID('dlv', u).toString()), n));
  }
  const r = (x: number) => Math.round(x * 100) / 100;
  console.log(JSON.stringify({
    ids: n,
    checkedAgainstTypeidJs: true,
    sqlUsPerCall: { typeidToUuid: r(decode - readText), uuidToTypeid: r(encode - readUuid) },
    tsUsPerCall: {
      handParse: r(Math.min(...ts.parse)),
      handFormat: r(Math.min(...ts.format)),
      typeidJsParse: r(Math.min(...ts.libParse)),
      typeidJsFormat: r(Math.min(...ts.libFormat)),
    },
  }, null, 2));
} finally {
  await client.end();
}
