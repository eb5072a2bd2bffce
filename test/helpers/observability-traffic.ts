/**
 * Traffic for the observability end-to-end test: every kind of callback a provider sends and every
 * kind of answer a customer endpoint gives, over real HTTP, with a tally of what each client was
 * told so the metrics can be compared with it exactly.
 */
import { randomUUID } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import type { SourceType } from '../../src/domain/sources.js';
import { publish } from './dispatch.js';
import { postCallback, sign, type Callback, type TestSource } from './intake.js';
import type { TestPlatform, TestTenant } from './platform.js';
import { automation, communication } from './providers.js';
import type { ReceivedRequest } from './receiver.js';

/** The event types the endpoints subscribe to: one endpoint per behaviour, one delivery per event. */
export const TYPES = {
  ok: 'test.ok',
  flaky: 'test.flaky',
  rejected: 'test.rejected',
  gone: 'test.gone',
  max1: 'test.max1',
  max2: 'test.max2',
  circuit: 'test.circuit',
} as const;

/**
 * One receiver for every endpoint, answering by path: `/ok` 200, `/flaky` 500 on the first request
 * of each webhook-id then 200, `/rejected` 400, `/gone` 410, `/max` 500 until `maxRecovers()`,
 * `/circuit` always 500.
 */
export function endpointBehaviour(): { respond: (req: ReceivedRequest, res: ServerResponse) => void; maxRecovers: () => void } {
  const seenFlaky = new Set<string>();
  let maxFailing = true;
  return {
    maxRecovers: () => void (maxFailing = false),
    respond(req, res) {
      const id = String(req.headers['webhook-id']);
      const status = (() => {
        switch (req.path) {
          case '/flaky':
            return seenFlaky.has(id) ? 200 : (seenFlaky.add(id), 500);
          case '/rejected':
            return 400;
          case '/gone':
            return 410;
          case '/max':
            return maxFailing ? 500 : 200;
          case '/circuit':
            return 500;
          default:
            return 200;
        }
      })();
      res.writeHead(status, { 'content-type': 'text/plain' }).end(String(status));
    },
  };
}

/** What inbound clients were told, by `source_type|outcome`: the receipts counter must equal it. */
export class InboundTally {
  readonly counts = new Map<string, number>();

  record(type: SourceType, status: number, body: { status?: string } | undefined): void {
    const outcome =
      status === 200 ? String(body?.status) : status === 401 ? 'rejected_signature' : status === 400 || status === 413 ? 'rejected_malformed' : status === 503 ? 'unavailable' : `http_${status}`;
    const key = `${type}|${outcome}`;
    this.counts.set(key, (this.counts.get(key) ?? 0) + 1);
  }
}

/** Sends one callback, checks the answer is the one expected, and tallies it. */
async function send(t: TestPlatform, tally: InboundTally, source: TestSource, cb: Callback, expected: number | string): Promise<void> {
  const res = await postCallback(t, source.id, cb);
  tally.record(source.type, res.status, res.body);
  const got = res.status === 200 ? res.body?.status : res.status;
  if (got !== expected) throw new Error(`${source.type}: expected ${expected}, got ${res.status} ${res.text}`);
}

/**
 * One round of provider-chain traffic per source type: accepted, its duplicate, a stale status
 * (momo-communication), a bad signature and a malformed body. Sequential per source, so the
 * duplicate always follows its original.
 */
export async function inboundRound(t: TestPlatform, tally: InboundTally, sources: Record<SourceType, TestSource>): Promise<void> {
  const comm = sources['momo-communication'];
  const auto = sources['momo-automation'];
  const std = sources['standard-webhooks'];
  await Promise.all([
    (async () => {
      const messageId = `m-${randomUUID()}`;
      const delivered = sign.communication(comm.secret, communication.messageStatus(messageId, 'delivered'));
      await send(t, tally, comm, delivered, 'accepted');
      await send(t, tally, comm, delivered, 'duplicate');
      await send(t, tally, comm, sign.communication(comm.secret, communication.messageStatus(messageId, 'sent')), 'stale');
      await send(t, tally, comm, { ...delivered, headers: { ...delivered.headers, 'x-signature': 'f'.repeat(64) } }, 401);
      await send(t, tally, comm, sign.communication(comm.secret, '{"event":'), 400);
    })(),
    (async () => {
      const order = sign.automation(auto.secret, automation.body(randomUUID()));
      await send(t, tally, auto, order, 'accepted');
      await send(t, tally, auto, order, 'duplicate');
      await send(t, tally, auto, sign.automation('not-the-secret', automation.body(randomUUID())), 401);
      await send(t, tally, auto, sign.automation(auto.secret, JSON.stringify({ id: randomUUID() })), 400);
    })(),
    (async () => {
      const shipped = sign.standard(std.secret, JSON.stringify({ type: 'order.shipped', data: { n: randomUUID() } }));
      await send(t, tally, std, shipped, 'accepted');
      await send(t, tally, std, shipped, 'duplicate');
      await send(t, tally, std, { ...shipped, rawBody: `${String(shipped.rawBody)} ` }, 401);
      await send(t, tally, std, sign.standard(std.secret, 'not json'), 400);
    })(),
  ]);
}

/** A body one byte over the 1 MiB default limit, signed: refused with 413 before verification. */
export async function oversized(t: TestPlatform, tally: InboundTally, source: TestSource): Promise<void> {
  const huge = `{"pad":"${'x'.repeat(1024 * 1024 - 9)}"}`;
  await send(t, tally, source, sign.automation(source.secret, huge), 413);
}

/**
 * Provider and platform traffic in rounds until stopped, so every rate() window the dashboards
 * use keeps seeing changes while the panels are queried. The pause between rounds paces a load
 * generator; it is not a wait for a condition.
 */
export function backgroundTraffic(
  t: TestPlatform,
  tenant: TestTenant,
  tally: InboundTally,
  sources: Record<SourceType, TestSource>,
): { errors: Error[]; rounds: () => number; stop: () => Promise<void> } {
  const errors: Error[] = [];
  let running = true;
  let rounds = 0;
  const loop = (async () => {
    while (running) {
      try {
        await Promise.all([inboundRound(t, tally, sources), publish(tenant, TYPES.flaky), publish(tenant, TYPES.rejected), publish(tenant, TYPES.ok)]);
        rounds++;
      } catch (err) {
        errors.push(err as Error);
        running = false;
      }
      if (running) await new Promise((r) => setTimeout(r, 300));
    }
  })();
  return {
    errors,
    rounds: () => rounds,
    stop: async () => {
      running = false;
      await loop;
    },
  };
}
