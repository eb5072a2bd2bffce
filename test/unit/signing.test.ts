import { createHmac } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { describe, expect, it } from 'vitest';
import {
  constantTimeEqual,
  decodeWebhookSecret,
  generateHexSecret,
  generateWebhookSecret,
  hexDigestEqual,
  hmacSha256Hex,
  signatureHeader,
  signStandardWebhook,
  verifyStandardWebhook,
} from '../../src/domain/signing.js';

// The Standard Webhooks specification's published test vector.
const SPEC = {
  secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
  id: 'msg_p5jXN8AQM9LWM0D4loKWxJek',
  timestamp: 1614265330,
  body: '{"test": 2432232314}',
  signature: 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=',
};

describe('hmacSha256Hex', () => {
  it('matches an independently computed HMAC with the secret as UTF-8 text', () => {
    const body = Buffer.from('{"event":"message.status"}');
    const expected = createHmac('sha256', Buffer.from('sécret', 'utf8')).update(body).digest('hex');
    expect(hmacSha256Hex('sécret', body)).toBe(expected);
    expect(hmacSha256Hex('sécret', body)).toMatch(/^[0-9a-f]{64}$/);
  });

  it('matches the RFC 4231 test case 2', () => {
    expect(hmacSha256Hex('Jefe', Buffer.from('what do ya want for nothing?'))).toBe(
      '5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843',
    );
  });
});

describe('constantTimeEqual', () => {
  it.each([
    ['abc', 'abc', true],
    ['abc', 'abd', false],
    ['abc', 'abcd', false],
    ['', '', true],
    ['', 'a', false],
    ['é', 'e', false],
  ])('%j vs %j → %s', (a, b, expected) => {
    expect(constantTimeEqual(a, b)).toBe(expected);
  });
});

describe('hexDigestEqual', () => {
  const digest = '5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843';
  it.each([
    ['the same lowercase hex', digest, true],
    ['uppercase hex of the same digest', digest.toUpperCase(), true],
    ['mixed case', digest.slice(0, 32).toUpperCase() + digest.slice(32), true],
    ['one nibble different', `${digest.slice(0, 63)}4`, false],
    ['one character short', digest.slice(0, 63), false],
    ['one character long', `${digest}0`, false],
    ['non-hex of the right length', `${digest.slice(0, 63)}g`, false],
    // Buffer.from(hex) stops at the first non-hex pair; the format check must not let that truncate.
    ['hex followed by garbage of the right length', `${digest.slice(0, 62)}zz`, false],
    ['a sha256= prefix', `sha256=${digest.slice(7)}`, false],
    ['empty', '', false],
  ])('%s → %s', (_name, received, expected) => expect(hexDigestEqual(received, digest)).toBe(expected));
});

describe('Standard Webhooks signing', () => {
  it('reproduces the specification test vector', () => {
    expect(signStandardWebhook(SPEC.secret, SPEC.id, SPEC.timestamp, SPEC.body)).toBe(SPEC.signature);
    expect(signStandardWebhook(SPEC.secret, SPEC.id, SPEC.timestamp, Buffer.from(SPEC.body))).toBe(SPEC.signature);
  });

  it('decodes the whsec_ secret to its key bytes', () => {
    expect(decodeWebhookSecret(SPEC.secret).toString('base64')).toBe('MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw');
    expect(decodeWebhookSecret('MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw')).toEqual(decodeWebhookSecret(SPEC.secret));
  });

  it('is verified by the reference standardwebhooks library', () => {
    const secret = generateWebhookSecret();
    const body = JSON.stringify({ id: 'evt_1', type: 'message.status', data: { ünicode: '✓' } });
    const timestamp = Math.floor(Date.now() / 1000);
    const headers = {
      'webhook-id': 'evt_1',
      'webhook-timestamp': String(timestamp),
      'webhook-signature': signStandardWebhook(secret, 'evt_1', timestamp, body),
    };
    expect(new Webhook(secret).verify(body, headers)).toEqual(JSON.parse(body));
  });

  it('verifies what the reference library signs', () => {
    const secret = generateWebhookSecret();
    const when = new Date(1_700_000_000_000);
    const signature = new Webhook(secret).sign('msg_1', when, '{"a":1}');
    expect(verifyStandardWebhook(secret, 'msg_1', 1_700_000_000, '{"a":1}', signature)).toBe(true);
  });

  it('puts one signature per active secret in the header, verifiable by each secret', () => {
    const [oldSecret, newSecret] = [generateWebhookSecret(), generateWebhookSecret()];
    const header = signatureHeader([oldSecret, newSecret], 'evt_2', 1_700_000_000, 'body');
    const parts = header.split(' ');
    expect(parts).toHaveLength(2);
    expect(parts[0]).toBe(signStandardWebhook(oldSecret, 'evt_2', 1_700_000_000, 'body'));
    expect(parts[1]).toBe(signStandardWebhook(newSecret, 'evt_2', 1_700_000_000, 'body'));
    expect(verifyStandardWebhook(oldSecret, 'evt_2', 1_700_000_000, 'body', header)).toBe(true);
    expect(verifyStandardWebhook(newSecret, 'evt_2', 1_700_000_000, 'body', header)).toBe(true);
    expect(verifyStandardWebhook(generateWebhookSecret(), 'evt_2', 1_700_000_000, 'body', header)).toBe(false);
  });

  const good = SPEC.signature;
  it.each([
    ['the exact signature', good, true],
    ['it among other versions and garbage', `v1a,xyz ${good} nonsense`, true],
    ['another v1 signature only', 'v1,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=', false],
    ['the signature with a wrong version', good.replace('v1,', 'v2,'), false],
    ['the bare base64 without a version', good.slice(3), false],
    ['an empty header', '', false],
  ])('verify with %s → %s', (_name, header, expected) => {
    expect(verifyStandardWebhook(SPEC.secret, SPEC.id, SPEC.timestamp, SPEC.body, header)).toBe(expected);
  });

  it.each([
    ['id', { id: 'msg_other' }],
    ['timestamp', { timestamp: SPEC.timestamp + 1 }],
    ['body (one byte)', { body: '{"test": 2432232315}' }],
  ])('rejects a changed %s', (_name, change) => {
    const input = { ...SPEC, ...change };
    expect(verifyStandardWebhook(SPEC.secret, input.id, input.timestamp, input.body, SPEC.signature)).toBe(false);
  });

  it('refuses an empty key, which would authenticate nothing', () => {
    const forged = `v1,${createHmac('sha256', Buffer.alloc(0)).update('i.1.b').digest('base64')}`;
    expect(verifyStandardWebhook('whsec_', 'i', 1, 'b', forged)).toBe(false);
  });
});

describe('secret generation', () => {
  it('makes whsec_ secrets of 24 random bytes', () => {
    const secret = generateWebhookSecret();
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{32}$/);
    expect(decodeWebhookSecret(secret)).toHaveLength(24);
    expect(generateWebhookSecret()).not.toBe(secret);
  });

  it('makes hex secrets of the requested size', () => {
    expect(generateHexSecret()).toMatch(/^[0-9a-f]{64}$/);
    expect(generateHexSecret(16)).toMatch(/^[0-9a-f]{32}$/);
    expect(generateHexSecret()).not.toBe(generateHexSecret());
  });
});
