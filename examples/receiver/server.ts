// A minimal receiver for webhook-relay deliveries: node:http plus the `standardwebhooks` package
// (HMAC, `v1`), or node:crypto for an ed25519 endpoint (`v1a`, verified with its public key).
// Run it with `WEBHOOK_SECRET=whsec_... PORT=4000 npx tsx examples/receiver/server.ts`, or with
// `WEBHOOK_SECRET=whpk_...` (the endpoint's signature.publicKey) for an ed25519 endpoint.
// docs/receiving.md explains every header and the retry schedule this code is written against.
import { createPublicKey, verify, type KeyObject } from 'node:crypto';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Webhook, WebhookVerificationError } from 'standardwebhooks';

/** The JSON body of every delivery. */
export interface WebhookEvent {
  id: string;
  type: string;
  timestamp: string; // when the platform accepted the event (not when this attempt was sent)
  messageId: string | null;
  data: unknown;
}

/** Delivery headers that are not signed input but useful in logs. */
export interface DeliveryInfo {
  deliveryId: string;
  attempt: number;
  replay: boolean;
}

export interface ReceiverOptions {
  /**
   * The endpoint's signing secret, `whsec_...`, as returned when the endpoint was created; or, for
   * an ed25519 endpoint, its public key `whpk_...` (signature.publicKey).
   */
  secret: string;
  /** Called once per webhook-id, after the 2xx has been sent. */
  onEvent: (event: WebhookEvent, delivery: DeliveryInfo) => void | Promise<void>;
}

// Bounded so a stranger cannot make us buffer without limit; well above the relay's 1 MiB intake cap.
const MAX_BODY_BYTES = 2 * 1024 * 1024;

export function createReceiver({ secret, onEvent }: ReceiverOptions): Server {
  const webhook = secret.startsWith('whpk_') ? new Ed25519Webhook(secret) : new Webhook(secret);
  // Demo only. In production this is a table with a unique constraint on webhook_id, and the insert
  // (INSERT ... ON CONFLICT DO NOTHING) happens before the 2xx: a Set is lost on restart and is not
  // shared between instances, so it cannot stop a redelivery that lands on another process.
  const seen = new Set<string>();

  return createServer(async (req, res) => {
    if (req.method !== 'POST') {
      res.writeHead(405, { allow: 'POST' }).end();
      return;
    }
    let body: Buffer | undefined;
    try {
      body = await readBody(req);
    } catch {
      res.destroy(); // the client went away mid-body; there is nobody to answer
      return;
    }
    if (body === undefined) {
      res.writeHead(413).end();
      return;
    }

    let event: WebhookEvent;
    try {
      // Verify the bytes exactly as received: re-serialised JSON would not match the signature.
      // The library also rejects a webhook-timestamp more than 5 minutes from now (replayed captures).
      event = webhook.verify(body, signedHeaders(req)) as WebhookEvent;
    } catch (err) {
      // 4xx is terminal for the sender: a bad signature will not get better by retrying.
      res.writeHead(err instanceof WebhookVerificationError ? 401 : 400).end();
      return;
    }

    // The signed webhook-id is the dedupe key: the event id, the same on every retry and replay.
    const webhookId = req.headers['webhook-id'] as string;
    if (seen.has(webhookId)) {
      // Already have it: our earlier 2xx got lost. Acknowledge again so the sender stops retrying.
      res.writeHead(204).end();
      return;
    }
    seen.add(webhookId);

    // Answer first, work later: a slow handler would hit the sender's timeout and cause a retry.
    res.writeHead(204).end();
    const delivery: DeliveryInfo = {
      deliveryId: String(req.headers['webhook-delivery-id'] ?? ''),
      attempt: Number(req.headers['webhook-attempt'] ?? 1),
      replay: req.headers['webhook-replay'] === 'true',
    };
    // With a database inbox a worker would pick the row up and could retry failed processing.
    Promise.resolve()
      .then(() => onEvent(event, delivery))
      .catch((err: unknown) => console.error(`processing ${webhookId} failed:`, err));
  });
}

/** Standard Webhooks allows this far between webhook-timestamp and now, as the library does for v1. */
const TOLERANCE_SEC = 5 * 60;

/**
 * Verifies `v1a` (Ed25519) signatures as the Standard Webhooks spec defines them: each
 * space-separated entry `v1a,<base64>` is a signature of `<webhook-id>.<webhook-timestamp>.<body>`;
 * one that verifies with the public key is enough (during a key rotation two are sent).
 */
class Ed25519Webhook {
  private readonly key: KeyObject;

  constructor(publicKey: string) {
    const raw = Buffer.from(publicKey.slice('whpk_'.length), 'base64');
    // An Ed25519 SubjectPublicKeyInfo is this fixed DER header followed by the 32 key bytes (RFC 8410).
    const spki = Buffer.concat([Buffer.from('302a300506032b6570032100', 'hex'), raw]);
    this.key = createPublicKey({ key: spki, format: 'der', type: 'spki' });
  }

  verify(body: Buffer, headers: Record<string, string>): unknown {
    const timestamp = Number(headers['webhook-timestamp']);
    if (!Number.isInteger(timestamp) || Math.abs(Date.now() / 1000 - timestamp) > TOLERANCE_SEC) {
      throw new WebhookVerificationError('timestamp missing or too far from now');
    }
    const signed = Buffer.concat([Buffer.from(`${headers['webhook-id']}.${headers['webhook-timestamp']}.`), body]);
    const ok = (headers['webhook-signature'] ?? '')
      .split(' ')
      .filter((entry) => entry.startsWith('v1a,'))
      .some((entry) => verify(null, signed, this.key, Buffer.from(entry.slice(4), 'base64')));
    if (!ok) throw new WebhookVerificationError('no matching v1a signature');
    return JSON.parse(body.toString('utf8'));
  }
}

function signedHeaders(req: IncomingMessage): Record<string, string> {
  const h = (name: string) => (typeof req.headers[name] === 'string' ? (req.headers[name] as string) : '');
  return {
    'webhook-id': h('webhook-id'),
    'webhook-timestamp': h('webhook-timestamp'),
    'webhook-signature': h('webhook-signature'),
  };
}

/** The raw body as bytes, or undefined when it exceeds MAX_BODY_BYTES. */
function readBody(req: IncomingMessage): Promise<Buffer | undefined> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      // Past the cap, keep reading but keep nothing, so the 413 still reaches the client (stopping
      // mid-body would reset the connection, which a sender treats as worth retrying).
      if (size <= MAX_BODY_BYTES) chunks.push(chunk);
    });
    req.on('end', () => resolve(size <= MAX_BODY_BYTES ? Buffer.concat(chunks) : undefined));
    req.on('error', reject);
  });
}

function main(): void {
  const secret = process.env.WEBHOOK_SECRET;
  if (!secret) {
    console.error('WEBHOOK_SECRET is required: the endpoint secret (whsec_...) from POST /v1/endpoints, or its signature.publicKey (whpk_...)');
    process.exit(1);
  }
  const port = Number(process.env.PORT ?? 4000);
  const server = createReceiver({
    secret,
    onEvent: (event, delivery) => console.log(JSON.stringify({ received: event.id, type: event.type, messageId: event.messageId, ...delivery })),
  });
  server.listen(port, () => console.log(`receiver listening on port ${(server.address() as AddressInfo).port}`));
  // Finish requests already in progress so their 2xx reaches the sender; otherwise they are retried.
  process.once('SIGTERM', () => server.close());
  process.once('SIGINT', () => server.close());
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) main();
