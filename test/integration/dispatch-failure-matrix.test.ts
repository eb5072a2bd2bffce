// The failure matrix of docs/failure-matrix.md, one test per row, against real receivers on
// 127.0.0.1. Each test has its own tenant, endpoint and receiver, so the rows run concurrently
// on one platform. Retryable rows use retryPolicy.maxAttempts = 2: exactly two requests, then
// `max_attempts`, which proves "retried" without waiting for a long schedule.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { uuidOf } from '../../src/domain/ids.js';
import type { LookupFn } from '../../src/outbound/http-client.js';
import { closedPort, createEndpoint, publish, rawServer, settledDelivery, type Delivery } from '../helpers/dispatch.js';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.js';
import { startReceiver, type Receiver, type Responder } from '../helpers/receiver.js';

/**
 * Test DNS: IP literals never reach it. Names under .loopback.test resolve to 127.0.0.1, one name
 * never answers (connect timeout), everything else does not exist. Nothing resolves for real.
 */
const lookup: LookupFn = (hostname) => {
  if (hostname.endsWith('.loopback.test')) return Promise.resolve([{ address: '127.0.0.1', family: 4 }]);
  if (hostname === 'blackhole.test') return new Promise(() => {});
  return Promise.reject(Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' }));
};

const cleanups: Array<() => Promise<unknown>> = [];
async function receiver(responder: Responder): Promise<Receiver> {
  const r = await startReceiver(responder);
  cleanups.push(() => r.close());
  return r;
}
const status = (code: number, headers: Record<string, string> = {}): Responder => (_req, res) => {
  res.writeHead(code, headers).end(code === 204 || code === 304 ? undefined : `answer ${code}`);
};

/** (attempt number, trigger, status code, error class, outcome) of every attempt, in order. */
const attemptRows = (d: Delivery) => d.attempts!.map((a) => [a.attemptNumber, a.trigger, a.statusCode, a.errorClass, a.outcome]);

/** A retryable outcome: attempt 1 schedules a retry, attempt 2 (the last allowed) dead-letters. */
function expectRetriedToMaxAttempts(d: Delivery, statusCode: number | null, errorClass: string) {
  expect(d).toMatchObject({ status: 'dead', deadReason: 'max_attempts', attemptCount: 2, lastStatusCode: statusCode });
  expect(attemptRows(d)).toEqual([
    [1, 'initial', statusCode, errorClass, 'retry'],
    [2, 'retry', statusCode, errorClass, 'terminal'],
  ]);
  expect(d.attempts![0]!.nextAttemptAt).not.toBeNull(); // the retry was scheduled
  expect(d.attempts![1]!.nextAttemptAt).toBeNull();
  expect(d.lastError).toBeTruthy(); // the last error is kept on the dead delivery
}

function expectTerminal(d: Delivery, statusCode: number | null, errorClass: string) {
  expect(d).toMatchObject({ status: 'dead', deadReason: 'terminal', attemptCount: 1, lastStatusCode: statusCode });
  expect(attemptRows(d)).toEqual([[1, 'initial', statusCode, errorClass, 'terminal']]);
  expect(d.lastError).toBeTruthy();
}

describe('failure matrix', () => {
  let t: TestPlatform;
  /** A fresh tenant (so events reach only this test's endpoint), one event, its settled delivery. */
  async function deliverOne(url: string, maxAttempts = 2) {
    const tenant = await t.createTenant();
    const endpoint = await createEndpoint(tenant, { url, retryPolicy: { maxAttempts } });
    const eventId = await publish(tenant);
    return { tenant, endpoint, eventId, delivery: await settledDelivery(tenant, eventId) };
  }

  beforeAll(async () => {
    // Short attempt and connect timeouts keep the timeout rows to a few seconds; the timeout retry
    // floor is capped by RETRY_MAX_DELAY_MS (1 s here). Not shorter: the rows run at once in one
    // process, and an event loop held up past a timeout would fire it on a row that has its answer.
    t = await startTestPlatform({ env: { ATTEMPT_TIMEOUT_MS: '2000', CONNECT_TIMEOUT_MS: '1000' }, lookup });
  });
  afterAll(async () => {
    while (cleanups.length) await cleanups.pop()!();
    await t.stop();
  });

  describe.concurrent('retried', () => {
    it('connection refused (nothing listens on the port)', async () => {
      const port = await closedPort();
      const { delivery } = await deliverOne(`http://127.0.0.1:${port}/hook`);
      expectRetriedToMaxAttempts(delivery, null, 'connection_refused');
    });

    it('connection reset (the receiver resets the socket after reading the request)', async () => {
      const r = await receiver((_req, res) => void res.socket?.resetAndDestroy());
      const { delivery } = await deliverOne(`${r.url}/hook`);
      expectRetriedToMaxAttempts(delivery, null, 'connection_reset');
      expect(r.requests).toHaveLength(2);
    });

    it('connection closed without an answer', async () => {
      const r = await receiver((_req, res) => void res.socket?.destroy());
      const { delivery } = await deliverOne(`${r.url}/hook`);
      expectRetriedToMaxAttempts(delivery, null, 'connection_reset');
      expect(r.requests).toHaveLength(2);
    });

    it('DNS failure (the name does not exist)', async () => {
      const { delivery } = await deliverOne('http://no-such-host.test/hook');
      expectRetriedToMaxAttempts(delivery, null, 'dns_failure');
    });

    it('connect timeout (DNS never answers within CONNECT_TIMEOUT_MS)', async () => {
      const { delivery } = await deliverOne('http://blackhole.test/hook');
      // The class tells it was the connect timeout (400 ms) that fired, not the attempt timeout.
      expectRetriedToMaxAttempts(delivery, null, 'connect_timeout');
    });

    it('attempt timeout (the receiver never answers)', async () => {
      const r = await receiver(() => {});
      const { delivery } = await deliverOne(`${r.url}/hook`);
      expectRetriedToMaxAttempts(delivery, null, 'attempt_timeout');
      expect(r.requests).toHaveLength(2);
      for (const a of delivery.attempts!) expect(a.durationMs).toBeGreaterThanOrEqual(950);
    });

    it('malformed HTTP response (garbage instead of a status line)', async () => {
      const server = await rawServer((s) => s.end('this is not HTTP at all\r\n\r\n'));
      cleanups.push(() => server.close());
      const { delivery } = await deliverOne(`${server.url}/hook`);
      expectRetriedToMaxAttempts(delivery, null, 'malformed_response');
      expect(server.connections).toBe(2);
    });

    it.each([408, 429, 500, 502, 503, 504])('HTTP %i', async (code) => {
      const r = await receiver(status(code));
      const { delivery } = await deliverOne(`${r.url}/hook`);
      expectRetriedToMaxAttempts(delivery, code, `http_${code}`);
      expect(delivery.attempts![0]!.responseExcerpt).toBe(`answer ${code}`);
      expect(r.requests).toHaveLength(2);
    });
  });

  describe.concurrent('terminal: dead-lettered after one attempt, never retried', () => {
    it.each([400, 401, 403, 404, 409, 422])('HTTP %i', async (code) => {
      const r = await receiver(status(code));
      const { delivery } = await deliverOne(`${r.url}/hook`, 5);
      expectTerminal(delivery, code, `http_${code}`);
      expect(delivery.lastError).toBe(`HTTP ${code}`);
      expect(r.requests).toHaveLength(1);
    });

    it.each([301, 302, 303, 307, 308])('HTTP %i: the redirect is not followed', async (code) => {
      const target = await receiver(status(200));
      const r = await receiver(status(code, { location: `${target.url}/elsewhere` }));
      const { delivery } = await deliverOne(`${r.url}/hook`, 5);
      expectTerminal(delivery, code, `http_${code}`);
      expect(delivery.lastError).toContain('redirects are not followed');
      expect(r.requests).toHaveLength(1);
      expect(target.requests).toHaveLength(0);
    });
  });

  describe.concurrent('success', () => {
    it.each([200, 201, 202, 204, 299])('HTTP %i', async (code) => {
      const r = await receiver(status(code));
      const { delivery, eventId } = await deliverOne(`${r.url}/hook`);
      expect(delivery).toMatchObject({ status: 'succeeded', deadReason: null, lastError: null, lastStatusCode: code, attemptCount: 1 });
      expect(attemptRows(delivery)).toEqual([[1, 'initial', code, null, 'success']]);
      expect(r.requests).toHaveLength(1);
      expect(r.requests[0]!.headers['webhook-id']).toBe(eventId);
    });
  });

  it('HTTP 410: terminal, and the endpoint is disabled with a reason and an audit entry', async () => {
    const r = await receiver(status(410));
    const { tenant, endpoint, delivery } = await deliverOne(`${r.url}/hook`, 5);
    expectTerminal(delivery, 410, 'http_410');

    const ep = await tenant.call('GET', `/v1/endpoints/${endpoint.id}`);
    expect(ep.status).toBe(200);
    expect(ep.body).toMatchObject({ status: 'disabled', disabledReason: expect.stringContaining('410') });
    const audit = await t.platform.db('audit_log').where({ target_id: endpoint.id, action: 'endpoint.auto_disabled' });
    expect(audit).toHaveLength(1);
    // The audit log holds the tenant as the uuid its TypeID encodes.
    expect(audit[0]).toMatchObject({ tenant_id: uuidOf('tenant', tenant.id), actor_type: 'system', target_type: 'endpoint', reason: expect.stringContaining('410') });

    // Later events are kept for the disabled endpoint as dead letters, and nothing is sent.
    const later = await publish(tenant);
    const laterDelivery = await settledDelivery(tenant, later);
    expect(laterDelivery).toMatchObject({ status: 'dead', deadReason: 'endpoint_disabled', attemptCount: 0 });
    expect(r.requests).toHaveLength(1);
  });
});

describe('SSRF refusal (ALLOW_PRIVATE_TARGETS=false)', () => {
  let t: TestPlatform;
  beforeAll(async () => {
    t = await startTestPlatform({ env: { ALLOW_PRIVATE_TARGETS: 'false' }, lookup });
  });
  afterAll(async () => {
    await t.stop();
  });

  // The API refuses loopback URLs at registration, so the first two rows register a public-looking
  // https URL and then point the row at loopback in the database, as a DNS or data change could.
  // The receiver is a raw TCP server: the test proves not even a connection was opened.
  it.each([
    ['an IPv4 loopback literal', (port: number) => `http://127.0.0.1:${port}/hook`, true],
    ['an IPv4-mapped IPv6 loopback literal', (port: number) => `http://[::ffff:127.0.0.1]:${port}/hook`, true],
    ['a name that resolves to loopback', (port: number) => `https://hook.loopback.test:${port}/hook`, false],
  ])('%s is dead-lettered as terminal, with no connection and no retry', async (_name, urlFor, patchInDb) => {
    const server = await rawServer((s) => s.end('HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n'));
    try {
      const tenant = await t.createTenant();
      const target = urlFor(Number(new URL(server.url).port));
      const endpoint = await createEndpoint(tenant, { url: patchInDb ? 'https://hooks.example.com/hook' : target, retryPolicy: { maxAttempts: 5 } });
      if (patchInDb) await t.platform.db('endpoints').where({ id: uuidOf('endpoint', endpoint.id) }).update({ url: target });
      const eventId = await publish(tenant);
      const delivery = await settledDelivery(tenant, eventId);
      expectTerminal(delivery, null, 'ssrf_refused');
      expect(delivery.lastError).toMatch(/^refused: (target is|hostname resolves to) a non-public address \(loopback\)$/);
      // No address is echoed back to the tenant.
      expect(delivery.lastError).not.toContain('127.0.0.1');
      expect(server.connections).toBe(0);
      // Terminal refusals say nothing about the endpoint's health.
      const row = await t.platform.db('endpoints').where({ id: uuidOf('endpoint', endpoint.id) }).first();
      expect(row).toMatchObject({ status: 'active', consecutive_failures: 0, circuit_open_until: null });
    } finally {
      await server.close();
    }
  });
});
