import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { RecentMap } from './recent.js';

/**
 * AES-256-GCM for secrets at rest. Stored form: `v1:` + base64(iv | tag | ciphertext).
 * The record id is bound as additional data, so a ciphertext copied onto another row fails to open.
 */
export class SecretBox {
  /**
   * Opened secrets by stored form: a worker signs every attempt with its endpoint's secret, and
   * AES-GCM per attempt showed up in profiles. A stored form always opens to the same plaintext
   * (rotation writes a new one with a fresh IV), so entries never go stale; the bound keeps memory flat.
   */
  private readonly opened = new RecentMap<string>(10_000);

  constructor(private readonly key: Buffer) {
    if (key.length !== 32) throw new Error('SECRETS_KEY must be 32 bytes');
  }

  seal(plaintext: string, boundTo: string): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv);
    cipher.setAAD(Buffer.from(boundTo));
    const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    return `v1:${Buffer.concat([iv, cipher.getAuthTag(), body]).toString('base64')}`;
  }

  open(sealed: string, boundTo: string): string {
    const cacheKey = `${boundTo}\u0000${sealed}`;
    const known = this.opened.get(cacheKey);
    if (known !== undefined) return known;
    const plaintext = this.decrypt(sealed, boundTo);
    this.opened.set(cacheKey, plaintext);
    return plaintext;
  }

  private decrypt(sealed: string, boundTo: string): string {
    if (!sealed.startsWith('v1:')) throw new Error('unknown secret format');
    const raw = Buffer.from(sealed.slice(3), 'base64');
    const decipher = createDecipheriv('aes-256-gcm', this.key, raw.subarray(0, 12));
    decipher.setAAD(Buffer.from(boundTo));
    decipher.setAuthTag(raw.subarray(12, 28));
    return Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]).toString('utf8');
  }
}
