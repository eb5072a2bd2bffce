import { readFileSync } from 'node:fs';
import { Worker } from 'node:worker_threads';
import pg from 'pg';

/**
 * What the machine and PostgreSQL were doing when intake answers were slow (BENCH_STALL_SAMPLE=1).
 *
 * Every `intervalMs` (10 ms) one small query records, in one snapshot: the backends of the bench
 * database that are running a statement, by wait event (`CPU` when they wait on nothing); what the
 * checkpointer and WAL writer wait on (a checkpoint in progress shows as CheckpointWriteDelay or
 * DataFileSync); cumulative WAL syncs and their time (pg_stat_wal, with track_wal_io_timing on for
 * the bench database); and /proc/pressure/io (time some or all tasks were stalled on I/O). A worker
 * thread meanwhile writes 8 KiB to a file on the same disk and fdatasyncs it every 10 ms: the
 * disk's own fsync latency, independent of PostgreSQL.
 */

export interface Snapshot {
  at: number;
  /** Running backends of the bench database, by wait event. */
  waits: Record<string, number>;
  /** Background processes' wait events, e.g. `checkpointer:CheckpointWriteDelay`. */
  background: string[];
  walSyncs: number;
  walSyncMs: number;
  walWriteMs: number;
  ioSomeUs: number;
  ioFullUs: number;
}

export interface Probe {
  at: number;
  fsyncMs: number;
}

export interface StallTimeline {
  snapshots: Snapshot[];
  probes: Probe[];
}

function ioPressure(): { some: number; full: number } {
  try {
    const text = readFileSync('/proc/pressure/io', 'utf8');
    const total = (kind: string) => Number(new RegExp(`^${kind} .*total=(\\d+)`, 'm').exec(text)?.[1] ?? 0);
    return { some: total('some'), full: total('full') };
  } catch {
    return { some: 0, full: 0 };
  }
}

const probeSource = `
const { parentPort, workerData } = require('node:worker_threads');
const fs = require('node:fs');
const fd = fs.openSync(workerData.file, 'w');
const block = Buffer.alloc(8192, 1);
const results = [];
const pause = new Int32Array(new SharedArrayBuffer(4));
let offset = 0;
while (Atomics.load(workerData.stop, 0) === 0) {
  const at = Date.now();
  const t0 = process.hrtime.bigint();
  fs.writeSync(fd, block, 0, block.length, offset);
  fs.fdatasyncSync(fd);
  results.push({ at, fsyncMs: Number(process.hrtime.bigint() - t0) / 1e6 });
  offset = (offset + block.length) % (64 * 1024 * 1024);
  Atomics.wait(pause, 0, 0, workerData.intervalMs);
}
fs.closeSync(fd);
fs.rmSync(workerData.file, { force: true });
parentPort.postMessage(results);
`;

export class StallSampler {
  private readonly client: pg.Client;
  private readonly snapshots: Snapshot[] = [];
  private timer: NodeJS.Timeout | undefined;
  private busy = false;
  private worker: Worker | undefined;
  private readonly stopFlag = new Int32Array(new SharedArrayBuffer(4));

  constructor(
    databaseUrl: string,
    private readonly probeFile: string,
    private readonly intervalMs = 10,
  ) {
    this.client = new pg.Client({ connectionString: databaseUrl });
  }

  async start(): Promise<void> {
    await this.client.connect();
    this.worker = new Worker(probeSource, { eval: true, workerData: { file: this.probeFile, intervalMs: this.intervalMs, stop: this.stopFlag } });
    this.timer = setInterval(() => void this.sample(), this.intervalMs);
  }

  private async sample(): Promise<void> {
    if (this.busy) return;
    this.busy = true;
    try {
      const at = Date.now();
      const { rows } = await this.client.query<{ kind: string; label: string; n: number; syncs: string; sync_ms: number; write_ms: number }>(
        `SELECT 'wait' AS kind, coalesce(wait_event, 'CPU') AS label, count(*)::int AS n, NULL AS syncs, NULL::float8 AS sync_ms, NULL::float8 AS write_ms
           FROM pg_stat_activity
          WHERE datname = current_database() AND pid <> pg_backend_pid() AND state = 'active'
          GROUP BY 2
         UNION ALL
         SELECT 'background', backend_type || ':' || coalesce(wait_event, 'CPU'), 1, NULL, NULL, NULL
           FROM pg_stat_activity WHERE backend_type IN ('checkpointer', 'walwriter', 'background writer')
         UNION ALL
         SELECT 'wal', '', 0, wal_sync::text, wal_sync_time, wal_write_time FROM pg_stat_wal`,
      );
      const io = ioPressure();
      const wal = rows.find((r) => r.kind === 'wal')!;
      this.snapshots.push({
        at,
        waits: Object.fromEntries(rows.filter((r) => r.kind === 'wait').map((r) => [r.label, r.n])),
        background: rows.filter((r) => r.kind === 'background').map((r) => r.label),
        walSyncs: Number(wal.syncs),
        walSyncMs: wal.sync_ms,
        walWriteMs: wal.write_ms,
        ioSomeUs: io.some,
        ioFullUs: io.full,
      });
    } catch {
      // a missed sample
    } finally {
      this.busy = false;
    }
  }

  async stop(): Promise<StallTimeline> {
    clearInterval(this.timer);
    Atomics.store(this.stopFlag, 0, 1);
    const probes = await new Promise<Probe[]>((resolve, reject) => {
      this.worker!.once('message', resolve);
      this.worker!.once('error', reject);
    });
    await this.worker!.terminate();
    await this.client.end();
    return { snapshots: this.snapshots, probes };
  }
}

/** One request of a paced run: when it was due (epoch ms) and how long its answer took. */
export interface TimedRequest {
  at: number;
  ms: number;
}

interface WindowFacts {
  /** WAL syncs and the milliseconds they took, cluster-wide. */
  walSyncs: number;
  walSyncMs: number;
  /** Milliseconds in which some (or all) tasks waited on I/O. */
  ioSomeMs: number;
  ioFullMs: number;
  /** Slowest fdatasync of the disk probe. */
  maxProbeFsyncMs: number;
  /** Share of snapshots with a checkpoint writing or syncing. */
  checkpointShare: number;
  /** Average running backends by wait event. */
  waits: Record<string, number>;
}

function factsBetween(t: StallTimeline, from: number, to: number): WindowFacts {
  const inside = t.snapshots.filter((s) => s.at >= from && s.at <= to);
  const before = [...t.snapshots].reverse().find((s) => s.at < from) ?? inside[0];
  const last = inside.at(-1) ?? before;
  const waits: Record<string, number> = {};
  for (const s of inside) for (const [k, v] of Object.entries(s.waits)) waits[k] = (waits[k] ?? 0) + v / inside.length;
  const round = (n: number) => Math.round(n * 100) / 100;
  return {
    walSyncs: before && last ? last.walSyncs - before.walSyncs : 0,
    walSyncMs: before && last ? round(last.walSyncMs - before.walSyncMs) : 0,
    ioSomeMs: before && last ? round((last.ioSomeUs - before.ioSomeUs) / 1000) : 0,
    ioFullMs: before && last ? round((last.ioFullUs - before.ioFullUs) / 1000) : 0,
    maxProbeFsyncMs: round(Math.max(0, ...t.probes.filter((p) => p.at >= from - 20 && p.at <= to).map((p) => p.fsyncMs))),
    checkpointShare: inside.length ? round(inside.filter((s) => s.background.some((b) => /^checkpointer:(CheckpointWriteDelay|DataFileSync|DataFileWrite|CPU)/.test(b))).length / inside.length) : 0,
    waits: Object.fromEntries(Object.entries(waits).sort((a, b) => b[1] - a[1]).slice(0, 5).map(([k, v]) => [k, round(v)])),
  };
}

/**
 * Stall episodes: overlapping spans of requests slower than `slowMs`, merged. For each, what the
 * samples saw in it; and the same facts for the whole run, per second, to compare against.
 */
export function stallReport(t: StallTimeline, requests: TimedRequest[], slowMs = 50) {
  const slow = requests.filter((r) => r.ms > slowMs).sort((a, b) => a.at - b.at);
  const episodes: Array<{ from: number; to: number; requests: number; worstMs: number }> = [];
  for (const r of slow) {
    const last = episodes.at(-1);
    if (last && r.at <= last.to) {
      last.to = Math.max(last.to, r.at + r.ms);
      last.requests++;
      last.worstMs = Math.max(last.worstMs, r.ms);
    } else episodes.push({ from: r.at, to: r.at + r.ms, requests: 1, worstMs: r.ms });
  }
  const start = requests[0]?.at ?? 0;
  const end = Math.max(...requests.map((r) => r.at + r.ms));
  const whole = factsBetween(t, start, end);
  const seconds = (end - start) / 1000;
  const probes = t.probes.map((p) => p.fsyncMs).sort((a, b) => a - b);
  const pct = (q: number) => Math.round((probes[Math.min(probes.length - 1, Math.floor(q * probes.length))] ?? 0) * 100) / 100;
  return {
    slowMs,
    seconds: Math.round(seconds * 10) / 10,
    snapshots: t.snapshots.length,
    diskProbe: { fsyncs: probes.length, p50Ms: pct(0.5), p99Ms: pct(0.99), maxMs: pct(1), over20Ms: probes.filter((p) => p > 20).length, over50Ms: probes.filter((p) => p > 50).length },
    run: { ...whole, walSyncsPerSecond: Math.round(whole.walSyncs / seconds), walSyncMsPerSync: whole.walSyncs ? Math.round((whole.walSyncMs / whole.walSyncs) * 100) / 100 : 0 },
    episodes: episodes.map((e) => {
      // Backends publish their WAL counters about once a second, so per-span WAL figures would be
      // noise; the wait events (live in pg_stat_activity) say who was waiting on WAL in the span.
      const { walSyncs: _syncs, walSyncMs: _syncMs, ...facts } = factsBetween(t, e.from, e.to);
      return { atSecond: Math.round(((e.from - start) / 1000) * 100) / 100, ms: Math.round(e.to - e.from), requests: e.requests, worstMs: Math.round(e.worstMs), ...facts };
    }),
  };
}
