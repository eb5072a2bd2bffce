import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { indentJson, jsonTextAt } from '../../portal/src/browse/json-text.js';
import { jsonText, whitespace } from '../helpers/json-text.js';

/** The text with whitespace outside strings removed: the tokens, as written. */
const tokens = (text: string) => text.replace(/("(?:[^"\\]|\\.)*")|\s+/g, (_m, str: string | undefined) => str ?? '');

describe('the portal’s JSON as written', () => {
  it('reads a value by member names and indexes, exactly as written', () => {
    const answer = '{"data":[{"latest":{"data":{"n":12345678901234567890.10,"s":"caf\\u00e9"}}},{"latest":{"data":[ 1e400 ]}}],"truncated":false}';
    expect(jsonTextAt(answer, ['data', 0, 'latest', 'data'])).toBe('{"n":12345678901234567890.10,"s":"caf\\u00e9"}');
    expect(jsonTextAt(answer, ['data', 1, 'latest', 'data'])).toBe('[ 1e400 ]');
    expect(jsonTextAt(answer, ['data', 2, 'latest'])).toBeUndefined();
    expect(jsonTextAt(answer, ['missing'])).toBeUndefined();
  });

  it('indents without changing a token: same value, same digits and escapes (property)', () => {
    fc.assert(
      fc.property(whitespace, jsonText, whitespace, (lead, value, trail) => {
        const indented = indentJson(`${lead}${value}${trail}`);
        expect(tokens(indented)).toBe(tokens(value));
        expect(JSON.parse(indented)).toEqual(JSON.parse(value));
      }),
    );
  });

  it('indents two spaces a level and keeps empty containers on one line', () => {
    expect(indentJson('{"a":[1,{}],"b":[ ],"c":{"d":"x, {y}"}}')).toBe('{\n  "a": [\n    1,\n    {}\n  ],\n  "b": [],\n  "c": {\n    "d": "x, {y}"\n  }\n}');
  });
});
