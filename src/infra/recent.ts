/*
 * Bounded memories of recent keys: RecentSet (was this key seen lately?) and RecentMap (what was
 * set for it lately?). Both forget the key touched longest ago when full.
 */

/**
 * The most recently added keys, at most `capacity` of them: adding a key past that forgets the one
 * added longest ago. A hint, never the truth: a key forgotten or never seen here only means the
 * caller takes its general path.
 */
export class RecentSet {
  private readonly keys = new Set<string>();

  constructor(private readonly capacity: number) {}

  has(key: string): boolean {
    return this.keys.has(key);
  }

  add(key: string): void {
    // Re-adding moves a key to the newest end, so a body repeated often stays known.
    this.keys.delete(key);
    if (this.keys.size >= this.capacity) this.keys.delete(this.keys.values().next().value!);
    this.keys.add(key);
  }

  get size(): number {
    return this.keys.size;
  }
}

/** A map of the most recently set keys, at most `capacity` of them, forgetting like RecentSet. */
export class RecentMap<V> {
  private readonly entries = new Map<string, V>();

  constructor(private readonly capacity: number) {}

  get(key: string): V | undefined {
    return this.entries.get(key);
  }

  clear(): void {
    this.entries.clear();
  }

  set(key: string, value: V): void {
    this.entries.delete(key);
    if (this.entries.size >= this.capacity) this.entries.delete(this.entries.keys().next().value!);
    this.entries.set(key, value);
  }
}
