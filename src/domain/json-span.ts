/**
 * Where a value sits in a JSON text, so it can be carried on as the very characters the sender
 * wrote. JSON.parse cannot say: it keeps no source positions, and what it returns loses digits
 * beyond double precision (12345678901234567890), turns 1e400 into Infinity and -0.0 into -0, and
 * JSON.stringify then writes those back as ...000, null and 0, reorders integer-like keys and
 * re-spells string escapes.
 *
 * Every function here expects a text JSON.parse has already accepted: the scan checks nothing, so
 * on an invalid text the span it returns is meaningless (the scan still always ends).
 */

export interface Span {
  /** Index of the value's first character. */
  start: number;
  /** Index just past its last character: text.slice(start, end) is the value. */
  end: number;
}

/** JSON's whitespace, exactly: space, tab, line feed, carriage return. */
function isWhitespace(code: number): boolean {
  return code === 0x20 || code === 0x09 || code === 0x0a || code === 0x0d;
}

function skipWhitespace(text: string, at: number): number {
  let i = at;
  while (i < text.length && isWhitespace(text.charCodeAt(i))) i++;
  return i;
}

/** `at` is an opening quote; returns the index past the closing one. Escapes are skipped whole. */
function skipString(text: string, at: number): number {
  let i = at + 1;
  while (i < text.length && text[i] !== '"') i += text[i] === '\\' ? 2 : 1;
  return i + 1;
}

/**
 * Returns the index past the value starting at `at`. A container is skipped by counting brackets
 * (strings skipped whole, so brackets inside them do not count): no recursion, so depth is free.
 */
function skipValue(text: string, at: number): number {
  const first = text[at];
  if (first === '"') return skipString(text, at);
  let i = at;
  if (first === '{' || first === '[') {
    let depth = 0;
    while (i < text.length) {
      const c = text[i];
      if (c === '"') {
        i = skipString(text, i);
        continue;
      }
      if (c === '{' || c === '[') depth++;
      else if (c === '}' || c === ']') depth--;
      i++;
      if (depth === 0) break;
    }
    return i;
  }
  // A number, true, false or null: it runs to the next delimiter.
  while (i < text.length && !isWhitespace(text.charCodeAt(i)) && text[i] !== ',' && text[i] !== '}' && text[i] !== ']') i++;
  return i;
}

/** The whole document's value, without the whitespace JSON allows around it. */
export function documentSpan(text: string): Span {
  const start = skipWhitespace(text, 0);
  return { start, end: skipValue(text, start) };
}

/**
 * The value of a top-level member of a JSON object, or undefined when the document is not an
 * object or has no such member. Names are compared as JSON.parse reads them (`"d\u0061ta"` is
 * `data`), and a repeated name yields its last value, the one JSON.parse keeps.
 */
export function memberSpan(text: string, name: string): Span | undefined {
  let i = skipWhitespace(text, 0);
  if (text[i] !== '{') return undefined;
  i = skipWhitespace(text, i + 1);
  let found: Span | undefined;
  while (i < text.length && text[i] === '"') {
    const nameEnd = skipString(text, i);
    const quoted = text.slice(i, nameEnd);
    // Only an escaped name needs decoding; most names are compared as they stand.
    const memberName = quoted.includes('\\') ? (JSON.parse(quoted) as string) : quoted.slice(1, -1);
    const start = skipWhitespace(text, skipWhitespace(text, nameEnd) + 1); // past the colon
    const end = skipValue(text, start);
    if (memberName === name) found = { start, end };
    i = skipWhitespace(text, end);
    if (text[i] === ',') i = skipWhitespace(text, i + 1);
    else break;
  }
  return found;
}

/** The values of a JSON array, in order; empty when the document is not an array. */
export function elementSpans(text: string): Span[] {
  let i = skipWhitespace(text, 0);
  if (text[i] !== '[') return [];
  const spans: Span[] = [];
  i = skipWhitespace(text, i + 1);
  while (i < text.length && text[i] !== ']') {
    const end = skipValue(text, i);
    spans.push({ start: i, end });
    i = skipWhitespace(text, end);
    if (text[i] === ',') i = skipWhitespace(text, i + 1);
    else break;
  }
  return spans;
}
