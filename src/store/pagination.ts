import { ValidationError } from '../domain/errors.js';
import { idOfUuid, uuidOfId, type IdKind } from '../domain/ids.js';
import type { Knex } from 'knex';

export interface Page<T> {
  data: T[];
  nextCursor: string | null;
}

export const invalidCursor = { path: 'cursor', message: 'cursor is not valid', code: 'invalid_cursor' } as const;

/** Cursors are opaque to clients; inside they are the last id seen (ids sort by creation time). */
function cursorId(cursor: string): string | undefined {
  const id = Buffer.from(cursor, 'base64url').toString('utf8');
  return /^[a-z]+_[0-9a-z]{26}$/.test(id) ? id : undefined;
}

/** Whether a page query's cursor is one this API gave out (the query schemas ask, beside every other check). */
export const isCursor = (cursor: string): boolean => cursorId(cursor) !== undefined;

const cursorRefused = () => new ValidationError([{ path: invalidCursor.path, message: invalidCursor.message }], invalidCursor.code);

export function decodeCursor(cursor: string | undefined): string | undefined {
  if (!cursor) return undefined;
  const id = cursorId(cursor);
  if (id === undefined) throw cursorRefused();
  return id;
}

/**
 * Newest first. Fetches one row more than asked to know whether another page exists. `storedAs`:
 * the id column holds the uuid that TypeIDs of this kind encode; the cursor still carries the TypeID.
 */
export async function paginate<R, T>(
  query: Knex.QueryBuilder,
  idColumn: string,
  opts: { limit: number; cursor?: string },
  map: (row: R) => T,
  storedAs?: IdKind,
): Promise<Page<T>> {
  const after = decodeCursor(opts.cursor);
  if (after) {
    const key = storedAs ? uuidOfId(storedAs, after) : after;
    if (key === null) throw cursorRefused();
    query.where(idColumn, '<', key);
  }
  const rows = (await query.orderBy(idColumn, 'desc').limit(opts.limit + 1)) as R[];
  const more = rows.length > opts.limit;
  const page = more ? rows.slice(0, opts.limit) : rows;
  const last = page.at(-1) as Record<string, unknown> | undefined;
  const lastStored = last ? String(last[idColumn.split('.').pop()!]) : null;
  const lastId = lastStored !== null && storedAs ? idOfUuid(storedAs, lastStored) : lastStored;
  return { data: page.map(map), nextCursor: more && lastId ? Buffer.from(lastId).toString('base64url') : null };
}
