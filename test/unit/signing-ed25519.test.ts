import { createPublicKey, verify } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  ed25519PrivateKey,
  ed25519PublicKeyText,
  generateEd25519KeyPair,
  generateSigningSecret,
  isEd25519SigningKey,
  signatureHeader,
  signEd25519Webhook,
} from '../../src/domain/signing.js';

// RFC 8032 section 7.1, TEST 1: the private seed and the public key it yields.
const RFC8032 = {
  seed: '9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60',
  publicKey: 'd75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a',
};
const whsk = 'whsk_' + Buffer.from(RFC8032.seed, 'hex').toString('base64');
const spki = (whpk: string) =>
  createPublicKey({ key: Buffer.concat([Buffer.from('302a300506032b6570032100', 'hex'), Buffer.from(whpk.slice(5), 'base64')]), format: 'der', type: 'spki' });

describe('Ed25519 signing keys', () => {
  it('reads a whsk_ seed and shows the RFC 8032 public key as whpk_', () => {
    expect(ed25519PublicKeyText(ed25519PrivateKey(whsk))).toBe('whpk_' + Buffer.from(RFC8032.publicKey, 'hex').toString('base64'));
  });

  it('generates pairs whose texts match each other', () => {
    const pair = generateEd25519KeyPair();
    expect(pair.secretKey).toMatch(/^whsk_[A-Za-z0-9+/]{43}=$/);
    expect(pair.publicKey).toMatch(/^whpk_[A-Za-z0-9+/]{43}=$/);
    expect(ed25519PublicKeyText(ed25519PrivateKey(pair.secretKey))).toBe(pair.publicKey);
    expect(generateSigningSecret('hmac')).toEqual({ secret: expect.stringMatching(/^whsec_/), publicKey: null });
    expect(generateSigningSecret('ed25519').secret).toMatch(/^whsk_/);
  });

  it('refuses anything but a whsk_ text of a 32-byte seed', () => {
    expect(() => ed25519PrivateKey('whsec_' + Buffer.alloc(32).toString('base64'))).toThrow();
    expect(() => ed25519PrivateKey('whsk_' + Buffer.alloc(31).toString('base64'))).toThrow();
    expect(isEd25519SigningKey(whsk)).toBe(true);
    expect(isEd25519SigningKey('whsec_abc')).toBe(false);
  });
});

describe('signEd25519Webhook', () => {
  const publicKey = spki(ed25519PublicKeyText(ed25519PrivateKey(whsk)));
  const content = (id: string, ts: number, body: string) => Buffer.from(`${id}.${ts}.${body}`, 'utf8');

  it('signs "<id>.<timestamp>.<body>" as v1a, verifiable with the public key', () => {
    const signature = signEd25519Webhook(ed25519PrivateKey(whsk), 'msg_1', 1614265330, '{"a":"é"}');
    expect(signature).toMatch(/^v1a,[A-Za-z0-9+/]{86}==$/);
    const bytes = Buffer.from(signature.slice(4), 'base64');
    expect(verify(null, content('msg_1', 1614265330, '{"a":"é"}'), publicKey, bytes)).toBe(true);
    expect(verify(null, content('msg_1', 1614265331, '{"a":"é"}'), publicKey, bytes)).toBe(false);
    // Ed25519 is deterministic, and a Buffer body signs the same bytes as its text.
    expect(signEd25519Webhook(ed25519PrivateKey(whsk), 'msg_1', 1614265330, Buffer.from('{"a":"é"}'))).toBe(signature);
  });

  it('puts one entry per active secret in the header, each in its own scheme', () => {
    const parsed: string[] = [];
    const header = signatureHeader([whsk, 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw'], 'msg_p5jXN8AQM9LWM0D4loKWxJek', 1614265330, '{"test": 2432232314}', (s) => {
      parsed.push(s);
      return ed25519PrivateKey(s);
    });
    const [v1a, v1] = header.split(' ');
    expect(v1a).toMatch(/^v1a,/);
    expect(v1).toBe('v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=');
    expect(parsed).toEqual([whsk]);
  });
});
