/**
 * Group commit: items submitted while the database is busy with earlier batches travel together in
 * the next statement, so under load many callers share one round trip and one commit, and an idle
 * system answers a lone caller at once (a batch of one, no timer). Every caller still gets its own
 * result only after the statement that wrote its item has committed.
 */
export interface BatcherOptions<I, O> {
  /** One statement for all items; one result per item, in the same order. */
  run: (items: I[]) => Promise<O[]>;
  maxBatch: number;
  /** Statements in flight at once; while all are busy, new items wait and go together in the next. */
  maxInFlight: number;
  /**
   * While a statement runs, another starts only once this many items wait (default 1: at once).
   * Fewer wait for a statement to end and go together: a statement's fixed cost, not its rows,
   * is most of a small batch's (docs/performance.md, "Group commits that wait for a queue").
   */
  overlapFrom?: number;
  /**
   * A failed statement wrote nothing. When this says the failure may belong to one item (bad data,
   * a deadlock between two batches) rather than to the database as a whole, each item is run again
   * alone, so one item's error cannot fail the others. Any other failure is the database's: the
   * batch and everything waiting behind it fail at once.
   */
  retryAlone?: (err: unknown) => boolean;
}

interface Waiting<I, O> {
  item: I;
  resolve: (value: O) => void;
  reject: (err: unknown) => void;
}

/**
 * The shape of the platform's write batches (success records, published events): 64 items a
 * statement, a second statement only for a queue of 16. Intake's callbacks take theirs from
 * configuration (INTAKE_BATCH_MAX, INTAKE_STATEMENTS_IN_FLIGHT).
 */
export const groupCommit = { maxBatch: 64, maxInFlight: 2, overlapFrom: 16 } as const;

export class Batcher<I, O> {
  private waiting: Array<Waiting<I, O>> = [];
  private inFlight = 0;

  constructor(private readonly opts: BatcherOptions<I, O>) {}

  submit(item: I): Promise<O> {
    return new Promise<O>((resolve, reject) => {
      this.waiting.push({ item, resolve, reject });
      this.flush();
    });
  }

  private flush(): void {
    const overlapFrom = this.opts.overlapFrom ?? 1;
    while (this.waiting.length > 0 && (this.inFlight === 0 || (this.inFlight < this.opts.maxInFlight && this.waiting.length >= overlapFrom))) {
      const batch = this.waiting.splice(0, this.opts.maxBatch);
      this.inFlight++;
      void this.runBatch(batch).finally(() => {
        this.inFlight--;
        this.flush();
      });
    }
  }

  private async runBatch(batch: Array<Waiting<I, O>>): Promise<void> {
    try {
      const results = await this.opts.run(batch.map((w) => w.item));
      if (results.length !== batch.length) throw new Error(`batch of ${batch.length} returned ${results.length} results`);
      batch.forEach((w, i) => w.resolve(results[i]!));
    } catch (err) {
      if (!this.mayRetryAlone(err)) {
        // The database's own failure (unreachable, timed out): what waits behind this batch would
        // only wait for the same timeout again, one batch after another, so it fails now too.
        for (const w of [...batch, ...this.waiting.splice(0)]) w.reject(err);
        return;
      }
      if (batch.length === 1) {
        batch[0]!.reject(err);
        return;
      }
      await Promise.all(
        batch.map((w) =>
          // Through a promise: a run that throws before it returns one fails its item, not the loop.
          Promise.resolve()
            .then(() => this.opts.run([w.item]))
            .then(
              (r) => (r.length === 1 ? w.resolve(r[0]!) : w.reject(new Error(`batch of 1 returned ${r.length} results`))),
              (e: unknown) => w.reject(e),
            ),
        ),
      );
    }
  }

  /** retryAlone's answer; one that throws is taken as "the database's failure", which settles everything. */
  private mayRetryAlone(err: unknown): boolean {
    try {
      return this.opts.retryAlone?.(err) ?? false;
    } catch {
      return false;
    }
  }
}
