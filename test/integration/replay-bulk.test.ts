import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { uuidOf } from '../../src/domain/ids.js';
import { expectError } from '../helpers/api.js';
import { createEndpoint, publish } from '../helpers/dispatch.js';
import { eventually, startTestPlatform, type TestPlatform, type TestTenant } from '../helpers/platform.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';
import { dispatchedMarker } from '../helpers/marker.js';
import { answer, apiKeyId, bulkReplay, completed, deliveryIds, gate, metric, progress, replayOne, settledOn } from '../helpers/replay.js';

/**
 * POST /v1/replays against nine dead deliveries on two endpoints, with the cap set to 5:
 *
 *   endpoint X (order.*)            answers 400 -> dead `terminal`      for e1 e2 | e4 e5
 *   endpoint Y (order.*, invoice.*) answers 500, one attempt -> dead `max_attempts` for e1 e2 e3 | e4 e5
 *
 * e1, e2 are order.created and e3 invoice.paid, published before `boundary`; e4, e5 are order.paid after it.
 */
describe('bulk replay', () => {
  const cap = 5;
  let t: TestPlatform;
  let a: TestTenant;
  let b: TestTenant;
  let rx: Receiver;
  let ry: Receiver;
  let epX: string;
  let epY: string;
  let boundary: Date;
  const ev: string[] = [];
  /** The replay that took the first five deliveries; later replays take some of them over. */
  let firstReplay: string;
  /** The replay of Y's five deliveries, one of which then fails again. */
  let yReplay: string;

  /** deliveryIds as the API names them (the table holds their uuids, and those of their event and endpoint). */
  const dlv = async (eventIndex: number, endpointId: string) =>
    (await deliveryIds(t, { event_id: uuidOf('event', ev[eventIndex - 1]!), endpoint_id: uuidOf('endpoint', endpointId) }))[0]!;
  const allDead = () => deliveryIds(t, { tenant_id: uuidOf('tenant', a.id), status: 'dead' });
  const dryRun = async (tenant: TestTenant, filter: Record<string, unknown>, extra: Record<string, unknown> = {}) => {
    const res = await bulkReplay(tenant, { filter, dryRun: true, ...extra });
    expect(res.status, res.text).toBe(200);
    return res.body as { dryRun: true; count: number; sample: Array<{ id: string; status: string }> };
  };

  beforeAll(async () => {
    // A high circuit threshold: Y fails on purpose again and again and must stay admitted.
    t = await startTestPlatform({ env: { REPLAY_MAX_LIMIT: String(cap), CIRCUIT_FAILURE_THRESHOLD: '100' } });
    a = await t.createTenant('bulk');
    b = await t.createTenant('intruder');
    rx = await startReceiver(answer(400));
    ry = await startReceiver(answer(500));
    epX = (await createEndpoint(a, { url: `${rx.url}/x`, eventTypes: ['order.*'] })).id;
    epY = (await createEndpoint(a, { url: `${ry.url}/y`, eventTypes: ['order.*', 'invoice.*'], retryPolicy: { maxAttempts: 1 } })).id;

    ev.push(await publish(a, 'order.created'), await publish(a, 'order.created'), await publish(a, 'invoice.paid'));
    // Events are stored under the uuid their TypeID encodes.
    const last = await t.platform.db('events').where({ id: uuidOf('event', ev[2]!) }).first('created_at');
    boundary = new Date(last.created_at.getTime() + 1);
    while (Date.now() <= boundary.getTime() + 1) await new Promise((r) => setTimeout(r, 2));
    ev.push(await publish(a, 'order.paid'), await publish(a, 'order.paid'));
    await settledOn(t, epX, 4);
    await settledOn(t, epY, 5);
    expect(await allDead()).toHaveLength(9);
  });
  afterAll(async () => {
    await rx.close();
    await ry.close();
    await t.stop();
  });

  it('a dry run returns the count and a sample and sends nothing', async () => {
    const sent = rx.requests.length + ry.requests.length;
    const replaysBefore = await metric(t, 'webhook_replays_total', { kind: 'bulk' });
    const oldest = (await allDead()).slice(0, cap);

    const dry = await dryRun(a, {});
    expect(dry).toMatchObject({ dryRun: true, count: cap });
    expect(dry.sample.map((d) => d.id)).toEqual(oldest);
    expect(dry.sample.every((d) => d.status === 'dead')).toBe(true);

    // Nothing changed in the database, so nothing can be sent; an admission round since confirms it.
    await dispatchedMarker(t);
    expect(rx.requests.length + ry.requests.length).toBe(sent);
    expect(await allDead()).toHaveLength(9);
    expect(await t.platform.db('deliveries').where({ tenant_id: uuidOf('tenant', a.id) }).whereNotNull('replay_id')).toEqual([]);
    expect(await t.platform.db('replays').where({ tenant_id: uuidOf('tenant', a.id) })).toEqual([]);
    expect(await t.platform.db('audit_log').where({ tenant_id: uuidOf('tenant', a.id), action: 'replay.started' })).toEqual([]);
    expect(await metric(t, 'webhook_replays_total', { kind: 'bulk' })).toBe(replaysBefore);
  });

  it('caps limit at REPLAY_MAX_LIMIT: a larger limit is refused, a smaller one is honoured, none means the cap', async () => {
    expectError(await bulkReplay(a, { limit: cap + 1 }), 400, 'limit_too_large');
    expectError(await bulkReplay(a, { limit: cap + 1, dryRun: true }), 400, 'limit_too_large');
    expectError(await bulkReplay(a, { limit: 0, dryRun: true }), 400, 'validation_failed');
    const two = await dryRun(a, {}, { limit: 2 });
    expect(two.count).toBe(2);
    expect(two.sample.map((d) => d.id)).toEqual((await allDead()).slice(0, 2));
    expect((await dryRun(a, {})).count).toBe(cap);
    expect(await t.platform.db('replays').where({ tenant_id: uuidOf('tenant', a.id) })).toEqual([]);
  });

  it('validates the request: reason required, filter fields and values checked', async () => {
    expectError(await a.call('POST', '/v1/replays', { body: { filter: {}, dryRun: true } }), 400, 'validation_failed');
    expectError(await bulkReplay(a, { reason: ' ' }), 400, 'validation_failed');
    expectError(await bulkReplay(a, { filter: { status: 'pending' }, dryRun: true }), 400, 'validation_failed');
    expectError(await bulkReplay(a, { filter: { reason: 'bored' }, dryRun: true }), 400, 'validation_failed');
    expectError(await bulkReplay(a, { filter: { since: 'yesterday' }, dryRun: true }), 400, 'validation_failed');
    expectError(await bulkReplay(a, { filter: { endpoint: epX }, dryRun: true }), 400, 'validation_failed');
  });

  it('filters by status, endpoint, event type, reason and time range select exactly the matching deliveries', async () => {
    const x = await Promise.all([1, 2, 4, 5].map((i) => dlv(i, epX)));
    const y = await Promise.all([1, 2, 3, 4, 5].map((i) => dlv(i, epY)));
    const cases: Array<[Record<string, unknown>, string[]]> = [
      [{ endpointId: epX }, x],
      [{ status: 'dead', endpointId: epY }, y],
      [{ reason: 'terminal' }, x],
      [{ reason: 'max_attempts' }, y],
      [{ eventType: 'invoice.paid' }, [y[2]!]],
      [{ eventType: 'order.created', endpointId: epY }, [y[0]!, y[1]!]],
      [{ since: boundary.toISOString() }, [x[2]!, x[3]!, y[3]!, y[4]!]],
      [{ until: boundary.toISOString(), endpointId: epX }, [x[0]!, x[1]!]],
      [{ until: boundary.toISOString(), reason: 'max_attempts' }, [y[0]!, y[1]!, y[2]!]],
      [{ since: boundary.toISOString(), eventType: 'order.paid', reason: 'terminal' }, [x[2]!, x[3]!]],
      [{ status: 'succeeded' }, []],
      [{ reason: 'endpoint_disabled' }, []],
      [{ eventType: 'order' }, []],
    ];
    for (const [filter, expected] of cases) {
      const dry = await dryRun(a, filter);
      expect({ filter, count: dry.count, ids: dry.sample.map((d) => d.id).sort() }).toEqual({ filter, count: expected.length, ids: [...expected].sort() });
    }
  });

  it('without a limit replays the cap, oldest first, and reports failures in its progress', async () => {
    const oldest = (await allDead()).slice(0, cap);
    const replaysBefore = await metric(t, 'webhook_replays_total', { kind: 'bulk' });
    const sent = rx.requests.length + ry.requests.length;

    const res = await bulkReplay(a, { reason: 'first try after the outage' });
    expect(res.status, res.text).toBe(202);
    expect(res.body).toEqual({ dryRun: false, id: expect.stringMatching(/^rpl_/), count: cap });
    firstReplay = res.body.id;
    expect(await deliveryIds(t, { replay_id: firstReplay })).toEqual(oldest);

    // Both receivers still fail, so every replayed delivery is dead again.
    const done = await completed(a, firstReplay);
    expect(done).toMatchObject({ id: firstReplay, status: 'completed', total: cap, done: 0, failed: cap, reason: 'first try after the outage', filter: {} });
    expect(rx.requests.length + ry.requests.length).toBe(sent + cap);
    expect([...rx.requests, ...ry.requests].filter((r) => r.headers['webhook-replay'] === 'true')).toHaveLength(cap);
    expect(await allDead()).toHaveLength(9);
    expect(await metric(t, 'webhook_replays_total', { kind: 'bulk' })).toBe(replaysBefore + cap);

    const audit = await a.call('GET', `/v1/audit-log?action=replay.started&targetId=${firstReplay}`);
    expect(audit.body.data).toEqual([
      expect.objectContaining({
        actor: { type: 'api_key', id: await apiKeyId(t, a.id) },
        action: 'replay.started',
        target: { type: 'replay', id: firstReplay },
        reason: 'first try after the outage',
        details: { filter: {}, count: cap, limit: cap },
      }),
    ]);
  });

  it('GET /v1/replays/:id shows running while deliveries are out, then completed with the totals', async () => {
    const held = gate();
    rx.setResponder(held);
    const res = await bulkReplay(a, { filter: { endpointId: epX, reason: 'terminal' }, reason: 'X fixed its parser' });
    expect(res.status, res.text).toBe(202);
    expect(res.body.count).toBe(4);

    // The receiver holds every request, so none can have finished yet.
    expect(await progress(a, res.body.id)).toMatchObject({ status: 'running', total: 4, done: 0, failed: 0 });
    await eventually(async () => held.held >= 4, 'all four requests held at the receiver');
    expect(await progress(a, res.body.id)).toMatchObject({ status: 'running', total: 4, done: 0, failed: 0 });
    held.release();
    expect(await completed(a, res.body.id)).toMatchObject({ status: 'completed', total: 4, done: 4, failed: 0, filter: { endpointId: epX, reason: 'terminal' } });

    const audit = await a.call('GET', `/v1/audit-log?targetId=${res.body.id}`);
    expect(audit.body.data[0]).toMatchObject({ reason: 'X fixed its parser', details: { filter: { endpointId: epX, reason: 'terminal' }, count: 4, limit: cap } });
  });

  it('counts done and failed separately when some replayed deliveries fail again', async () => {
    ry.setResponder((req, res) => {
      res.writeHead(req.body.includes('"type":"invoice.paid"') ? 500 : 200).end();
    });
    const res = await bulkReplay(a, { filter: { endpointId: epY } });
    expect(res.body.count).toBe(5);
    expect(await completed(a, res.body.id)).toMatchObject({ status: 'completed', total: 5, done: 4, failed: 1 });
    expect(await allDead()).toEqual([await dlv(3, epY)]);
    yReplay = res.body.id;
  });

  it('a single replay takes one of its deliveries over: the bulk replay stays completed, without it in its counts', async () => {
    const held = gate();
    ry.setResponder(held);
    const id = await dlv(3, epY);
    const res = await replayOne(a, id, 'the invoice endpoint is fixed');
    expect(res.status, res.text).toBe(202);
    await eventually(async () => held.held >= 1, 'the single replay held at the receiver');
    // Its delivery is out again, but it is no longer that replay's work.
    expect(await progress(a, yReplay)).toMatchObject({ status: 'completed', total: 5, done: 4, failed: 0 });
    held.release();
    await eventually(async () => (await a.call('GET', `/v1/deliveries/${id}`)).body.status === 'succeeded', 'the single replay delivered');
  });

  it('an earlier replay whose deliveries a later one took over still reads as completed', async () => {
    // Every delivery of the first replay was replayed again by the two replays above.
    expect(await deliveryIds(t, { replay_id: firstReplay })).toEqual([]);
    expect(await progress(a, firstReplay)).toMatchObject({ status: 'completed', total: cap });
  });

  it('replays succeeded deliveries when the filter asks for them', async () => {
    const sent = rx.requests.length;
    const res = await bulkReplay(a, { filter: { status: 'succeeded', endpointId: epX } });
    expect(res.body.count).toBe(4);
    expect(await completed(a, res.body.id)).toMatchObject({ total: 4, done: 4, failed: 0 });
    const again = rx.requests.slice(sent);
    expect(new Set(again.map((r) => r.headers['webhook-id']))).toEqual(new Set([ev[0], ev[1], ev[3], ev[4]]));
  });

  it("tenant B can never replay, see or count A's deliveries", async () => {
    const before = await t.platform.db('deliveries').where({ tenant_id: uuidOf('tenant', a.id) }).orderBy('id').select('id', 'status', 'attempt_count', 'replay_id');
    const sent = rx.requests.length + ry.requests.length;

    expect(await dryRun(b, { endpointId: epX, status: 'succeeded' })).toMatchObject({ count: 0, sample: [] });
    expect(await dryRun(b, { endpointId: epY })).toMatchObject({ count: 0, sample: [] });
    expect(await dryRun(b, { status: 'succeeded' })).toMatchObject({ count: 0, sample: [] });
    const steal = await bulkReplay(b, { filter: { endpointId: epX, status: 'succeeded' } });
    expect(steal.status).toBe(202);
    expect(steal.body.count).toBe(0);
    expectError(await b.call('POST', `/v1/deliveries/${await dlv(1, epX)}/replay`, { body: { reason: 'not mine' } }), 404, 'not_found');
    expectError(await b.call('GET', `/v1/replays/${firstReplay}`), 404, 'not_found');
    expect((await b.call('GET', `/v1/deliveries?endpointId=${epX}`)).body.data).toEqual([]);
    const bAudit = (await b.call('GET', '/v1/audit-log?limit=500')).body.data as Array<{ target: { id: string } }>;
    expect(bAudit.map((e) => e.target.id)).toEqual(expect.not.arrayContaining([firstReplay, epX, epY, a.id]));
    // B's own (empty) replay is B's alone.
    expect((await progress(b, steal.body.id)).total).toBe(0);
    expectError(await a.call('GET', `/v1/replays/${steal.body.id}`), 404, 'not_found');

    await dispatchedMarker(t);
    expect(rx.requests.length + ry.requests.length).toBe(sent);
    expect(await t.platform.db('deliveries').where({ tenant_id: uuidOf('tenant', a.id) }).orderBy('id').select('id', 'status', 'attempt_count', 'replay_id')).toEqual(before);
  });
});
