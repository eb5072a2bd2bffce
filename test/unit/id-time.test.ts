import { describe, expect, it } from 'vitest';
import { newId, uuidOf } from '../../src/domain/ids.js';
import { eventsKeptFromId, typeIdTime, uuidFloor, uuidTime } from '../../src/domain/retention.js';

describe('the time an id carries, stored as a uuid or as a TypeID', () => {
  it('reads back the millisecond a floor was cut at, for any time a key may hold', () => {
    for (const at of [new Date(0), new Date('2026-12-06T00:00:00.000Z'), new Date('2026-12-06T13:45:07.891Z'), new Date(2 ** 48 - 1)]) {
      expect(uuidTime(uuidFloor(at))).toEqual(at);
    }
  });

  it('is the same time for an id as a TypeID and as the uuid it encodes', () => {
    const before = Date.now();
    for (const kind of ['event', 'delivery', 'tenant'] as const) {
      const id = newId(kind);
      const at = uuidTime(uuidOf(kind, id))!;
      expect(at).toEqual(typeIdTime(id));
      expect(at.getTime()).toBeGreaterThanOrEqual(before);
      expect(at.getTime()).toBeLessThanOrEqual(Date.now());
    }
  });

  it('answers undefined for anything that is not a uuid as PostgreSQL writes one', () => {
    for (const value of ['', 'evt_01m96a0000f000000000000000', '01A24C96-66E3-7CC0-AC2A-66C0C018BBAA', '01a24c9666e37cc0ac2a66c0c018bbaa', `${uuidFloor(new Date())}0`]) {
      expect({ value, at: uuidTime(value) }).toEqual({ value, at: undefined });
    }
  });

  it('keeps every event before any removal, and none made before the watermark after one', () => {
    expect(eventsKeptFromId(undefined)).toBe('00000000-0000-0000-0000-000000000000');
    const watermark = new Date('2026-11-06T00:00:00.000Z');
    expect(eventsKeptFromId(watermark)).toBe(uuidFloor(watermark));
    expect(uuidOf('event', newId('event')) >= eventsKeptFromId(watermark)).toBe(true);
  });
});
