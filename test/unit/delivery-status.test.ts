import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { allows, ATTEMPT_OUTCOMES, DEAD_LETTER_REASONS, DELIVERY_STATUSES, TRANSITIONS, TRIGGERS } from '../../src/domain/delivery-status.js';

const migration = (name: string) => readFileSync(new URL(`../../migrations/${name}.ts`, import.meta.url), 'utf8');
const created = migration('20261129000005_deliveries');
// The newest migration that states the reasons (it added `endpoint_deleted`).
const reasons = migration('20261202000030_endpoint_deleted_reason');

/** The words quoted in a piece of SQL, in order. */
const quoted = (sql: string) => [...sql.matchAll(/'([^']+)'/g)].map((x) => x[1]!);

/** The quoted values of a `column ... IN (...)` CHECK in a migration. */
function checked(column: string): string[] {
  const m = new RegExp(`${column}[^\\n]*CHECK \\(${column} IN \\(([^)]*)\\)\\)`).exec(created);
  if (!m) throw new Error(`no CHECK on ${column}`);
  return quoted(m[1]!);
}

/** The reasons the newest dead_reason CHECK allows: the list its `up` passes. */
function checkedReasons(): string[] {
  const up = /async function up[\s\S]*?check\(\[([^\]]*)\]\)/.exec(reasons);
  if (!up) throw new Error('no dead_reason list in the up migration');
  return quoted(up[1]!);
}

/** The words of a list function in db/functions (`SELECT ARRAY[...]`), in the order of their codes. */
function codedWords(name: string): string[] {
  const source = readFileSync(new URL(`../../db/functions/${name}.sql`, import.meta.url), 'utf8');
  const m = /SELECT ARRAY\[([^\]]*)\]/.exec(source);
  if (!m) throw new Error(`no ARRAY in ${name}.sql`);
  return quoted(m[1]!);
}

/** The words migration 20261207000056 first gave codes to, by its `const name = [...]`. */
function firstCoded(name: string): string[] {
  const m = new RegExp(`const ${name} = \\[([^\\]]*)\\]`).exec(migration('20261207000056_narrower_attempts'));
  if (!m) throw new Error(`no ${name} list in 20261207000056`);
  return quoted(m[1]!);
}

describe('delivery statuses, defined once', () => {
  it('match the database CHECK constraints exactly', () => {
    expect(checked('status')).toEqual([...DELIVERY_STATUSES]);
    expect(checkedReasons()).toEqual([...DEAD_LETTER_REASONS]);
    expect(checked('next_trigger')).toEqual([...TRIGGERS]);
  });

  it("store an attempt's trigger and outcome as their place in lists that are the domain's, and that only grow", () => {
    // A word missing from a list would be stored as NULL, which attempts refuses: recording stops.
    expect(codedWords('attempt_triggers')).toEqual([...TRIGGERS]);
    expect(codedWords('attempt_outcomes')).toEqual([...ATTEMPT_OUTCOMES]);
    // A code never changes meaning: the rows the migration coded read back as the same words.
    const triggers = firstCoded('triggers');
    const outcomes = firstCoded('outcomes');
    expect(TRIGGERS.slice(0, triggers.length)).toEqual(triggers);
    expect(ATTEMPT_OUTCOMES.slice(0, outcomes.length)).toEqual(outcomes);
  });

  it('every transition names only known statuses, and only fan-out and a backfill create a delivery', () => {
    for (const [name, t] of Object.entries(TRANSITIONS)) {
      for (const s of [...(t.from ?? []), ...t.to]) expect(DELIVERY_STATUSES, name).toContain(s);
      if (name !== 'fanOut' && name !== 'backfill') expect(t.from, name).not.toBeNull();
    }
  });

  it('answers what may happen and what may not', () => {
    expect(allows('admit', 'pending', 'in_flight')).toBe(true);
    expect(allows('admit', 'queued', 'in_flight')).toBe(false);
    expect(allows('backfill', null, 'pending')).toBe(true);
    expect(allows('backfill', null, 'dead')).toBe(false);
    expect(allows('record', 'in_flight', 'pending')).toBe(true);
    expect(allows('record', 'pending', 'succeeded')).toBe(false);
    expect(allows('replay', 'succeeded', 'pending')).toBe(true);
    expect(allows('replay', 'pending', 'pending')).toBe(false);
    expect(allows('fanOut', null, 'pending')).toBe(true);
    expect(allows('claim', null, 'in_flight')).toBe(false);
    // A finished delivery only ever moves again by replay.
    const leavesFinal = Object.entries(TRANSITIONS).filter(([, t]) => t.from?.some((s) => s === 'succeeded' || s === 'dead'));
    expect(leavesFinal.map(([name]) => name)).toEqual(['replay']);
  });
});
