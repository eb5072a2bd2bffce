import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { advisoryLocks } from '../../src/infra/advisory-locks.js';

/**
 * One key per purpose (src/infra/advisory-locks.ts): a key taken for two purposes makes one holder
 * wait for the other. Keys written as literals, in SQL or TypeScript, must be the registry's.
 */
const root = fileURLToPath(new URL('../..', import.meta.url));
const keyLiteral = /\b727_?\d{3}\b/g;

function files(directory: string, extension: string): string[] {
  return readdirSync(join(root, directory), { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith(extension))
    .map((f) => join(directory, f));
}

function literals(text: string): number[] {
  return [...text.matchAll(keyLiteral)].map((m) => Number(m[0].replaceAll('_', '')));
}

describe('advisory lock keys', () => {
  it('are distinct', () => {
    const keys = Object.values(advisoryLocks);
    expect(new Set(keys).size).toBe(keys.length);
  });

  it('written anywhere in src/ or db/functions/ are the registry\'s', () => {
    const known = new Set<number>(Object.values(advisoryLocks));
    const unknown = [...files('src', '.ts').filter((f) => !f.endsWith('advisory-locks.ts')), ...files('db/functions', '.sql')]
      .flatMap((f) => literals(readFileSync(join(root, f), 'utf8')).filter((k) => !known.has(k)).map((k) => `${f}: ${k}`));
    expect(unknown).toEqual([]);
  });

  it('in SQL are taken for the purpose the registry names', () => {
    const sql = (name: string) => literals(readFileSync(join(root, 'db/functions', `${name}.sql`), 'utf8'));
    expect(new Set(sql('admit_due_v4'))).toEqual(new Set([advisoryLocks.admissionEndpoint]));
    expect(new Set(sql('ensure_time_partitions'))).toEqual(new Set([advisoryLocks.partitionUpkeep]));
    expect(new Set(sql('ensure_time_partitions_v2'))).toEqual(new Set([advisoryLocks.partitionUpkeep]));
  });

  it('would catch a literal outside the registry', () => {
    expect(literals('SELECT pg_advisory_lock(727099); const k = 727_004;')).toEqual([727099, 727004]);
  });
});
