import { describe, expect, it } from 'vitest';
import { excerptOf } from '../../src/outbound/http-client.js';

/** The stored excerpt of a receiver's answer, from the chunks the body arrived in. */
const bytes = (...parts: Array<string | number[]>) => parts.map((p) => (typeof p === 'string' ? Buffer.from(p, 'utf8') : Buffer.from(p)));

describe('response excerpt', () => {
  it('an empty body, or no room for an excerpt, is the empty string', () => {
    expect(excerptOf([], 2048)).toBe('');
    expect(excerptOf(bytes('ok'), 0)).toBe('');
  });

  it('joins the chunks and cuts at the byte limit', () => {
    expect(excerptOf(bytes('ab', 'cd', 'ef'), 5)).toBe('abcde');
    expect(excerptOf(bytes('plain'), 2048)).toBe('plain');
  });

  it.each([
    ['2-byte é', 'é', 1],
    ['3-byte €', '€', 2],
    ['4-byte 😀', '😀', 3],
  ])('leaves out a %s that the limit cuts short, whatever chunk it started in', (_name, ch, cutAfter) => {
    const whole = Buffer.from(`x${ch}`, 'utf8');
    expect(excerptOf([whole], 1 + cutAfter)).toBe('x');
    expect(excerptOf([whole.subarray(0, 2), whole.subarray(2)], 1 + cutAfter)).toBe('x');
    expect(excerptOf([whole], whole.length)).toBe(`x${ch}`);
  });

  it('drops NULs and keeps invalid bytes inside the excerpt as U+FFFD, as a decoder would', () => {
    expect(excerptOf(bytes('a\u0000b'), 100)).toBe('ab');
    expect(excerptOf(bytes([0x61, 0xff, 0x62]), 100)).toBe('a\uFFFDb');
  });
});
