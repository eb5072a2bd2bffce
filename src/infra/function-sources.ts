import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Knex } from 'knex';
import { advisoryLocks } from './advisory-locks.js';
import { compareReleases, currentRelease } from './release.js';

/**
 * The SQL functions' sources, db/functions/<function name>.sql at the repository root: two levels
 * up from both src/infra and dist/infra, so the sources and a build (and the image, which copies
 * db/ beside dist/) find the same files.
 */
export const functionsDirectory = fileURLToPath(new URL('../../db/functions', import.meta.url));

/** Where each file's checksum is recorded once applied (migration 20261202000029). */
export const functionsTable = 'schema_functions';

/** Serialises migrators applying sources. */
const applyLock = advisoryLocks.functionSources;

export interface FunctionSource {
  /** The function's name, which is the file's name without `.sql`. */
  name: string;
  sql: string;
  /** sha256 of the file's bytes, hex. */
  checksum: string;
}

export function readFunctionSources(directory = functionsDirectory): FunctionSource[] {
  return readdirSync(directory)
    .filter((f) => /^[a-z0-9_]+\.sql$/.test(f))
    .sort()
    .map((file) => {
      const bytes = readFileSync(join(directory, file));
      return { name: file.slice(0, -'.sql'.length), sql: bytes.toString('utf8'), checksum: createHash('sha256').update(bytes).digest('hex') };
    });
}

async function functionExists(db: Knex, name: string): Promise<boolean> {
  const { rows } = await db.raw<{ rows: unknown[] }>('SELECT 1 FROM pg_proc WHERE proname = :name AND pronamespace = current_schema()::regnamespace', { name });
  return rows.length > 0;
}

/**
 * The repeatable step of `migrate`, run after the versioned migrations (as Flyway runs its R__
 * files): every source whose checksum differs from the recorded one, or whose function is missing
 * (a versioned migration's down may have dropped it), is applied and its checksum recorded. All of
 * them in one transaction: a function may call another file's function (release 0.1.0's
 * `admit_due` is a wrapper over `admit_due_v4`), and running processes must see both files' new
 * text at once, never one without the other. check_function_bodies is off, so the order of the
 * files does not matter inside it. A file a newer release applied is left alone: during a rolling
 * deploy an old process that restarts must not put back its older text. Returns the names applied.
 */
export async function applyFunctionSources(db: Knex, directory = functionsDirectory, release = currentRelease): Promise<string[]> {
  const sources = readFunctionSources(directory);
  const stale = async (q: Knex | Knex.Transaction): Promise<FunctionSource[]> => {
    const rows = await q(functionsTable).select<Array<{ name: string; checksum: string; release: string | null }>>('name', 'checksum', 'release');
    const recorded = new Map(rows.map((r) => [r.name, r.checksum]));
    const newer = new Set(rows.filter((r) => r.release !== null && compareReleases(r.release, release) > 0).map((r) => r.name));
    const out: FunctionSource[] = [];
    for (const source of sources) {
      if (newer.has(source.name)) continue;
      if (recorded.get(source.name) === source.checksum && (await functionExists(q, source.name))) continue;
      out.push(source);
    }
    return out;
  };
  // Nothing to do, the usual case at every start: no transaction, no lock.
  if ((await stale(db)).length === 0) return [];
  return db.transaction(async (trx) => {
    // Two migrators starting together: the second waits here, then finds the files applied.
    await trx.raw('SELECT pg_advisory_xact_lock(:key)', { key: applyLock });
    const todo = await stale(trx);
    await trx.raw('SET LOCAL check_function_bodies = off');
    for (const source of todo) {
      // Without bindings knex sends the file as written, several statements included.
      await trx.raw(source.sql);
      await trx(functionsTable)
        .insert({ name: source.name, checksum: source.checksum, release, applied_at: trx.fn.now() })
        .onConflict('name')
        .merge();
    }
    return todo.map((source) => source.name);
  });
}
