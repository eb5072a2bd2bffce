import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { SecretBox } from '../../src/domain/secret-box.js';

describe('SecretBox', () => {
  const box = new SecretBox(randomBytes(32));

  it('opens what it sealed, the same on every call', () => {
    const sealed = box.seal('whsec_abc', 'ep_1');
    expect(sealed).toMatch(/^v1:/);
    expect(box.open(sealed, 'ep_1')).toBe('whsec_abc');
    expect(box.open(sealed, 'ep_1')).toBe('whsec_abc');
  });

  it('refuses a ciphertext copied onto another record, also after it was opened for its own', () => {
    const sealed = box.seal('whsec_xyz', 'ep_a');
    expect(box.open(sealed, 'ep_a')).toBe('whsec_xyz');
    expect(() => box.open(sealed, 'ep_b')).toThrow();
  });

  it('refuses a ciphertext sealed with another key, and a tampered one', () => {
    const other = new SecretBox(randomBytes(32));
    expect(() => box.open(other.seal('s', 'ep_1'), 'ep_1')).toThrow();
    const sealed = box.seal('secret', 'ep_2');
    const raw = Buffer.from(sealed.slice(3), 'base64');
    raw.writeUInt8(raw.readUInt8(raw.length - 1) ^ 1, raw.length - 1);
    expect(() => box.open(`v1:${raw.toString('base64')}`, 'ep_2')).toThrow();
  });

  it('keeps opening correctly past its cache bound', () => {
    const sealed = Array.from({ length: 10_050 }, (_, i) => box.seal(`s${i}`, `ep_${i}`));
    sealed.forEach((s, i) => expect(box.open(s, `ep_${i}`)).toBe(`s${i}`));
    expect(box.open(sealed[0]!, 'ep_0')).toBe('s0');
  });
});
