import { randomUUID } from 'node:crypto';
import { TypeID } from 'typeid-js';
import { describe, expect, it } from 'vitest';
import { idOfUuid, newId, newStoredId, uuidOf, uuidOfId } from '../../src/domain/ids.js';

describe('ids stored as uuid', () => {
  it('gives back every TypeID from the uuid it encodes, and sorts both alike', () => {
    const ids = Array.from({ length: 2_000 }, () => newId('endpoint'));
    const uuids = ids.map((id) => uuidOf('endpoint', id));
    expect(uuids.every((u) => /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/.test(u))).toBe(true);
    expect(uuids.map((u) => idOfUuid('endpoint', u))).toEqual(ids);
    const byId = [...ids].sort();
    expect(byId.map((id) => uuidOf('endpoint', id))).toEqual([...uuids].sort());
  });

  it('answers as typeid-js does, for the ids the platform makes and for any uuid', () => {
    const ids = Array.from({ length: 5_000 }, () => newId('endpoint'));
    expect(ids.map((id) => uuidOf('endpoint', id))).toEqual(ids.map((id) => TypeID.fromString(id, 'ep').toUUID()));
    const uuids = Array.from({ length: 5_000 }, () => randomUUID());
    expect(uuids.map((u) => idOfUuid('endpoint', u))).toEqual(uuids.map((u) => TypeID.fromUUID('ep', u).toString()));
    expect(uuids.map((u) => uuidOf('endpoint', idOfUuid('endpoint', u)))).toEqual(uuids);
  });

  it('makes stored ids as TypeIDs would hold them: UUIDv7s of now, in creation order', () => {
    const before = Date.now();
    const made = Array.from({ length: 5_000 }, newStoredId);
    const after = Date.now();
    expect(new Set(made).size).toBe(made.length);
    expect([...made].sort()).toEqual(made);
    for (const id of made) {
      expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
      const ms = parseInt(id.replaceAll('-', '').slice(0, 12), 16);
      expect(ms).toBeGreaterThanOrEqual(before);
      expect(ms).toBeLessThanOrEqual(after);
      expect(uuidOf('delivery', idOfUuid('delivery', id))).toBe(id);
    }
    // Beside ids typeid-js makes at the same time: one sequence, whichever made the id.
    const mixed = [newStoredId(), uuidOf('delivery', newId('delivery')), newStoredId()];
    expect([...mixed].sort()).toEqual(mixed);
  });

  it('reads the extremes of the 128 bits', () => {
    expect(uuidOf('endpoint', 'ep_00000000000000000000000000')).toBe('00000000-0000-0000-0000-000000000000');
    expect(uuidOf('endpoint', 'ep_7zzzzzzzzzzzzzzzzzzzzzzzzz')).toBe('ffffffff-ffff-ffff-ffff-ffffffffffff');
    expect(idOfUuid('endpoint', 'ffffffff-ffff-ffff-ffff-ffffffffffff')).toBe('ep_7zzzzzzzzzzzzzzzzzzzzzzzzz');
  });

  it('answers null for what names no id of that kind, so that a request for it answers 404', () => {
    const other = newId('event');
    for (const value of [other, 'ep_', 'ep_abc', 'ep_8zzzzzzzzzzzzzzzzzzzzzzzzz', 'ep_01H455VB4PEX5VSKNK084SN02Q', 'ep_01h455vb4pex5vsknk084sn0iq', `ep_${'0'.repeat(60)}`, '']) {
      expect({ value, uuid: uuidOfId('endpoint', value) }).toEqual({ value, uuid: null });
    }
    expect(() => uuidOf('endpoint', other)).toThrow(TypeError);
  });
});
