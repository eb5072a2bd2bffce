import { describe, expect, it } from 'vitest';
import { advances, isFinal, messageStatus } from '../../src/domain/message-status.js';

describe('messageStatus', () => {
  it.each([
    ['accepted', 1, false],
    ['sent', 2, false],
    ['delivered', 3, true],
    ['failed', 3, true],
    ['undelivered', 3, true],
  ])('%s has rank %i, final %s', (value, rank, final) => {
    expect(messageStatus(value)).toEqual({ value, rank, final });
    expect(isFinal(value)).toBe(final);
  });

  it.each(['queued', 'Delivered', '', 'constructor', '__proto__', 'toString'])('%j is unknown', (value) => {
    expect(messageStatus(value)).toBeUndefined();
    expect(isFinal(value)).toBe(false);
  });
});

describe('advances', () => {
  const s = (value: string) => messageStatus(value)!;
  it.each([
    [undefined, 'accepted', true],
    [undefined, 'delivered', true],
    ['accepted', 'sent', true],
    ['accepted', 'failed', true],
    ['sent', 'delivered', true],
    ['sent', 'accepted', false],
    ['delivered', 'sent', false],
    ['delivered', 'failed', false],
    ['sent', 'sent', false],
  ])('from %s to %s → %s', (current, next, expected) => {
    expect(advances(current === undefined ? undefined : s(current), s(next))).toBe(expected);
  });
});
