// Worker processes as operators run them (`npm run start:worker`, several at once), killed and
// stopped the way hosts do it. The API runs in-process with role `api`; each worker is a child
// process on the same database and Redis prefix (QUEUE_PREFIX), so nothing here reaches into a
// worker's memory: what counts is what the receiver got and what PostgreSQL recorded.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { idOfUuid, uuidOf } from '../../src/domain/ids.js';
import { createEndpoint, metricValue, publish, publishMany, slowResponder, startWorkerProcess, statusCounts, type WorkerProcess } from '../helpers/dispatch.js';
import { eventually, startTestPlatform, type TestPlatform, type TestTenant } from '../helpers/platform.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';
import { attemptsListed } from '../helpers/database.js';

interface AttemptRow {
  delivery_id: string;
  attempt_number: number;
  trigger: string;
  started_at: Date;
  duration_ms: number;
  status_code: number | null;
  error_class: string | null;
  outcome: string;
}

// Child processes start in about a second each and a killed worker's lease takes 12 s to expire:
// about 35 s for the file on an idle machine; the timeouts leave room for a busy one.
describe('worker processes', { timeout: 90_000 }, () => {
  let t: TestPlatform;
  const workers: WorkerProcess[] = [];
  const receivers: Receiver[] = [];
  const worker = (env?: Record<string, string>) => {
    const w = startWorkerProcess(t, env);
    workers.push(w);
    return w;
  };

  beforeAll(async () => {
    // ATTEMPT_TIMEOUT_MS (2 s) bounds how long a killed worker's in-flight lease lasts (timeout + 10 s).
    t = await startTestPlatform({ role: 'api', env: { ATTEMPT_TIMEOUT_MS: '2000' } });
  });
  afterEach(async () => {
    // Every child ends with its test, whatever happened.
    for (const w of workers.splice(0)) {
      w.kill('SIGKILL');
      await w.exited;
    }
    for (const r of receivers.splice(0)) await r.close();
  });
  afterAll(async () => {
    await t.stop();
  });

  async function endpointFor(tenant: TestTenant, receiver: Receiver, maxConcurrency: number) {
    receivers.push(receiver);
    return createEndpoint(tenant, { url: `${receiver.url}/hook`, maxConcurrency });
  }
  const attemptsOf = (endpointId: string): Promise<AttemptRow[]> =>
    attemptsListed(t.platform.db)
      .join('deliveries', 'attempts.delivery_id', t.platform.db.raw("typeid_of('dlv', deliveries.id)"))
      .where('deliveries.endpoint_id', uuidOf('endpoint', endpointId))
      .orderBy(['attempts.delivery_id', 'attempts.attempt_number'])
      .select('attempts.*');

  it('a worker killed with SIGKILL mid-run loses nothing: a new worker delivers everything, with the same webhook-id', async () => {
    const receiver = await startReceiver(slowResponder(100));
    const tenant = await t.createTenant();
    const ep = await endpointFor(tenant, receiver, 10);
    const first = worker();
    await first.port();

    // The kill comes while events are still being published and delivered.
    const publishing = publishMany(tenant, 300);
    await eventually(async () => receiver.requests.length >= 60, 'delivery under way', 20_000, 10);
    first.kill('SIGKILL');
    expect(await first.exited).toBe('SIGKILL');
    // With no worker alive, nothing changes these rows: what was in flight at the kill is here (every
    // claim is in its delivery's queue row, a slot's only there).
    const lostIds: string[] = (await t.platform.db('delivery_queue').where({ endpoint_id: uuidOf('endpoint', ep.id), status: 'in_flight' }).select('delivery_id')).map((r) => idOfUuid('delivery', r.delivery_id));
    expect(lostIds.length).toBeGreaterThan(0);

    const eventIds = await publishing;
    const second = worker();
    await eventually(async () => (await statusCounts(t, ep.id)).succeeded === 300, 'all 300 delivered after the restart', 70_000, 200);
    await second.port(); // it really was the second process that finished the work

    // Everything arrived: every event id at least once.
    expect(new Set(receiver.requests.map((r) => String(r.headers['webhook-id'])))).toEqual(new Set(eventIds));
    // A delivery sent again carries the same webhook-id and body, with the next attempt number.
    const byDelivery = new Map<string, typeof receiver.requests>();
    for (const r of receiver.requests) {
      const id = String(r.headers['webhook-delivery-id']);
      byDelivery.set(id, [...(byDelivery.get(id) ?? []), r]);
    }
    expect(byDelivery.size).toBe(300);
    const redelivered = [...byDelivery.values()].filter((rs) => rs.length > 1);
    for (const rs of redelivered) {
      expect(new Set(rs.map((r) => r.headers['webhook-id'])).size).toBe(1);
      expect(new Set(rs.map((r) => r.body)).size).toBe(1);
      expect(rs.map((r) => r.headers['webhook-attempt'])).toEqual(rs.map((_, i) => String(i + 1)));
    }
    console.info(`SIGKILL: ${lostIds.length} attempts in flight at the kill, ${redelivered.length} deliveries sent again`);

    // At-least-once, never more than attempted: each request the receiver saw is a recorded
    // attempt (the lost ones as worker_lost; on a busy machine also an occasional timeout).
    const attempts = await attemptsOf(ep.id);
    for (const [deliveryId, rs] of byDelivery) {
      expect(rs.length, deliveryId).toBeLessThanOrEqual(attempts.filter((a) => a.delivery_id === deliveryId).length);
    }
    // The attempt log shows each lost attempt, then the successful one.
    for (const id of lostIds) {
      const rows = attempts.filter((a) => a.delivery_id === id);
      expect(rows[0]).toMatchObject({ attempt_number: 1, trigger: 'initial', error_class: 'worker_lost', outcome: 'retry' });
      expect(rows.at(-1)).toMatchObject({ trigger: 'retry', status_code: 200, outcome: 'success' });
    }
    // Their tenant is their deliveries': neither the sweep nor the record writes one into the rows
    // (migration 20261203000042), at least two per delivery (the lost attempt and the retry).
    const lostRows = await t.platform.db('attempts').whereIn('delivery_id', lostIds.map((id) => uuidOf('delivery', id))).pluck('tenant_id');
    expect(lostRows.length).toBeGreaterThanOrEqual(2 * lostIds.length);
    expect(new Set(lostRows)).toEqual(new Set([null]));
    expect(attempts.filter((a) => a.error_class === 'worker_lost')).toHaveLength(lostIds.length);
  });

  it('two worker processes share the work: all delivered, no overlapping attempts, maxConcurrency held across both', async () => {
    // The first request of every other event gets a 500, so half the deliveries have two attempts
    // whose timing can be compared; every answer takes 80 ms so concurrency is visible and the run
    // lasts 7 s or more (450 attempts, 5 at a time). A process whose slots took all 5 first keeps
    // them through hand-offs for up to 5 s (a chain's limit, src/outbound/deliver.ts), and only then
    // does admission share them: at 30 ms the run could end before that, with one process idle.
    const seen = new Set<string>();
    const state = { inFlight: 0, max: 0 };
    const receiver = await startReceiver((req, res) => {
      const id = String(req.headers['webhook-id']);
      const fail = (JSON.parse(req.body) as { data: { i: number } }).data.i % 2 === 0 && !seen.has(id);
      seen.add(id);
      state.inFlight++;
      state.max = Math.max(state.max, state.inFlight);
      setTimeout(() => {
        state.inFlight--;
        res.writeHead(fail ? 500 : 200).end();
      }, 80);
    });
    const tenant = await t.createTenant();
    const ep = await endpointFor(tenant, receiver, 5);
    // Half the attempts fail by design; the circuit breaker must not turn that into a cooldown.
    const env = { CIRCUIT_FAILURE_THRESHOLD: '100000' };
    const [a, b] = [worker(env), worker(env)];
    const ports = await Promise.all([a.port(), b.port()]);

    const eventIds = await publishMany(tenant, 300);
    await eventually(async () => (await statusCounts(t, ep.id)).succeeded === 300, 'all 300 delivered', 70_000, 200);

    expect(new Set(receiver.requests.map((r) => r.headers['webhook-id']))).toEqual(new Set(eventIds));
    expect(receiver.requests.length).toBeGreaterThanOrEqual(450); // 300 + 150 planned failures
    expect(state.max).toBeLessThanOrEqual(5);
    expect(state.max).toBeGreaterThanOrEqual(2);

    // At most one attempt in flight per delivery: each attempt ends before the next begins.
    const attempts = await attemptsOf(ep.id);
    expect(attempts.length).toBeGreaterThanOrEqual(receiver.requests.length);
    const byDelivery = new Map<string, AttemptRow[]>();
    for (const row of attempts) byDelivery.set(row.delivery_id, [...(byDelivery.get(row.delivery_id) ?? []), row]);
    expect(byDelivery.size).toBe(300);
    const retried = [...byDelivery.values()].filter((rows) => rows.length > 1);
    expect(retried.length).toBeGreaterThanOrEqual(150);
    for (const rows of byDelivery.values()) {
      expect(rows.at(-1)!.status_code).toBe(200);
      rows.slice(1).forEach((next, i) => {
        const prev = rows[i]!;
        expect(prev.started_at.getTime() + prev.duration_ms, `${next.delivery_id} attempt ${next.attempt_number}`).toBeLessThanOrEqual(next.started_at.getTime());
      });
    }

    // Both processes made attempts (each counts its own in its /metrics).
    for (const port of ports) {
      const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
      expect(metricValue(text, 'webhook_delivery_attempts_total'), `worker on ${port}`).toBeGreaterThan(0);
    }
  });

  it('a worker that started alone shares a running backlog with a worker that joins later', { timeout: 150_000 }, async () => {
    // One endpoint, 5 at a time, 100 ms per answer: 2,500 deliveries take 50 s or more for one worker,
    // room for the second worker's start and the first worker's next count (at most 5 s). At 50 ms,
    // a loaded CI host started the second worker so late that the first had drained nearly all.
    // The first worker counts itself alone and runs every slot itself; each slot would hand on to
    // the endpoint's next delivery hundreds of times. Once it counts the second worker, its slots
    // end their chains and admission shares the endpoint through Redis; a chain started since ends
    // within 5 s, so one that Redis gave the first worker again is shared again soon.
    const receiver = await startReceiver(slowResponder(100));
    const tenant = await t.createTenant();
    const ep = await endpointFor(tenant, receiver, 5);
    const first = worker();
    const firstPort = await first.port();
    const eventIds = await publishMany(tenant, 2_500);
    const succeeded = async () => (await statusCounts(t, ep.id)).succeeded ?? 0;
    await eventually(async () => (await succeeded()) >= 100, 'the first worker delivering', 30_000, 50);
    const second = worker();
    const secondPort = await second.port();
    const attemptsBy = async (port: number) => metricValue(await (await fetch(`http://127.0.0.1:${port}/metrics`)).text(), 'webhook_delivery_attempts_total');
    await eventually(async () => (await attemptsBy(secondPort)) > 0, 'the second worker making attempts', 40_000, 100);
    expect(await succeeded(), 'the second worker joined before the backlog was drained').toBeLessThan(2_500);
    await eventually(async () => (await succeeded()) === 2_500, 'all 2,500 delivered', 90_000, 200);
    expect(await attemptsBy(firstPort)).toBeGreaterThan(0);
    expect(new Set(receiver.requests.map((r) => r.headers['webhook-id']))).toEqual(new Set(eventIds));
  });

  it('SIGTERM lets the in-flight attempt finish and record its result, then the process exits 0', async () => {
    const receiver = await startReceiver((_req, res) => void setTimeout(() => res.writeHead(200).end('done'), 1_000));
    const tenant = await t.createTenant();
    const ep = await endpointFor(tenant, receiver, 10);
    const w = worker({ ATTEMPT_TIMEOUT_MS: '5000' }); // the receiver takes 1 s
    await w.port();

    const eventId = await publish(tenant);
    await eventually(async () => receiver.requests.length === 1, 'attempt in flight');
    const termAt = Date.now();
    w.kill('SIGTERM');
    // Work published after the signal is not taken by the stopping worker.
    const later = await publish(tenant);
    expect(await w.exited).toBe(0);
    expect(Date.now() - termAt).toBeGreaterThanOrEqual(800); // it waited for the receiver's answer

    const rows = await t.platform.db('deliveries').where({ endpoint_id: uuidOf('endpoint', ep.id) }).select('event_id', 'status', 'attempt_count');
    // The rows hold each event as the uuid its TypeID encodes.
    expect(rows.find((r) => idOfUuid('event', r.event_id) === eventId)).toMatchObject({ status: 'succeeded', attempt_count: 1 });
    expect(rows.find((r) => idOfUuid('event', r.event_id) === later)).toMatchObject({ status: 'pending', attempt_count: 0 });
    const attempts = await attemptsOf(ep.id);
    expect(attempts).toHaveLength(1);
    expect(attempts[0]).toMatchObject({ status_code: 200, outcome: 'success', trigger: 'initial' });
    expect(receiver.requests).toHaveLength(1);
  });
});
