import type { Knex } from 'knex';
import { cpuSeconds } from './proc.js';

/**
 * Where the CPU went during a measurement: named processes (platform, receiver) read from
 * /proc/<pid>/stat, plus the PostgreSQL backends serving the bench database (found through
 * pg_stat_activity), so a report can say whether Node or the database dominates. Backends that
 * appear during the window count from zero; ones that exit before the end are missed, so the
 * window must close while the platform's connections are still open.
 */
export class CpuBudget {
  private startNamed = new Map<string, number>();
  private startBackends = new Map<number, number>();

  constructor(
    private readonly db: Knex,
    private readonly named: Record<string, number[]>,
  ) {}

  private static read(pid: number): number | undefined {
    try {
      return cpuSeconds(pid);
    } catch {
      return undefined; // exited
    }
  }

  private async backends(): Promise<number[]> {
    const { rows } = await this.db.raw<{ rows: Array<{ pid: number }> }>(
      "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND backend_type = 'client backend'",
    );
    return rows.map((r) => r.pid);
  }

  async start(): Promise<void> {
    for (const [name, pids] of Object.entries(this.named)) {
      this.startNamed.set(name, pids.reduce((sum, pid) => sum + (CpuBudget.read(pid) ?? 0), 0));
    }
    for (const pid of await this.backends()) {
      const cpu = CpuBudget.read(pid);
      if (cpu !== undefined) this.startBackends.set(pid, cpu);
    }
  }

  /** CPU seconds per name (and `postgres`) since start(). */
  async stop(): Promise<Record<string, number>> {
    const out: Record<string, number> = {};
    for (const [name, pids] of Object.entries(this.named)) {
      out[name] = pids.reduce((sum, pid) => sum + (CpuBudget.read(pid) ?? 0), 0) - (this.startNamed.get(name) ?? 0);
    }
    let pg = 0;
    for (const pid of await this.backends()) {
      const cpu = CpuBudget.read(pid);
      if (cpu !== undefined) pg += cpu - (this.startBackends.get(pid) ?? 0);
    }
    out.postgres = pg;
    return out;
  }
}

/** Milliseconds of CPU per unit of work, per process. */
export function perUnitMs(budget: Record<string, number>, units: number): Record<string, number> {
  return Object.fromEntries(Object.entries(budget).map(([k, s]) => [k, Math.round((s / units) * 1e6) / 1e3]));
}

/**
 * The throughput ratio CPU alone allows: the floor's CPU per request over the platform's per unit,
 * each summed over every process measured. Where both runs keep the machine equally busy, the rps
 * ratio comes out at this, so the two side by side say whether CPU explains a ratio. It is no
 * steadier than the rps ratio: the floor's CPU per request moves with the machine as much.
 */
export function cpuBoundRatio(platformMs: Record<string, number>, floorMs: Record<string, number>): number {
  const sum = (ms: Record<string, number>) => Object.values(ms).reduce((a, b) => a + b, 0);
  return Math.round((sum(floorMs) / sum(platformMs)) * 1000) / 1000;
}
