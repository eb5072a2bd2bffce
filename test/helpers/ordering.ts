// Helpers for per-message ordering tests: a receiver that knows which message each request is about
// (from the delivered body's messageId), answers per a verdict function, holds requests briefly so
// concurrency is observable, and a checker for "each message's events arrive in order".
import type { ServerResponse } from 'node:http';
import { expect } from 'vitest';
import { startReceiver, type ReceivedRequest, type Receiver } from './receiver.js';
import type { TestTenant } from './platform.js';

export interface Arrival {
  eventId: string;
  messageId: string | null;
  type: string;
  /** The receiver's verdict: it answered (or meant to answer) 2xx. */
  ok: boolean;
  replay: boolean;
  at: number;
}

/** The receiver's answer to one request: a status (2xx = accepted), optional headers. */
export type Verdict = { status: number; headers?: Record<string, string> };

export interface MessageReceiver {
  receiver: Receiver;
  url: string;
  arrivals: Arrival[];
  /** Requests being held right now. */
  inFlight(): number;
  /** The most requests of one message that were ever held at the same time. */
  maxInFlightPerMessage(): number;
  /** The most distinct messages that ever had a request held at the same time. */
  maxMessagesInFlight(): number;
  /** The most requests (any message, or none) held at the same time. */
  maxInFlight(): number;
  /** Distinct event ids that were answered 2xx at least once. */
  delivered(): Set<string>;
  setVerdict(v: (a: Omit<Arrival, 'ok' | 'at'>, index: number) => Verdict): void;
  close(): Promise<void>;
}

export const OK: Verdict = { status: 200 };
export const FAIL: Verdict = { status: 500 };

/** How long the receiver holds one request before answering: milliseconds, or until a promise settles. */
export type Hold = (a: Omit<Arrival, 'ok' | 'at'>, index: number) => number | Promise<unknown>;

/**
 * A real loopback receiver. Each request is held (see `Hold`) before it is answered, so requests
 * that overlap in time really overlap at the receiver. The verdict is decided (and recorded) when the
 * request arrives: a request whose answer is lost because the platform's worker was killed still
 * counts as received, the way a real receiver would have processed it.
 */
export async function startMessageReceiver(hold: Hold = () => 10): Promise<MessageReceiver> {
  const arrivals: Arrival[] = [];
  const perMessage = new Map<string, number>();
  let held = 0;
  let maxPerMessage = 0;
  let maxMessages = 0;
  let maxHeld = 0;
  let verdict: (a: Omit<Arrival, 'ok' | 'at'>, index: number) => Verdict = () => OK;

  const responder = (req: ReceivedRequest, res: ServerResponse, index: number) => {
    const body = JSON.parse(req.body) as { id: string; type: string; messageId: string | null };
    const base = { eventId: body.id, messageId: body.messageId, type: body.type, replay: req.headers['webhook-replay'] === 'true' };
    const answer = verdict(base, index);
    arrivals.push({ ...base, ok: answer.status >= 200 && answer.status < 300, at: req.at });
    const key = body.messageId ?? `(none) ${body.id}`;
    perMessage.set(key, (perMessage.get(key) ?? 0) + 1);
    held++;
    maxHeld = Math.max(maxHeld, held);
    maxPerMessage = Math.max(maxPerMessage, perMessage.get(key)!);
    maxMessages = Math.max(maxMessages, [...perMessage.entries()].filter(([k, n]) => n > 0 && !k.startsWith('(none)')).length);
    const answerNow = () => {
      held--;
      perMessage.set(key, perMessage.get(key)! - 1);
      if (!res.destroyed) res.writeHead(answer.status, answer.headers ?? {}).end();
    };
    const wait = hold(base, index);
    if (typeof wait === 'number') setTimeout(answerNow, wait);
    else void wait.finally(answerNow);
  };
  const receiver = await startReceiver(responder);
  return {
    receiver,
    url: `${receiver.url}/hook`,
    arrivals,
    inFlight: () => held,
    maxInFlightPerMessage: () => maxPerMessage,
    maxMessagesInFlight: () => maxMessages,
    maxInFlight: () => maxHeld,
    delivered: () => new Set(arrivals.filter((a) => a.ok).map((a) => a.eventId)),
    setVerdict: (v) => {
      verdict = v;
    },
    close: () => receiver.close(),
  };
}

/**
 * Checks what the receiver saw of each message against the order its events must arrive in, and
 * returns every violation (empty = in order and complete). Per message, in arrival order:
 * - no request for an event may arrive before every earlier event was received with a 2xx;
 * - after that, the only repeats allowed are of the newest received event (an attempt whose 2xx the
 *   platform never heard, e.g. because the worker was killed, is retried before anything later);
 * - in the end every event was received with a 2xx.
 */
export function orderViolations(expected: Map<string, string[]>, arrivals: Arrival[]): string[] {
  const problems: string[] = [];
  for (const [messageId, events] of expected) {
    let done = 0; // events[0..done) have been received with a 2xx
    let last = -1;
    for (const a of arrivals.filter((x) => x.messageId === messageId)) {
      const index = events.indexOf(a.eventId);
      if (index === -1) {
        problems.push(`${messageId}: unexpected event ${a.eventId}`);
      } else if (index > done) {
        problems.push(`${messageId}: event #${index} arrived before #${done} was received`);
      } else if (index < last) {
        problems.push(`${messageId}: event #${index} arrived again after #${last}`);
      }
      last = Math.max(last, index);
      if (a.ok && index === done) done++;
    }
    if (done !== events.length) problems.push(`${messageId}: only ${done} of ${events.length} events were received`);
  }
  return problems;
}

/** Per message, its events' ids in the order they must arrive, for `orderViolations`. */
export function expectInOrder(expected: Map<string, string[]>, arrivals: Arrival[]): void {
  expect(orderViolations(expected, arrivals)).toEqual([]);
}

/**
 * Publishes `types.length` events for each message through POST /v1/events: the events of one
 * message one after another (each waits for its 202, so acceptance order is the list order), all
 * messages at the same time. Returns, per message, the event ids in acceptance order.
 */
export async function publishPerMessage(tenant: TestTenant, messageIds: string[], types: string[], tag = 'run'): Promise<Map<string, string[]>> {
  const expected = new Map<string, string[]>();
  await Promise.all(
    messageIds.map(async (messageId) => {
      const ids: string[] = [];
      expected.set(messageId, ids);
      for (const [i, type] of types.entries()) {
        const res = await tenant.call('POST', '/v1/events', {
          body: { type, messageId, data: { step: i } },
          headers: { 'idempotency-key': `${tag}-${messageId}-${i}` },
        });
        expect(res.status, res.text).toBe(202);
        ids.push(res.body.id as string);
      }
    }),
  );
  return expected;
}

/** `n` message ids with a common prefix. */
export const messageIds = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => `${prefix}-${String(i).padStart(3, '0')}`);

/** An endpoint that orders per message (maxConcurrency 8 unless `extra` says otherwise). */
export async function orderedEndpoint(tenant: TestTenant, url: string, extra: Record<string, unknown> = {}): Promise<string> {
  const res = await tenant.call('POST', '/v1/endpoints', { body: { url, ordering: 'per-message', maxConcurrency: 8, ...extra } });
  expect(res.status, res.text).toBe(201);
  expect(res.body.ordering).toBe('per-message');
  return res.body.id as string;
}
