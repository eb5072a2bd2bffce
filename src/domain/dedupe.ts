import { createHash } from 'node:crypto';

/** Nesting deeper than this is refused: provider payloads are shallow, and recursion must not blow the stack. */
const MAX_DEPTH = 256;

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function canonical(value: unknown, omit: ReadonlySet<string>, depth: number): string | undefined {
  if (depth > MAX_DEPTH) throw new RangeError(`JSON nested deeper than ${MAX_DEPTH} levels`);
  if (Array.isArray(value)) {
    // Array order is meaningful; undefined items become null, as JSON.stringify does.
    return `[${value.map((item) => canonical(item, omit, depth + 1) ?? 'null').join(',')}]`;
  }
  if (isPlainObject(value)) {
    const parts: string[] = [];
    for (const key of Object.keys(value).sort()) {
      if (omit.has(key)) continue;
      const encoded = canonical(value[key], omit, depth + 1);
      if (encoded !== undefined) parts.push(`${JSON.stringify(key)}:${encoded}`);
    }
    return `{${parts.join(',')}}`;
  }
  // Primitives: JSON.stringify gives undefined for undefined/functions, "null" for NaN/Infinity.
  return JSON.stringify(value);
}

/** JSON with object keys sorted at every level and no whitespace: equal values give equal text. */
export function canonicalJson(value: unknown): string {
  return canonical(value, new Set(), 0) ?? 'null';
}

/** SHA-256 as lowercase hex; used for byte-identical repeat detection and fallback keys. */
export function digestHex(bytes: Buffer | string): string {
  return createHash('sha256').update(bytes).digest('hex');
}

/**
 * Dedupe key for a payload that carries no stable id: 'h:' + sha256 of its canonical JSON without
 * the volatile fields, dropped at every level.
 *
 * Why: hashing a payload is only a fallback, and a raw-byte hash is wrong for it. Providers resend
 * the same logical event with a fresh callback timestamp/signature and possibly different key
 * order or whitespace; each of those would change a raw digest and turn one event into many.
 * Canonicalizing removes formatting differences, and excluding volatile values removes the
 * per-callback ones, so only the business content decides the key.
 */
export function fallbackDedupeKey(body: unknown, volatileFields: readonly string[]): string {
  const text = canonical(body, new Set(volatileFields), 0) ?? 'null';
  return `h:${digestHex(text)}`;
}
