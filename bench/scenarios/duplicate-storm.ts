import { setTimeout as sleep } from 'node:timers/promises';
import { createSource, createTenant } from '../lib/api.js';
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
    await sendList(api.url, [...warm, ...warm], cfg.connections);

    const onceList = signedCallbacks([sources.once], cfg.n, payloadBytes, 10_000_000);
    ctx.log(`duplicateStorm: ${cfg.n} distinct callbacks once each`);
    [once, cpuOnce] = await measureCpu(api.pid, () => sendList(api.url, onceList, cfg.connections));

    const distinct = signedCallbacks([sources.storm], cfg.n, payloadBytes, 20_000_000);
    const stormList: PreparedRequest[] = [];
    for (let copy = 0; copy < cfg.copies; copy++) stormList.push(...distinct);
    ctx.log(`duplicateStorm: ${cfg.n} distinct callbacks × ${cfg.copies} copies`);
    [storm, cpuStorm] = await measureCpu(api.pid, () => sendList(api.url, stormList, cfg.connections));
  } finally {
    await api.stop();
  }

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
