/**
 * The dispatch path's PostgreSQL share alone, without HTTP: 100 slots over 10 endpoints drain a
 * backlog through the platform's own admission and batched success records (with hand-off), as the
 * worker does after each answer. Prints deliveries/s and PostgreSQL CPU per delivery, so a schema
 * or statement change can be compared in seconds instead of a full `npm run bench` dispatch run.
 * Alongside, an admission round that can admit nothing runs every 250 ms (as the worker's timer
 * does), and its durations are printed: they grow with what a round has to walk past.
 * Usage: tsx bench/record-path.ts [backlog=100000]   (BENCH_DATABASE_URL, default whr_record_path,
 * created for the run and dropped after it)
 */
import { randomBytes } from 'node:crypto';
import { createDb } from '../src/infra/db.js';
import { Batcher } from '../src/infra/batcher.js';
import { admitDue } from '../src/delivery/sql/admit.js';
import { vacuumMirror } from '../src/delivery/sql/mirror-vacuum.js';
import { recordSuccesses, type Recorded, type SuccessItem } from '../src/delivery/sql/attempts.js';
import type { ClaimedDelivery } from '../src/delivery/sql/claimed.js';
import { CpuBudget } from './lib/cpu-budget.js';
import { dropDatabase, freshDatabase, insertBacklog, insertEndpoints, insertTenant } from './lib/database.js';

const url = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/whr_record_path';
const backlog = Number(process.argv[2] ?? 100_000);
const endpoints = 10;
const concurrency = 10;
const leaseMs = 60_000;

await freshDatabase(url);
const db = createDb({ url, poolMax: 4 });
const tenant = await insertTenant(db, 'record-path');
const eps = await insertEndpoints(db, tenant, 'rp', endpoints, concurrency, randomBytes(32).toString('base64'));
const total = await insertBacklog(db, tenant, eps.map((endpointId) => ({ endpointId, count: Math.ceil(backlog / endpoints) })), 400);
await db.raw('CHECKPOINT');

const batcher = new Batcher<SuccessItem, Recorded>({ maxBatch: 64, maxInFlight: 2, run: (items) => recordSuccesses(db, items, { circuitFailureThreshold: 5, circuitCooldownSeconds: 30 }, leaseMs) });
let done = 0;
async function slot(first: ClaimedDelivery): Promise<void> {
  let d: ClaimedDelivery | undefined = first;
  while (d) {
    const r = await batcher.submit({
      handOff: true,
      record: {
        deliveryId: d.id, endpointId: d.endpoint.id, attemptNumber: d.attempt_count, leaseToken: d.lease_token, trigger: d.next_trigger,
        startedAt: new Date(), durationMs: 1, statusCode: 200, outcome: 'success', errorClass: null, errorMessage: null,
        responseExcerpt: 'ok', next: { status: 'succeeded' }, endpointFailure: false,
      },
    });
    done++;
    d = r.next;
  }
}

const roundMs: number[] = [];
const prober = setInterval(() => {
  const t = performance.now();
  void admitDue(db, { queuedLeaseSeconds: 60, circuitFailureThreshold: 5, perEndpointBatch: 100 }, { count: 0, inFlightLeaseMs: leaseMs, mode: 'all' }).then(() => roundMs.push(Math.round(performance.now() - t)));
}, 250);
// As the worker's sweep does every second (SWEEP_INTERVAL_MS); 0 turns it off.
const vacuumEveryMs = Number(process.env.VACUUM_EVERY_MS ?? 1000);
let vacuuming = false;
const vacuumer = vacuumEveryMs > 0 ? setInterval(() => {
  if (vacuuming) return;
  vacuuming = true;
  void vacuumMirror(db, 0).finally(() => { vacuuming = false; });
}, vacuumEveryMs) : undefined;
const budget = new CpuBudget(db, {});
await budget.start();
const started = performance.now();
const slots: Promise<void>[] = [];
while (done < total) {
  const round = await admitDue(db, { queuedLeaseSeconds: 60, circuitFailureThreshold: 5, perEndpointBatch: 100 }, { count: 100, inFlightLeaseMs: leaseMs, mode: 'all' });
  for (const c of round.claimed) slots.push(slot(c));
  if (round.claimed.length === 0) await new Promise((r) => setTimeout(r, 20));
  if (slots.length >= endpoints * concurrency) await Promise.race([Promise.all(slots), new Promise((r) => setTimeout(r, 50))]);
}
await Promise.all(slots);
clearInterval(prober);
clearInterval(vacuumer);
console.log('idle admission rounds (ms):', roundMs.join(' '));
const seconds = (performance.now() - started) / 1000;
const pgCpu = (await budget.stop()).postgres!;
const { rows } = await db.raw("SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'deliveries'");
console.log(JSON.stringify({ delivered: done, seconds: +seconds.toFixed(2), perSecond: Math.round(done / seconds), postgresCpuMsPerDelivery: +((pgCpu * 1000) / done).toFixed(3), stats: rows[0] }));
await db.destroy();
await dropDatabase(url);
