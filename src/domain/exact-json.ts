/**
 * JSON read with every number kept as the text the sender wrote: JSON.parse turns
 * 12345678901234567890 into 12345678901234567000, and a value compared against a filter must be
 * the one the tenant meant. Only for texts JSON.parse has accepted (it checks nothing itself).
 */

/** A JSON number, as written. */
export class JsonNumber {
  constructor(readonly text: string) {}
}

export type ExactJson = null | boolean | string | JsonNumber | ExactJson[] | { [name: string]: ExactJson };

export function parseExactJson(text: string): ExactJson {
  let i = 0;
  const skip = () => {
    while (i < text.length && ' \t\n\r'.includes(text[i]!)) i++;
  };
  const string = (): string => {
    const start = i++;
    while (text[i] !== '"') i += text[i] === '\\' ? 2 : 1;
    i++;
    return JSON.parse(text.slice(start, i)) as string;
  };
  const value = (): ExactJson => {
    skip();
    const c = text[i];
    if (c === '"') return string();
    if (c === '{') {
      // A null prototype, so a member named __proto__ is a member like any other.
      const object: { [name: string]: ExactJson } = Object.create(null) as { [name: string]: ExactJson };
      i++;
      skip();
      while (text[i] !== '}') {
        skip();
        const name = string();
        skip();
        i++; // the colon
        object[name] = value();
        skip();
        if (text[i] === ',') i++;
      }
      i++;
      return object;
    }
    if (c === '[') {
      const array: ExactJson[] = [];
      i++;
      skip();
      while (text[i] !== ']') {
        array.push(value());
        skip();
        if (text[i] === ',') i++;
      }
      i++;
      return array;
    }
    for (const [word, v] of [['true', true], ['false', false], ['null', null]] as const) {
      if (text.startsWith(word, i)) {
        i += word.length;
        return v;
      }
    }
    const start = i;
    while (i < text.length && /[-+0-9.eE]/.test(text[i]!)) i++;
    return new JsonNumber(text.slice(start, i));
  };
  return value();
}

/** A value JSON.parse made, in the same form (its numbers as JSON.stringify writes them). */
export function toExactJson(value: unknown): ExactJson {
  if (typeof value === 'number') return new JsonNumber(JSON.stringify(value));
  if (Array.isArray(value)) return value.map(toExactJson);
  if (typeof value === 'object' && value !== null) {
    const object: { [name: string]: ExactJson } = Object.create(null) as { [name: string]: ExactJson };
    for (const [name, member] of Object.entries(value)) object[name] = toExactJson(member);
    return object;
  }
  return value as ExactJson;
}
