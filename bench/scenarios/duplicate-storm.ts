import { setTimeout as sleep } from 'node:timers/promises';
import { createSource, createTenant } from '../lib/api.js';
import { freePort, spawnTs, waitForHttp } from '../lib/children.js';
import { resetState, startMeasured, type BenchContext } from '../lib/context.js';
import { countRows } from '../lib/database.js';
import { sendList } from '../lib/load.js';
import { signedCallbacks, type PreparedRequest, type SignedSource } from '../lib/payload.js';
import { cpuSeconds } from '../lib/proc.js';
import { round } from '../lib/stats.js';

export interface DuplicateStormResult {
  cpuRatio: number;
  details: Record<string, unknown>;
}

/**
 * Duplicate storm: CPU seconds of the api process (from /proc/<pid>/stat) to take N distinct
 * callbacks once each, against N other distinct callbacks sent `copies` times each (byte-identical
 * copies, as a provider retry sends them). Copies of one callback are N requests apart, so they
 * never race each other. Both phases run on a warmed-up process, through separate sources so the
 * database can confirm each phase: N events and N (or copies × N) receipts.
 */
export async function runDuplicateStorm(ctx: BenchContext): Promise<DuplicateStormResult> {
  const { duplicateStorm: cfg, payloadBytes } = ctx.config;
  await resetState(ctx);
  const api = await startMeasured(ctx, 'api', 'duplicate-storm-api');
  let once;
  let storm;
  let cpuOnce: number;
  let cpuStorm: number;
  let sources: Record<'warm' | 'once' | 'storm', SignedSource>;
  let stormList: PreparedRequest[] = [];
  let warmList: PreparedRequest[] = [];
  try {
    const tenant = await createTenant(api, ctx.settings.adminToken, {
      name: 'dup',
      endpointUrls: [ctx.receiver.okUrl(0, 'dup/a'), ctx.receiver.okUrl(1, 'dup/b')],
    });
    sources = {
      warm: await createSource(api, tenant.apiKey, 'dup-warm'),
      once: await createSource(api, tenant.apiKey, 'dup-once'),
      storm: await createSource(api, tenant.apiKey, 'dup-storm'),
    };
    // Warm-up, with duplicates too, so both code paths are compiled before anything is measured.
    const warm = signedCallbacks([sources.warm], cfg.warmup, payloadBytes);
    warmList = [...warm, ...warm];
    await sendList(api.url, warmList, cfg.connections);

    const onceList = signedCallbacks([sources.once], cfg.n, payloadBytes, 10_000_000);
    ctx.log(`duplicateStorm: ${cfg.n} distinct callbacks once each`);
    [once, cpuOnce] = await measureCpu(api.pid, () => sendList(api.url, onceList, cfg.connections));

    const distinct = signedCallbacks([sources.storm], cfg.n, payloadBytes, 20_000_000);
    for (let copy = 0; copy < cfg.copies; copy++) stormList.push(...distinct);
    ctx.log(`duplicateStorm: ${cfg.n} distinct callbacks × ${cfg.copies} copies`);
    [storm, cpuStorm] = await measureCpu(api.pid, () => sendList(api.url, stormList, cfg.connections));
  } finally {
    await api.stop();
  }
  const floorMs = await receiptFloorMs(ctx, warmList, stormList);

  // Every copy must still be a recorded receipt, and the copies must not have become events.
  const count = async (table: 'events' | 'receipts', source: SignedSource) =>
    countRows(ctx.db, `SELECT count(*) AS n FROM ${table} WHERE source_id = ?`, [source.id]);
  const verified = {
    onceEvents: await count('events', sources.once),
    onceReceipts: await count('receipts', sources.once),
    stormEvents: await count('events', sources.storm),
    stormReceipts: await count('receipts', sources.storm),
  };
  const expected = { onceEvents: cfg.n, onceReceipts: cfg.n, stormEvents: cfg.n, stormReceipts: cfg.n * cfg.copies };
  if (JSON.stringify(verified) !== JSON.stringify(expected)) {
    throw new Error(`duplicateStorm: database holds ${JSON.stringify(verified)}, expected ${JSON.stringify(expected)}`);
  }
  if (once.statusCodes['200'] !== cfg.n || storm.statusCodes['200'] !== cfg.n * cfg.copies) {
    throw new Error(`duplicateStorm: unexpected answers ${JSON.stringify({ once: once.statusCodes, storm: storm.statusCodes })}`);
  }
  return {
    cpuRatio: round(cpuStorm / cpuOnce, 3),
    details: {
      n: cfg.n,
      copies: cfg.copies,
      cpuSecondsOnce: round(cpuOnce, 2),
      cpuSecondsStorm: round(cpuStorm, 2),
      cpuMsPerNewCallback: round((cpuOnce / cfg.n) * 1000, 3),
      cpuMsPerDuplicate: round(((cpuStorm - cpuOnce) / (cfg.n * (cfg.copies - 1))) * 1000, 3),
      cpuMsPerRequestAtFloor: round(floorMs, 3),
      // The ratio if a duplicate cost no more than the floor's bare express + one INSERT: the best
      // this design (express, one durable receipt per request) could reach on this machine.
      cpuRatioIfDuplicatesCostTheFloor: round(1 + ((cfg.copies - 1) * floorMs) / ((cpuOnce / cfg.n) * 1000), 3),
      onceSeconds: round(once.seconds, 2),
      stormSeconds: round(storm.seconds, 2),
      outcomes: { once: once.outcomes, storm: storm.outcomes },
      verified,
    },
  };
}

/** CPU seconds the process used for `work`, including what it finishes right after the last answer. */
async function measureCpu<T>(pid: number, work: () => Promise<T>): Promise<[T, number]> {
  await sleep(300);
  const before = cpuSeconds(pid);
  const result = await work();
  await sleep(300);
  return [result, cpuSeconds(pid) - before];
}

/**
 * CPU per request of the intake floor (bench/lib/floor-intake-process.ts: express, the raw body,
 * one single-row INSERT, 200) for the same storm of requests over the same connections: what
 * answering a request and writing one durable row costs on this machine with no signature check,
 * no dedupe and no batching.
 */
async function receiptFloorMs(ctx: BenchContext, warm: PreparedRequest[], storm: PreparedRequest[]): Promise<number> {
  const port = await freePort();
  const child = spawnTs('duplicate floor', 'bench/lib/floor-intake-process.ts', [String(port), ctx.settings.databaseUrl]);
  try {
    const url = `http://127.0.0.1:${port}`;
    await waitForHttp(child, `${url}/healthz`);
    const toFloor = (r: PreparedRequest): PreparedRequest => ({ ...r, path: '/floor' });
    await sendList(url, warm.map(toFloor), ctx.config.duplicateStorm.connections);
    ctx.log(`duplicateStorm: the same ${storm.length} requests to the intake floor`);
    const [, cpu] = await measureCpu(child.pid, () => sendList(url, storm.map(toFloor), ctx.config.duplicateStorm.connections));
    return (cpu / storm.length) * 1000;
  } finally {
    await child.stop();
  }
}
