import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/**
 * From migration 20261202000029 on, a SQL function's text lives only in db/functions/<name>.sql
 * and versioned migrations hold tables, indexes and data. The migrations before it are released
 * history and stay as they are.
 */
const directory = fileURLToPath(new URL('../../migrations', import.meta.url));
const lastWithFunctions = '20261202000028';
const later = readdirSync(directory)
  .filter((f) => /^\d+_[a-z0-9_]+\.ts$/.test(f) && f.split('_')[0]! > lastWithFunctions)
  .sort();

const forbidden: Array<[string, RegExp]> = [
  ['function text (CREATE FUNCTION)', /\bCREATE\s+(OR\s+REPLACE\s+)?FUNCTION\b/i],
  ['a patch of a stored function (pg_get_functiondef)', /pg_get_functiondef/i],
  ['an import of another migration', /\b(from|import)\s*\(?\s*['"]\.{1,2}\/(migrations\/)?\d+_/],
];

describe('versioned migrations after 20261202000028', () => {
  it('exist (the one that records applied function sources, at least)', () => {
    expect(later).toContain('20261202000029_functions_from_source.ts');
  });

  it.each(later)('%s holds no function text, patches no function and imports no migration', (file) => {
    const text = readFileSync(join(directory, file), 'utf8');
    const found = forbidden.filter(([, pattern]) => pattern.test(text)).map(([what]) => what);
    expect(found, `${file} contains ${found.join(', ')}; functions belong in db/functions/<name>.sql`).toEqual([]);
  });

  it('would catch each of them', () => {
    const samples = [
      "await knex.raw('CREATE OR REPLACE FUNCTION admit_due() RETURNS void LANGUAGE sql AS $$ $$');",
      'create function x() returns int language sql as $$ select 1 $$',
      "SELECT pg_get_functiondef('admit_due'::regproc)",
      "import { intakeAcceptFunction } from './20261129000011_intake_function.js';",
      "const m = await import('../migrations/20261129000011_intake_function.js');",
    ];
    for (const sample of samples) expect(forbidden.some(([, pattern]) => pattern.test(sample)), sample).toBe(true);
  });
});
