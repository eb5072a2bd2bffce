// Per-message order survives a worker being SIGKILLed mid-run: the API runs in this process, the
// dispatcher in a child process that is killed while attempts are in flight, and a second worker
// takes over. An attempt the dead worker never reported back comes back through its lease (the
// attempt timeout plus 10 s) before anything later of its message is sent.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startWorkerProcess, statusCounts, type WorkerProcess } from '../helpers/dispatch.js';
import { expectInOrder, FAIL, messageIds, OK, publishPerMessage, startMessageReceiver, type MessageReceiver } from '../helpers/ordering.js';
import { eventually, startTestPlatform, type TestPlatform } from '../helpers/platform.js';
import { attemptsListed } from '../helpers/database.js';

describe('ordered delivery with a worker SIGKILLed mid-run', () => {
  let t: TestPlatform;
  let r: MessageReceiver;
  const workers: WorkerProcess[] = [];

  beforeAll(async () => {
    // ATTEMPT_TIMEOUT_MS=1000 keeps the in-flight lease (timeout + 10 s) as short as it gets.
    // DB_POOL_MAX=10 for the API and each worker: three processes share one PostgreSQL with the
    // rest of the suite.
    t = await startTestPlatform({ role: 'api', env: { ATTEMPT_TIMEOUT_MS: '1000', DB_POOL_MAX: '10' } });
    // Requests are held 100-250 ms, so a kill lands while several attempts are in the receiver.
    r = await startMessageReceiver(() => 100 + Math.floor(Math.random() * 150));
  });
  afterAll(async () => {
    for (const w of workers) {
      w.kill('SIGKILL');
      await w.exited;
    }
    await r.close();
    await t.stop();
  });

  it('20 messages × 4 events, ~30 % failures, worker killed and replaced: each message in order, all delivered', { timeout: 60_000 }, async () => {
    const first = startWorkerProcess(t);
    workers.push(first);
    await first.port();
    const tenant = await t.createTenant();
    r.setVerdict(() => (Math.random() < 0.3 ? FAIL : OK));
    const endpoint = await tenant.call('POST', '/v1/endpoints', { body: { url: r.url, ordering: 'per-message', maxConcurrency: 8 } });
    expect(endpoint.status, endpoint.text).toBe(201);
    const endpointId = endpoint.body.id as string;

    const expected = await publishPerMessage(tenant, messageIds('k', 20), ['job.queued', 'job.started', 'job.progress', 'job.finished']);
    // Kill from inside the check, so nothing runs between seeing attempts in flight and the kill.
    await eventually(
      async () => {
        if (r.delivered().size < 15 || r.inFlight() < 2) return false;
        first.kill('SIGKILL');
        return true;
      },
      'attempts in flight after some progress',
      30_000,
      5,
    );
    expect(await first.exited).toBe('SIGKILL');
    const killedAt = Date.now();
    const deliveredAtKill = r.delivered().size;
    expect(deliveredAtKill).toBeLessThan(80);

    const second = startWorkerProcess(t);
    workers.push(second);
    await second.port(); // fails at once, with its output, if the worker cannot start
    await eventually(
      async () => r.delivered().size === 80 && (await statusCounts(t, endpointId)).succeeded === 80,
      'all 80 delivered after the kill',
      40_000,
      100,
    ).catch(async (err: Error) => {
      const counts = JSON.stringify(await statusCounts(t, endpointId));
      throw new Error(`${err.message}; deliveries ${counts}; second worker said:\n${second.output().slice(-3000)}`);
    });

    expectInOrder(expected, r.arrivals);
    expect(r.maxInFlightPerMessage()).toBe(1);
    expect(r.maxMessagesInFlight()).toBeGreaterThan(1);
    expect(await statusCounts(t, endpointId)).toEqual({ succeeded: 80 });
    // The kill really cut attempts off: they were recorded as lost when their lease ran out, and
    // retried (their message's later events waited for that, which expectInOrder checked).
    const lost = await attemptsListed(t.platform.db).where({ error_class: 'worker_lost' }).count<{ n: string }[]>('* as n');
    expect(Number(lost[0]!.n)).toBeGreaterThanOrEqual(1);
    expect(Number(lost[0]!.n)).toBeLessThanOrEqual(8); // maxConcurrency
    // Claimed less than a second before the kill, with an 11 s lease: back no earlier than ~10 s.
    const retriedAfterLease = r.arrivals.filter((a) => a.at >= killedAt + 9_000);
    expect(retriedAfterLease.length).toBeGreaterThan(0);
  });
});
