/**
 * Intake's PostgreSQL share alone, without HTTP: new callbacks (a tenant with 2 endpoints, each
 * callback its own message) go through the platform's own IntakeWriter, with group commit as the
 * api process runs it, 64 callbacks waiting at a time. Prints callbacks/s and PostgreSQL CPU per
 * callback, so a change to the accept statement can be compared in seconds instead of a full
 * `npm run bench` intake run.
 * Usage: tsx bench/accept-statement.ts [callbacks=30000]   (BENCH_DATABASE_URL, default
 * whr_accept_statement, created for the run and dropped after it)
 */
import { randomBytes } from 'node:crypto';
import { newId, uuidOf } from '../src/domain/ids.js';
import { RawJson } from '../src/domain/raw-json.js';
import { createDb } from '../src/infra/db.js';
import { IntakeWriter } from '../src/store/intake-store.js';
import { CpuBudget } from './lib/cpu-budget.js';
import { dropDatabase, freshDatabase, insertEndpoints, insertTenant } from './lib/database.js';

const url = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/whr_accept_statement';
const callbacks = Number(process.argv[2] ?? 30_000);
const waiting = 64;

await freshDatabase(url);
const db = createDb({ url, poolMax: 4 });
const tenantId = await insertTenant(db, 'accept-statement');
await insertEndpoints(db, tenantId, 'as', 2, 10, randomBytes(32).toString('base64'));
const sourceId = newId('source');
await db.raw(`INSERT INTO sources (id, tenant_id, type, name, secret_enc) VALUES (?, ?, 'momo-automation', 'bench', 'unused')`, [sourceId, uuidOf('tenant', tenantId)]);
const writer = new IntakeWriter(db, 86_400);
const data = RawJson.of({ note: 'x'.repeat(400) });

let next = 0;
async function sender(until: number): Promise<void> {
  while (next < until) {
    const n = next++;
    const r = await writer.recordCallback({
      source: { id: sourceId, tenantId },
      origin: 'callback',
      bodyDigest: `digest-${n}`,
      event: { type: 'order.created', dedupeKey: `key-${n}`, messageId: `ord_${n}`, data },
      receivedAt: new Date(),
    });
    if (r.outcome !== 'accepted') throw new Error(`callback ${n}: ${r.outcome}`);
  }
}
const run = (until: number) => Promise.all(Array.from({ length: waiting }, () => sender(until)));

await run(2_000); // warm-up: connections, plans
const budget = new CpuBudget(db, {});
await budget.start();
const started = performance.now();
await run(2_000 + callbacks);
const seconds = (performance.now() - started) / 1000;
const pgCpu = (await budget.stop()).postgres!;
console.log(JSON.stringify({ callbacks, seconds: +seconds.toFixed(2), perSecond: Math.round(callbacks / seconds), postgresCpuMsPerCallback: +((pgCpu * 1000) / callbacks).toFixed(3) }));
await db.destroy();
await dropDatabase(url);
