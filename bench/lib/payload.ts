import { randomUUID } from 'node:crypto';
import { hmacSha256Hex } from '../../src/domain/signing.js';

/** A business payload of about `bytes` bytes of JSON: a few typed fields and a filler note. */
export function payloadData(n: number, bytes: number): Record<string, unknown> {
  const base = {
    orderId: `ord_${n}`,
    amount: 1000 + (n % 9000),
    currency: 'EUR',
    customer: { id: `cus_${n % 1000}`, country: 'DE' },
    items: [{ sku: 'sku_1', qty: 1 + (n % 3) }],
  };
  const used = JSON.stringify(base).length + 10;
  return { ...base, note: 'x'.repeat(Math.max(0, bytes - used)) };
}

export interface SignedSource {
  id: string;
  secret: string;
  subscription: string;
}

export interface PreparedRequest {
  path: string;
  headers: Record<string, string>;
  body: string;
}

/**
 * One momo-automation callback exactly as the provider sends it: a distinct event id, the business
 * payload wrapped in `data`, signed `t=<unix seconds>,v1=<hex HMAC of "t.body">`.
 */
export function signedCallback(source: SignedSource, n: number, payloadBytes: number, t = Math.floor(Date.now() / 1000)): PreparedRequest {
  const body = JSON.stringify({
    id: randomUUID(),
    event: 'order.created',
    subject: { id: `ord_${n}`, type: 'order' },
    actor: { id: 'user_1' },
    subscription: { id: source.subscription },
    data: payloadData(n, payloadBytes),
  });
  return {
    path: `/inbound/${source.id}`,
    headers: {
      'content-type': 'application/json',
      'x-momo-signature': `t=${t},v1=${hmacSha256Hex(source.secret, `${t}.${body}`)}`,
    },
    body,
  };
}

/** The n-th event published through `POST /v1/events`, with a fresh Idempotency-Key. */
export function publishRequest(apiKey: string, n: number, type: string, payloadBytes: number): PreparedRequest {
  return {
    path: '/v1/events',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${apiKey}`, 'idempotency-key': randomUUID() },
    body: JSON.stringify({ type, messageId: `ord_${n}`, data: payloadData(n, payloadBytes) }),
  };
}

/** `count` distinct callbacks spread round-robin over the sources, generated before any load runs. */
export function signedCallbacks(sources: SignedSource[], count: number, payloadBytes: number, offset = 0): PreparedRequest[] {
  const t = Math.floor(Date.now() / 1000);
  const out: PreparedRequest[] = new Array(count);
  for (let i = 0; i < count; i++) out[i] = signedCallback(sources[i % sources.length]!, offset + i, payloadBytes, t);
  return out;
}
