import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { documentSpan, elementSpans, memberSpan } from '../../src/domain/json-span.js';
import { jsonText, stringText, whitespace } from '../helpers/json-text.js';

const memberText = (text: string, name: string) => {
  const span = memberSpan(text, name);
  return span && text.slice(span.start, span.end);
};

describe('memberSpan', () => {
  it.each([
    ['a big integer', '{"data":12345678901234567890}', '12345678901234567890'],
    ['negative zero', '{"data":-0.0}', '-0.0'],
    ['an out-of-range exponent', '{"data":1e400}', '1e400'],
    ['a long decimal', '{"data":0.1000000000000000055511151231257827}', '0.1000000000000000055511151231257827'],
    ['escapes left as written', '{"data":"\\u00e9\\ud83d\\ude00\\/"}', '"\\u00e9\\ud83d\\ude00\\/"'],
    ['integer-like keys in their order', '{"data":{"2":1,"1":2}}', '{"2":1,"1":2}'],
    ['whitespace inside, none around', '{ "data" :\n\t{ "a" : [ 1 , 2 ] }\r\n}', '{ "a" : [ 1 , 2 ] }'],
    ['brackets and quotes inside strings', '{"a":"}]\\"{[","data":["]}\\\\",{"x":"{"}],"b":0}', '["]}\\\\",{"x":"{"}]'],
    ['the last member', '{"a":[1,{"b":2}],"data":null}', 'null'],
    ['an escaped name', '{"d\\u0061ta":true}', 'true'],
    ['the last of repeated names, as JSON.parse keeps', '{"data":1,"x":2,"data":[3]}', '[3]'],
  ])('finds %s', (_what, text, expected) => {
    expect(memberText(text, 'data')).toBe(expected);
    expect(JSON.parse(memberText(text, 'data')!)).toEqual(JSON.parse(text).data);
  });

  it.each([
    ['the member is absent', '{"a":1,"b":{"data":2}}'],
    ['the document is an array', '[{"data":1}]'],
    ['the document is a string', '"{\\"data\\":1}"'],
    ['the object is empty', ' { } '],
    ['only a longer name matches the prefix', '{"database":1,"dat":2}'],
  ])('answers undefined when %s', (_what, text) => {
    expect(memberSpan(text, 'data')).toBeUndefined();
  });

  it('scans any depth without recursion', () => {
    const deep = `${'['.repeat(100_000)}${']'.repeat(100_000)}`;
    expect(memberText(`{"data":${deep},"after":1}`, 'after')).toBe('1');
  });

  it('returns exactly the text of the value as written, which parses to what JSON.parse gave the member (property)', () => {
    const member = fc.tuple(whitespace, stringText, whitespace, whitespace, jsonText, whitespace);
    const write = ([a, name, b, c, value, d]: [string, string, string, string, string, string]) => `${a}${name}${b}:${c}${value}${d}`;
    fc.assert(
      fc.property(fc.array(member, { maxLength: 3 }), member, fc.array(member, { maxLength: 3 }), whitespace, whitespace, (before, target, after, lead, trail) => {
        const name = JSON.parse(target[1]) as string;
        // A later member of the same name would be the one JSON.parse keeps.
        const rest = after.filter((m) => JSON.parse(m[1]) !== name);
        const text = `${lead}{${[...before, target, ...rest].map(write).join(',')}}${trail}`;
        const parsed = JSON.parse(text) as Record<string, unknown>;
        expect(memberText(text, name)).toBe(target[4]);
        expect(JSON.parse(target[4])).toEqual(parsed[name]);
      }),
    );
  });

  it('finds every member of any object JSON.stringify writes (property)', () => {
    fc.assert(
      fc.property(fc.dictionary(fc.string(), fc.jsonValue()), (object) => {
        const text = JSON.stringify(object);
        for (const name of Object.keys(object)) expect(JSON.parse(memberText(text, name)!)).toEqual(JSON.parse(JSON.stringify(object[name])));
      }),
    );
  });
});

describe('documentSpan', () => {
  it('is the whole value without the whitespace around it (property)', () => {
    fc.assert(
      fc.property(whitespace, jsonText, whitespace, (lead, value, trail) => {
        const text = `${lead}${value}${trail}`;
        const span = documentSpan(text);
        expect(text.slice(span.start, span.end)).toBe(value);
      }),
    );
  });
});

describe('elementSpans', () => {
  it('is the text of each element as written, in order (property)', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(whitespace, jsonText, whitespace), { maxLength: 5 }), whitespace, whitespace, (items, lead, inner) => {
        const text = `${lead}[${items.length ? items.map((i) => i.join('')).join(',') : inner}]`;
        expect(elementSpans(text).map((s) => text.slice(s.start, s.end))).toEqual(items.map((i) => i[1]));
      }),
    );
  });

  it('is empty when the document is not an array', () => {
    expect(elementSpans('{"a":[1]}')).toEqual([]);
    expect(elementSpans('"[1]"')).toEqual([]);
  });
});
