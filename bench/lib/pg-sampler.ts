import type { Knex } from 'knex';

/**
 * A sampling profiler for PostgreSQL: every `intervalMs` it reads pg_stat_activity for the bench
 * database and counts, per statement (its first words) and wait event, how many backends were
 * busy with it. Share of samples ≈ share of database time. "idle in transaction" means a
 * transaction held open while its client (the platform process) was doing something else.
 * Enabled with BENCH_PG_SAMPLE=1; it costs one small query per interval.
 */
export class PgSampler {
  private readonly counts = new Map<string, number>();
  private samples = 0;
  private timer: NodeJS.Timeout | undefined;
  private busy = false;

  constructor(
    private readonly db: Knex,
    private readonly intervalMs = 20,
  ) {}

  start(): void {
    this.timer = setInterval(() => void this.sample(), this.intervalMs);
  }

  private async sample(): Promise<void> {
    if (this.busy) return;
    this.busy = true;
    try {
      const { rows } = await this.db.raw<{ rows: Array<{ state: string; wait: string | null; query: string }> }>(
        `SELECT state, wait_event_type || ':' || wait_event AS wait, query
           FROM pg_stat_activity
          WHERE datname = current_database() AND pid <> pg_backend_pid()
            AND state IN ('active', 'idle in transaction')`,
      );
      this.samples++;
      for (const r of rows) {
        const key = `${r.state === 'active' ? '' : '[idle in transaction] '}${label(r.query)}${r.wait ? `  {${r.wait}}` : ''}`;
        this.counts.set(key, (this.counts.get(key) ?? 0) + 1);
      }
    } catch {
      // a missed sample
    } finally {
      this.busy = false;
    }
  }

  /** Average number of backends per sample in each state/statement: 1.0 = one backend all the time. */
  stop(top = 12): Array<{ statement: string; backends: number }> {
    clearInterval(this.timer);
    return [...this.counts.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([statement, n]) => ({ statement, backends: Math.round((n / Math.max(1, this.samples)) * 100) / 100 }));
  }
}

/** The statement's first meaningful words, whitespace collapsed, e.g. "WITH d AS ( UPDATE deliveries SET". */
function label(query: string): string {
  return query.replace(/\s+/g, ' ').trim().slice(0, 70);
}
