import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { memberSpan } from '../../src/domain/json-span.js';
import { RawJson, stringifyJson } from '../../src/domain/raw-json.js';
import { jsonText } from '../helpers/json-text.js';

describe('stringifyJson', () => {
  it('embeds RawJson text verbatim, wherever it sits', () => {
    const value = {
      id: 'evt_1',
      data: new RawJson('{"big":12345678901234567890,"price":1.10}'),
      list: [new RawJson('-0.0'), 1, new RawJson('{"2":1,"1":2}')],
      at: new Date(0),
    };
    expect(stringifyJson(value)).toBe(
      '{"id":"evt_1","data":{"big":12345678901234567890,"price":1.10},"list":[-0.0,1,{"2":1,"1":2}],"at":"1970-01-01T00:00:00.000Z"}',
    );
  });

  it('writes anything else exactly as JSON.stringify does (property)', () => {
    const plain = fc.oneof(fc.jsonValue(), fc.date({ noInvalidDate: true }), fc.constant(undefined));
    const value = fc.oneof(plain, fc.array(plain), fc.dictionary(fc.string(), plain), fc.dictionary(fc.string(), fc.array(fc.dictionary(fc.string(), plain))));
    fc.assert(
      fc.property(value, (v) => {
        expect(stringifyJson(v)).toBe(JSON.stringify(v));
      }),
    );
  });

  it('gives back the very text embedded, for any JSON text (property)', () => {
    fc.assert(
      fc.property(fc.jsonValue(), jsonText, (context, text) => {
        const written = stringifyJson({ context, data: new RawJson(text) })!;
        const span = memberSpan(written, 'data')!;
        expect(written.slice(span.start, span.end)).toBe(text);
      }),
    );
  });
});

describe('RawJson', () => {
  it('of() holds what JSON.stringify writes for values the platform makes', () => {
    expect(RawJson.of({ endpointId: 'ep_1', attempts: 3, lastError: 'a "quoted" reason' }).text).toBe(
      '{"endpointId":"ep_1","attempts":3,"lastError":"a \\"quoted\\" reason"}',
    );
    expect(() => RawJson.of(undefined)).toThrow(TypeError);
  });

  it('parse() reads the value', () => {
    expect(new RawJson('{"a":[1,"x"]}').parse()).toEqual({ a: [1, 'x'] });
  });
});
