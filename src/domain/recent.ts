/*
 * Bounded memories of recent keys: RecentSet (was this key seen lately?) and RecentMap (what was
 * set for it lately?). Both forget the key touched longest ago when full.
 */

/**
 * Yields the oldest key of `keys` (insertion order) on each call, from an iterator kept between
 * calls. A Set or Map keeps a deleted entry's slot until it next rehashes, and a new iterator steps
 * over every such slot before the first live key: ~7 µs a call at 10,000 keys, paid on every
 * eviction. The kept iterator has passed them already. It is correct because every key it yields is
 * deleted at once, so no live key lies behind it; a re-added key was moved to the end, ahead of it.
 */
class OldestFirst {
  private cursor: Iterator<string> | undefined;

  constructor(private readonly of: { keys(): Iterator<string> }) {}

  /** Forgets the kept iterator, which would otherwise hold the cleared table until the next eviction. */
  reset(): void {
    this.cursor = undefined;
  }

  next(): string {
    let step = this.cursor?.next();
    if (!step || step.done) {
      // An exhausted iterator stays exhausted, even for keys added after it ended.
      this.cursor = this.of.keys();
      step = this.cursor.next();
    }
    return step.value as string;
  }
}

/**
 * The most recently added keys, at most `capacity` of them: adding a key past that forgets the one
 * added longest ago. A hint, never the truth: a key forgotten or never seen here only means the
 * caller takes its general path.
 */
export class RecentSet {
  private readonly keys = new Set<string>();
  private readonly oldest = new OldestFirst(this.keys);

  constructor(private readonly capacity: number) {}

  has(key: string): boolean {
    return this.keys.has(key);
  }

  add(key: string): void {
    // Re-adding moves a key to the newest end, so a body repeated often stays known.
    this.keys.delete(key);
    if (this.keys.size >= this.capacity) this.keys.delete(this.oldest.next());
    this.keys.add(key);
  }

  get size(): number {
    return this.keys.size;
  }
}

/** A map of the most recently set keys, at most `capacity` of them, forgetting like RecentSet. */
export class RecentMap<V> {
  private readonly entries = new Map<string, V>();
  private readonly oldest = new OldestFirst(this.entries);

  constructor(private readonly capacity: number) {}

  get(key: string): V | undefined {
    return this.entries.get(key);
  }

  delete(key: string): void {
    this.entries.delete(key);
  }

  clear(): void {
    this.entries.clear();
    this.oldest.reset();
  }

  set(key: string, value: V): void {
    this.entries.delete(key);
    if (this.entries.size >= this.capacity) this.entries.delete(this.oldest.next());
    this.entries.set(key, value);
  }
}
