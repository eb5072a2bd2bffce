/**
 * JSON text carried verbatim. A relay forwards payloads it did not write; holding them as text, and
 * never as parsed values, is what keeps every digit, escape, key order and space as the sender
 * wrote them (see json-span.ts for what a parse and re-serialisation would change).
 */
export class RawJson {
  /** `text` is one valid JSON value; it is written out exactly so wherever this is serialised. */
  constructor(readonly text: string) {}

  /** For a value the platform made itself (ids, reasons, counts), which JSON.stringify writes exactly. */
  static of(value: unknown): RawJson {
    const text = JSON.stringify(value);
    if (text === undefined) throw new TypeError('the value has no JSON form');
    return new RawJson(text);
  }

  /** The value, to read fields from. Never serialise it again to pass the payload on. */
  parse(): unknown {
    return JSON.parse(this.text) as unknown;
  }
}

/**
 * JSON.stringify for plain data (objects, arrays, primitives, anything with toJSON such as Date),
 * except that a RawJson anywhere inside is written as its own text. Node 20 has no JSON.rawJSON,
 * and a toJSON method cannot help: whatever it returns is serialised again.
 */
export function stringifyJson(value: unknown): string | undefined {
  if (value instanceof RawJson) return value.text;
  if (typeof value === 'object' && value !== null && typeof (value as { toJSON?: unknown }).toJSON === 'function') {
    return stringifyJson((value as { toJSON(): unknown }).toJSON());
  }
  if (Array.isArray(value)) return `[${value.map((item) => stringifyJson(item) ?? 'null').join(',')}]`;
  if (typeof value === 'object' && value !== null) {
    const members: string[] = [];
    for (const [name, member] of Object.entries(value)) {
      const text = stringifyJson(member);
      if (text !== undefined) members.push(`${JSON.stringify(name)}:${text}`);
    }
    return `{${members.join(',')}}`;
  }
  return JSON.stringify(value);
}
