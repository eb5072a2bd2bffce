import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalJson, digestHex, fallbackDedupeKey } from '../../src/domain/dedupe.js';

describe('canonicalJson', () => {
  it.each([
    [{ b: 1, a: 2 }, '{"a":2,"b":1}'],
    [{ z: { y: 1, x: [3, { d: 1, c: 2 }] }, a: null }, '{"a":null,"z":{"x":[3,{"c":2,"d":1}],"y":1}}'],
    [[2, 1], '[2,1]'],
    ['text "quoted"', '"text \\"quoted\\""'],
    [{ u: undefined, v: 1 }, '{"v":1}'],
    [[undefined], '[null]'],
    [undefined, 'null'],
    [{}, '{}'],
  ])('%j → %s', (value, expected) => {
    expect(canonicalJson(value)).toBe(expected);
  });

  it('does not depend on key order or whitespace of the source text', () => {
    const a = JSON.parse('{"message_id":"m1","status":"sent","meta":{"x":1,"y":[1,2]}}');
    const b = JSON.parse('{ "meta" : { "y" : [1, 2], "x" : 1 },\n "status":"sent", "message_id":"m1" }');
    expect(canonicalJson(a)).toBe(canonicalJson(b));
  });

  it('round-trips to an equal value for any JSON (property)', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        expect(JSON.parse(canonicalJson(value))).toEqual(JSON.parse(JSON.stringify(value)));
      }),
    );
  });

  it('refuses absurdly deep nesting with a RangeError instead of overflowing the stack', () => {
    const deep = JSON.parse('['.repeat(10_000) + ']'.repeat(10_000));
    expect(() => canonicalJson(deep)).toThrow(RangeError);
  });
});

describe('digestHex', () => {
  it('is sha256 hex of the bytes', () => {
    expect(digestHex('abc')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
    expect(digestHex(Buffer.from('abc'))).toBe(digestHex('abc'));
  });
});

describe('fallbackDedupeKey', () => {
  const volatile = ['timestamp', 'signature', 'sent_at'];
  const base = { event: 'account.updated', account: 'a1', plan: 'pro', timestamp: '2026-11-29T10:00:00Z' };

  it('is h: + sha256 of the canonical JSON without volatile fields', () => {
    const expected = createHash('sha256').update('{"account":"a1","event":"account.updated","plan":"pro"}').digest('hex');
    expect(fallbackDedupeKey(base, volatile)).toBe(`h:${expected}`);
  });

  it.each([
    ['a new callback timestamp', { ...base, timestamp: '2026-11-29T10:05:00Z' }],
    ['an added signature', { ...base, signature: 'abc' }],
    ['a nested volatile field', { ...base, extra: { sent_at: 1 } }, { ...base, extra: { sent_at: 2 } }],
    ['reordered keys', { timestamp: base.timestamp, plan: 'pro', account: 'a1', event: 'account.updated' }],
  ])('ignores %s', (_name, changed, reference: object = base) => {
    expect(fallbackDedupeKey(changed, volatile)).toBe(fallbackDedupeKey(reference, volatile));
  });

  it.each([
    ['a business field', { ...base, plan: 'free' }],
    ['the event name', { ...base, event: 'account.deleted' }],
    ['an added field', { ...base, seats: 3 }],
    ['a value type', { ...base, plan: ['pro'] }],
  ])('changes with %s', (_name, changed) => {
    expect(fallbackDedupeKey(changed, volatile)).not.toBe(fallbackDedupeKey(base, volatile));
  });
});
