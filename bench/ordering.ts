/**
 * What per-message ordering costs: deliveries per second to an unordered endpoint vs an ordered one
 * (`ordering: "per-message"`) at the same maxConcurrency, for N events spread over M messages.
 *
 * Starts the whole platform in this process (API + dispatcher, role `all`) on a fresh, migrated
 * database and a private Redis prefix, with two loopback receivers that answer 200 after a fixed
 * delay, one per endpoint. Each round publishes N events (both endpoints get all of them) while both
 * endpoints' circuits are held open, so everything is waiting before a clock starts; then one
 * endpoint at a time is let go and timed until its receiver has all N. The order alternates between
 * rounds so drift in machine load hits both alike; the summary is the median over rounds, of
 * deliveries per second and of this process's CPU time per delivery (less sensitive to other load).
 *
 * Run: npx tsx bench/ordering.ts [events=2000] [messages=200] [maxConcurrency=8] [receiverDelayMs=5] [rounds=3]
 * Needs PostgreSQL and Redis as for the tests (TEST_PG_URL / TEST_REDIS_URL override the defaults).
 * Not part of `npm test`.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { loadConfig } from '../src/config/index.js';
import { createDb, migrateLatest } from '../src/infra/db.js';
import { createLogger } from '../src/infra/logger.js';
import { startPlatform, type Platform } from '../src/platform.js';
import { admitDue } from '../src/delivery/sql/admit.js';
import { uuidOf } from '../src/domain/ids.js';
import { clearRedisPrefix, testEnv } from '../test/helpers/platform.js';
import { request } from '../test/helpers/http.js';
import { startReceiver } from '../test/helpers/receiver.js';

const [events = 2000, messages = 200, maxConcurrency = 8, receiverDelayMs = 5, rounds = 3] = process.argv.slice(2).map(Number);
const pgAdminUrl = process.env.TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

async function admin(sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: pgAdminUrl });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

interface Result {
  ordering: 'none' | 'per-message';
  seconds: number;
  perSecond: number;
  /** CPU time of this process (API, dispatcher and receiver) per delivery; less noisy than wall time. */
  cpuMsPerDelivery: number;
  outOfOrder: number;
}

interface Side {
  ordering: Result['ordering'];
  endpointId: string;
  /** Per message, the event numbers in arrival order. */
  arrived: Map<string, number[]>;
  done: number;
  close(): Promise<void>;
}

/** An endpoint (circuit held open, so nothing is sent yet) and its receiver. */
async function side(platform: Platform, apiKey: string, ordering: Result['ordering']): Promise<Side> {
  const s: Side = { ordering, endpointId: '', arrived: new Map(), done: 0, close: async () => undefined };
  const receiver = await startReceiver((req, res) => {
    const body = JSON.parse(req.body) as { messageId: string; data: { n: number } };
    const list = s.arrived.get(body.messageId) ?? [];
    list.push(body.data.n);
    s.arrived.set(body.messageId, list);
    setTimeout(() => {
      s.done++;
      res.writeHead(200).end();
    }, receiverDelayMs);
  });
  const ep = await request(platform.url, 'POST', '/v1/endpoints', { token: apiKey, body: { url: receiver.url, ordering, maxConcurrency } });
  if (ep.status !== 201) throw new Error(`endpoint: ${ep.status} ${ep.text}`);
  s.endpointId = ep.body.id as string;
  s.close = () => receiver.close();
  await hold(platform, s, true);
  return s;
}

async function hold(platform: Platform, s: Side, open: boolean): Promise<void> {
  await platform.db('endpoints').where({ id: uuidOf('endpoint', s.endpointId) }).update({ circuit_open_until: open ? platform.db.raw("now() + interval '1 hour'") : null });
}

/** Lets one endpoint's waiting deliveries go and times them until the receiver has all of them. */
async function release(platform: Platform, s: Side): Promise<Result> {
  s.done = 0;
  s.arrived.clear();
  const cpu = process.cpuUsage();
  const started = performance.now();
  await hold(platform, s, false);
  platform.dispatcher!.wake();
  while (s.done < events) await new Promise((r) => setTimeout(r, 2));
  const seconds = (performance.now() - started) / 1000;
  const used = process.cpuUsage(cpu);
  // Hold again only once every result is recorded: recording a success closes the endpoint's
  // circuit, so a success recorded after the hold would release the endpoint during the next
  // round's publishing, and its deliveries would arrive before the count is reset.
  for (;;) {
    const rows = await platform.db('deliveries').where({ endpoint_id: uuidOf('endpoint', s.endpointId) }).whereNot({ status: 'succeeded' }).count({ n: '*' });
    if (Number(rows[0]?.n ?? 0) === 0) break;
    await new Promise((r) => setTimeout(r, 10));
  }
  await hold(platform, s, true);
  let outOfOrder = 0;
  for (const list of s.arrived.values()) for (let i = 1; i < list.length; i++) if (list[i]! < list[i - 1]!) outOfOrder++;
  return { ordering: s.ordering, seconds, perSecond: events / seconds, cpuMsPerDelivery: (used.user + used.system) / 1000 / events, outOfOrder };
}

/** One POST /v1/events; a 503 (a shared, busy database can run out of connections) is retried. */
async function publishOne(platform: Platform, apiKey: string, body: unknown, key: string): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    const res = await request(platform.url, 'POST', '/v1/events', { token: apiKey, body, headers: { 'idempotency-key': key } });
    if (res.status === 202 || res.status === 200) return;
    if (res.status !== 503 || attempt === 10) throw new Error(`publish: ${res.status} ${res.text}`);
    await new Promise((r) => setTimeout(r, 500));
  }
}

/**
 * Publishes the events of one round: event i belongs to message i % messages and is its
 * (i / messages)-th event; a message's events one after another, messages in parallel (16 at a time).
 * Both endpoints get every event.
 */
async function publish(platform: Platform, apiKey: string, round: number): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      for (let m = next++; m < messages; m = next++) {
        for (let n = m; n < events; n += messages) {
          await publishOne(platform, apiKey, { type: 'bench.event', messageId: `msg-${m}`, data: { n } }, `${round}-${n}`);
        }
      }
    }),
  );
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/**
 * The part of the cost that ordering adds on the database: the time of one admission round (the
 * statement that picks what each endpoint may send next) with the same backlog waiting for an
 * unordered and for an ordered endpoint. Run with no dispatcher (role `api`); what a round admits is
 * put back to pending after it, so every round sees the same backlog; median of `repeat` rounds.
 */
async function admissionRoundMs(platform: Platform, apiKey: string, label: string, spread: number, repeat = 15): Promise<Record<string, number>> {
  const sides: Record<string, string> = {};
  for (const ordering of ['none', 'per-message'] as const) {
    const ep = await request(platform.url, 'POST', '/v1/endpoints', { token: apiKey, body: { url: 'http://127.0.0.1:9/', ordering, maxConcurrency } });
    sides[ordering] = ep.body.id as string;
  }
  let next = 0;
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      for (let n = next++; n < events; n = next++) {
        await publishOne(platform, apiKey, { type: 'bench.event', messageId: `${label}-${n % spread}`, data: { n } }, `${label}-${n}`);
      }
    }),
  );
  const limits = { queuedLeaseSeconds: 60, circuitFailureThreshold: 10, perEndpointBatch: 500 };
  const out: Record<string, number> = {};
  for (const [ordering, id] of Object.entries(sides)) {
    // Only this endpoint may be admitted; the other one's circuit is held open.
    await platform.db('endpoints').whereIn('id', Object.values(sides).map((e) => uuidOf('endpoint', e))).update({ circuit_open_until: platform.db.raw("now() + interval '1 hour'") });
    await platform.db('endpoints').where({ id: uuidOf('endpoint', id) }).update({ circuit_open_until: null });
    const times: number[] = [];
    for (let i = 0; i < repeat; i++) {
      const started = performance.now();
      // Everything to Redis (no local slots), as admission for a backlog mostly does.
      const { queued } = await admitDue(platform.db, limits);
      times.push(performance.now() - started);
      if (queued.length === 0) throw new Error(`${ordering}: nothing admitted`);
      // Put back what was admitted, so every round sees the same backlog.
      await platform.db('deliveries').whereIn('id', queued.map((d) => uuidOf('delivery', d.id))).update({ status: 'pending', lease_until: null });
    }
    out[ordering] = median(times);
  }
  await platform.db('endpoints').whereIn('id', Object.values(sides).map((e) => uuidOf('endpoint', e))).update({ circuit_open_until: platform.db.raw("now() + interval '1 hour'") });
  return out;
}

async function main(): Promise<void> {
  const dbName = `whr_bench_${randomBytes(4).toString('hex')}`;
  await admin(`CREATE DATABASE "${dbName}"`);
  const url = new URL(pgAdminUrl);
  url.pathname = `/${dbName}`;
  const queuePrefix = `bench${randomBytes(3).toString('hex')}`;
  let platform: Platform | undefined;
  try {
    const migrator = createDb({ url: url.toString(), poolMax: 1 });
    await migrateLatest(migrator);
    await migrator.destroy();
    // Retries are irrelevant here (the receivers never fail); the rest are the test defaults.
    const config = loadConfig(testEnv(url.toString(), { LOG_LEVEL: 'silent', RECONCILE_INTERVAL_SECONDS: '3600' }));
    platform = await startPlatform({ role: 'all', config, logger: createLogger('silent'), queuePrefix });
    console.log(JSON.stringify({ events, messages, maxConcurrency, receiverDelayMs, rounds }));

    const tenant = await request(platform.url, 'POST', '/admin/tenants', { token: config.adminToken, body: { name: 'bench' } });
    const apiKey = tenant.body.apiKey as string;
    const none = await side(platform, apiKey, 'none');
    const ordered = await side(platform, apiKey, 'per-message');
    const results: Result[] = [];
    // Round 0 warms up (JIT, connection pools, Redis) and is not counted.
    for (let round = 0; round <= rounds; round++) {
      await publish(platform, apiKey, round);
      // Alternate which goes first, so a drift in machine load hits both alike.
      for (const s of round % 2 === 0 ? [none, ordered] : [ordered, none]) {
        const r = await release(platform, s);
        if (round > 0) results.push(r);
        console.log(JSON.stringify({ round: round === 0 ? 'warm-up' : round, ...r, seconds: +r.seconds.toFixed(3), perSecond: Math.round(r.perSecond), cpuMsPerDelivery: +r.cpuMsPerDelivery.toFixed(2) }));
      }
    }
    await none.close();
    await ordered.close();
    const of = (o: Result['ordering'], k: 'perSecond' | 'cpuMsPerDelivery') => median(results.filter((r) => r.ordering === o).map((r) => r[k]));
    const rate = of('per-message', 'perSecond') / of('none', 'perSecond');
    const cpu = of('per-message', 'cpuMsPerDelivery') / of('none', 'cpuMsPerDelivery');
    console.log(
      `median of ${rounds}: unordered ${Math.round(of('none', 'perSecond'))}/s (${of('none', 'cpuMsPerDelivery').toFixed(2)} ms CPU each), ` +
        `ordered ${Math.round(of('per-message', 'perSecond'))}/s (${of('per-message', 'cpuMsPerDelivery').toFixed(2)} ms CPU each); ` +
        `ordered/unordered throughput = ${rate.toFixed(2)}, CPU per delivery = ${cpu.toFixed(2)}`,
    );

    // Admission cost, with nothing dispatching: a platform without a worker on the same database.
    await platform.stop();
    platform = await startPlatform({ role: 'api', config, logger: createLogger('silent'), queuePrefix });
    for (const [label, spread] of [
      [`spread over ${messages} messages`, messages],
      ['all on one message', 1],
    ] as const) {
      const ms = await admissionRoundMs(platform, apiKey, spread === 1 ? 'hot' : 'wide', spread);
      console.log(
        `admission round with ${events} waiting, ${label}: unordered ${ms.none!.toFixed(1)} ms, ordered ${ms['per-message']!.toFixed(1)} ms ` +
          `(ordered/unordered ${(ms['per-message']! / ms.none!).toFixed(2)})`,
      );
    }
  } finally {
    await platform?.stop();
    await clearRedisPrefix(queuePrefix);
    await admin(`DROP DATABASE IF EXISTS "${dbName}" WITH (FORCE)`);
  }
}

await main();
process.exit(0);
