import { elementSpans, memberSpan, type Span } from '../../../src/domain/json-span.js';

/**
 * JSON shown as its sender wrote it. The API answers payloads as the very text received (see
 * src/domain/raw-json.ts); JSON.parse in the browser would lose digits beyond double precision and
 * re-spell escapes, so the pages read such values from the answer's text instead.
 */

/** The text of the value at `path` (member names and array indexes) in a JSON text; undefined if absent. */
export function jsonTextAt(text: string, path: (string | number)[]): string | undefined {
  let value = text;
  for (const step of path) {
    const span: Span | undefined = typeof step === 'number' ? elementSpans(value)[step] : memberSpan(value, step);
    if (!span) return undefined;
    value = value.slice(span.start, span.end);
  }
  return value.trim();
}

/**
 * Indents a JSON text for reading, two spaces a level, keeping every token (numbers, strings with
 * their escapes, key order) exactly as written; only whitespace between tokens changes.
 */
export function indentJson(text: string): string {
  let out = '';
  let depth = 0;
  const newline = () => `\n${'  '.repeat(depth)}`;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (c === '"') {
      let end = i + 1;
      while (end < text.length && text[end] !== '"') end += text[end] === '\\' ? 2 : 1;
      out += text.slice(i, end + 1);
      i = end;
    } else if (c === '{' || c === '[') {
      const next = text.slice(i + 1).trimStart()[0];
      if (next === '}' || next === ']') {
        // An empty container stays on one line: `{}` or `[]`.
        out += c + next;
        i = text.indexOf(next, i + 1);
      } else {
        depth++;
        out += c + newline();
      }
    } else if (c === '}' || c === ']') {
      depth--;
      out += newline() + c;
    } else if (c === ',') out += `,${newline()}`;
    else if (c === ':') out += ': ';
    else if (!/\s/.test(c)) out += c;
  }
  return out;
}
