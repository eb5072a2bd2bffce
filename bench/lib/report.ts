import { benchConfig, scenarioNames, type ScenarioName } from './config.js';

/** The published shape of bench/results/latest.json: numbers only, nothing else. */
export interface LatestJson {
  intake: { rps: number; floorRps: number; ratio: number; p99MsHalfLoad: number; filteredRatio: number };
  dispatch: { rps: number; floorRps: number; ratio: number };
  isolation: { ratio: number };
  latency: { p50Ms: number; p99Ms: number; coldP99Ms: number };
  memory: { rssMb: number; idleRssMb: number; backlog: number };
  duplicateStorm: { cpuRatio: number };
  live: { kneeRps: number };
  scale: { endpoints: number; admissionMsP50: number; admissionMsIdle0P50: number; latencyP99Ms: number };
  flaky: { lagSeconds: number };
  /** Optional (BENCH_ONLY=drift). */
  drift?: { lastOverSecondP99: number };
  /** From api and worker as separate processes (the first of BENCH_FAIRNESS_TOPOLOGIES; details say which). */
  fairness: { ratio: number; bareRequestRatio: number; platformRatio: number; backlogRatio: number };
  storage: { bytesPerEvent: number };
  postgres: { cpuMsPerEvent: number };
  retention: { dropMsPerMillion: number; deleteMsPerMillion: number };
  tracing: { overheadRatio: number };
  machine: { cpus: number; node: number; postgres: number; redis: number };
}

interface Row {
  measure: string;
  value: string;
  floor: string;
  target: string;
  met: boolean | undefined;
}

const fmt = (v: number | undefined, digits = 0) => (v === undefined || Number.isNaN(v) ? '—' : v.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits }));

/** Builds the human table from whatever scenarios ran. */
export function summaryRows(r: Partial<LatestJson>): Row[] {
  const rows: Row[] = [];
  const check = (value: number | undefined, ok: (v: number) => boolean) => (value === undefined ? undefined : ok(value));
  if (r.intake) {
    rows.push({ measure: 'intake rps (callbacks/s)', value: fmt(r.intake.rps), floor: fmt(r.intake.floorRps), target: '', met: undefined });
    rows.push({ measure: 'intake ratio', value: fmt(r.intake.ratio, 3), floor: '', target: '≥ 0.5', met: check(r.intake.ratio, (v) => v >= 0.5) });
    rows.push({ measure: 'intake filtered ratio (vs unfiltered)', value: fmt(r.intake.filteredRatio, 3), floor: '', target: '', met: undefined });
    rows.push({ measure: 'intake p99 ms at half load', value: fmt(r.intake.p99MsHalfLoad, 1), floor: '', target: '≤ 20', met: check(r.intake.p99MsHalfLoad, (v) => v <= 20) });
  }
  if (r.dispatch) {
    rows.push({ measure: 'dispatch rps (deliveries/s)', value: fmt(r.dispatch.rps), floor: fmt(r.dispatch.floorRps), target: '', met: undefined });
    rows.push({ measure: 'dispatch ratio', value: fmt(r.dispatch.ratio, 3), floor: '', target: '≥ 0.25', met: check(r.dispatch.ratio, (v) => v >= 0.25) });
  }
  if (r.isolation) rows.push({ measure: 'isolation ratio', value: fmt(r.isolation.ratio, 3), floor: '', target: '≥ 0.9', met: check(r.isolation.ratio, (v) => v >= 0.9) });
  if (r.latency) {
    rows.push({ measure: 'latency p99 ms (202 → receiver)', value: fmt(r.latency.p99Ms, 1), floor: '', target: '≤ 50', met: check(r.latency.p99Ms, (v) => v <= 50) });
    rows.push({ measure: 'cold start p99 ms (first 3 s of a fresh process)', value: fmt(r.latency.coldP99Ms, 1), floor: '', target: '≤ 100', met: check(r.latency.coldP99Ms, (v) => v <= 100) });
  }
  if (r.memory) {
    rows.push({
      measure: `worker peak RSS MiB (${fmt(r.memory.backlog)} backlog)`,
      value: fmt(r.memory.rssMb, 1),
      floor: '',
      target: '≤ 200',
      met: check(r.memory.rssMb, (v) => v <= 200),
    });
    rows.push({ measure: 'worker idle RSS MiB (compiled)', value: fmt(r.memory.idleRssMb, 1), floor: '', target: '≤ 100', met: check(r.memory.idleRssMb, (v) => v <= 100) });
  }
  if (r.duplicateStorm) rows.push({ measure: 'duplicateStorm cpuRatio', value: fmt(r.duplicateStorm.cpuRatio, 3), floor: '', target: '≤ 2.0', met: check(r.duplicateStorm.cpuRatio, (v) => v <= 2) });
  if (r.live) rows.push({ measure: 'live knee rps (p99 ≤ 100 ms, 10 endpoints)', value: fmt(r.live.kneeRps), floor: '', target: '≥ 500', met: check(r.live.kneeRps, (v) => v >= 500) });
  if (r.scale) {
    const s = r.scale;
    rows.push({ measure: 'scale admission ms p50, no idle endpoints', value: fmt(s.admissionMsIdle0P50, 2), floor: '', target: '', met: undefined });
    rows.push({ measure: `scale admission ms p50, ${fmt(s.endpoints)} idle endpoints`, value: fmt(s.admissionMsP50, 2), floor: '', target: '', met: undefined });
    const ratio = s.admissionMsP50 / s.admissionMsIdle0P50;
    rows.push({ measure: 'scale admission ratio (idle / none)', value: fmt(ratio, 3), floor: '', target: '≤ 2', met: check(ratio, (v) => v <= 2) });
    rows.push({ measure: `scale latency p99 ms (${fmt(s.endpoints)} idle endpoints)`, value: fmt(s.latencyP99Ms, 1), floor: '', target: '≤ 100', met: check(s.latencyP99Ms, (v) => v <= 100) });
  }
  if (r.drift) rows.push({ measure: 'drift: p99 last minute / second minute', value: fmt(r.drift.lastOverSecondP99, 2), floor: '', target: '≤ 2', met: check(r.drift.lastOverSecondP99, (v) => v <= 2) });
  if (r.flaky) rows.push({ measure: 'flaky lag s (max, last window)', value: fmt(r.flaky.lagSeconds, 2), floor: '', target: '≤ 1', met: check(r.flaky.lagSeconds, (v) => v <= 1) });
  if (r.fairness) {
    const f = r.fairness;
    rows.push({ measure: `fairness ratio (B p99 with A burst / alone, ${benchConfig.fairness.topologies[0]})`, value: fmt(f.ratio, 3), floor: '', target: '', met: undefined });
    rows.push({ measure: 'fairness bare request ratio (same phases)', value: fmt(f.bareRequestRatio, 3), floor: '', target: '', met: undefined });
    rows.push({ measure: 'fairness platform ratio (ratio / bare)', value: fmt(f.platformRatio, 3), floor: '', target: '≤ 1.5', met: check(f.platformRatio, (v) => v <= 1.5) });
    rows.push({ measure: `fairness backlog ratio (B p99 during A's 100k drain / alone)`, value: fmt(f.backlogRatio, 3), floor: '', target: '≤ 2', met: check(f.backlogRatio, (v) => v <= 2) });
  }
  if (r.storage) rows.push({ measure: 'storage bytes per event (2 endpoints, 400 B)', value: fmt(r.storage.bytesPerEvent), floor: '', target: '≤ 2,048', met: check(r.storage.bytesPerEvent, (v) => v <= 2048) });
  if (r.postgres) rows.push({ measure: 'PostgreSQL CPU ms per event (storage: 1 publish, 2 deliveries)', value: fmt(r.postgres.cpuMsPerEvent, 3), floor: '', target: '≤ 0.95', met: check(r.postgres.cpuMsPerEvent, (v) => v <= 0.95) });
  if (r.retention) {
    rows.push({ measure: 'retention ms per 1M attempts, partition drop', value: fmt(r.retention.dropMsPerMillion, 1), floor: '', target: '', met: undefined });
    rows.push({ measure: 'retention ms per 1M attempts, DELETE', value: fmt(r.retention.deleteMsPerMillion, 0), floor: '', target: '', met: undefined });
    const ratio = r.retention.deleteMsPerMillion / r.retention.dropMsPerMillion;
    rows.push({ measure: 'retention ratio (DELETE / drop)', value: fmt(ratio, 1), floor: '', target: '≥ 10', met: check(ratio, (v) => v >= 10) });
  }
  if (r.tracing) {
    rows.push({ measure: 'tracing cost (CPU per unit, on at ratio 1.0 / off, median of pairs)', value: fmt(r.tracing.overheadRatio, 3), floor: '', target: '≤ 1.15', met: check(r.tracing.overheadRatio, (v) => v <= 1.15) });
  }
  return rows;
}

export function renderTable(rows: Row[]): string {
  const header = ['measure', 'value', 'floor', 'target', 'met'];
  const cells = rows.map((r) => [r.measure, r.value, r.floor, r.target, r.met === undefined ? '' : r.met ? 'yes' : 'NO']);
  const widths = header.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i]!.length)));
  const line = (c: string[]) => c.map((v, i) => (i === 0 ? v.padEnd(widths[i]!) : v.padStart(widths[i]!))).join('  ');
  return [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...cells.map(line)].join('\n');
}

export function isComplete(names: ScenarioName[]): boolean {
  return scenarioNames.every((n) => names.includes(n));
}
