// An endpoint changed while work waits for it: which change applies to the deliveries already
// created, and which only to new ones (docs/api.md, "Changing an endpoint while work is waiting").
// Lowered maxConcurrency and rate limits are in settings-during-drain.test.ts. Everything is judged
// by what real receivers saw and what the API shows.
import type { ServerResponse } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { uuidOf } from '../../src/domain/ids.js';
import { signatureHeader } from '../../src/domain/signing.js';
import { createEndpoint, deliveryOfEvent, publish, publishMany, statusCounts } from '../helpers/dispatch.js';
import { eventually, startTestPlatform, type TestPlatform, type TestTenant } from '../helpers/platform.js';
import { startReceiver, type ReceivedRequest, type Receiver } from '../helpers/receiver.js';

/** A receiver that answers `status` after `ms`. */
const slowReceiver = (ms: number, status = 200) =>
  startReceiver((_req: ReceivedRequest, res: ServerResponse) => {
    setTimeout(() => res.writeHead(status).end(), ms);
  });

/**
 * Waits until every attempt of the endpoint that was in flight when this was called has been
 * recorded, and answers that moment: whatever starts after it was claimed after the change.
 */
async function inFlightSettled(t: TestPlatform, endpointId: string): Promise<number> {
  // A claim or hand-off that read the endpoint just before the change can commit just after it,
  // unseen by the read below: first every transaction begun before now must end.
  const db = t.platform.db;
  const { rows } = await db.raw<{ rows: Array<{ at: string }> }>('SELECT clock_timestamp()::text AS at');
  await eventually(
    async () =>
      (await db.raw<{ rows: unknown[] }>(
        `SELECT 1 FROM pg_stat_activity
          WHERE datname = current_database() AND backend_type = 'client backend' AND pid <> pg_backend_pid() AND xact_start < ?::timestamptz`,
        [rows[0]!.at],
      )).rows.length === 0,
    'the transactions begun before the change end',
  );
  // Every claim is in its delivery's queue row (a slot's only there).
  const ids = (await db('delivery_queue').where({ endpoint_id: uuidOf('endpoint', endpointId), status: 'in_flight' }).pluck('delivery_id')) as string[];
  await eventually(async () => {
    const still = await db('delivery_queue').whereIn('delivery_id', ids).where('status', 'in_flight').pluck('delivery_id');
    return still.length === 0;
  }, 'the attempts in flight at the change are recorded');
  return Date.now();
}

const idOf = (r: ReceivedRequest) => r.headers['webhook-id'] as string;

describe('changing an endpoint while work is waiting', () => {
  let t: TestPlatform;
  let tenant: TestTenant;
  const receivers: Receiver[] = [];
  const track = (r: Receiver) => (receivers.push(r), r);
  beforeAll(async () => {
    t = await startTestPlatform({ env: { CIRCUIT_FAILURE_THRESHOLD: '3', CIRCUIT_COOLDOWN_SECONDS: '300' } });
    tenant = await t.createTenant('changes');
  });
  afterAll(async () => {
    for (const r of receivers) await r.close();
    await t.stop();
  });

  it('a new URL: the backlog goes to the new receiver; the old one gets nothing once its attempts in flight end', async () => {
    const before = track(await slowReceiver(100));
    const after = track(await startReceiver());
    const ep = await createEndpoint(tenant, { url: before.url, eventTypes: ['url.*'], maxConcurrency: 2 });
    const ids = await publishMany(tenant, 60, 8, 'url.moved');
    await eventually(async () => before.requests.length >= 4, 'the drain is under way');

    const res = await tenant.call('PATCH', `/v1/endpoints/${ep.id}`, { body: { url: after.url } });
    expect(res.status, res.text).toBe(200);
    const settled = await inFlightSettled(t, ep.id);

    await eventually(async () => ((await statusCounts(t, ep.id)).succeeded ?? 0) === 60, 'every delivery succeeded', 30_000);
    expect(before.requests.filter((r) => r.at > settled)).toEqual([]);
    const got = new Set([...before.requests.map(idOf), ...after.requests.map(idOf)]);
    expect(ids.every((id) => got.has(id))).toBe(true);
    expect(after.requests.length).toBeGreaterThan(0);
  });

  it('a new URL starts with a closed circuit: work held by the old receiver’s open circuit flows at once', async () => {
    const failing = track(await startReceiver((_req, res) => void res.writeHead(500).end()));
    const healthy = track(await startReceiver());
    const ep = await createEndpoint(tenant, { url: failing.url, eventTypes: ['circ.*'], maxConcurrency: 1 });
    const ids = await publishMany(tenant, 10, 4, 'circ.held');
    await eventually(async () => (await tenant.call('GET', `/v1/endpoints/${ep.id}`)).body.circuit.state === 'open', 'the circuit opens');

    const res = await tenant.call('PATCH', `/v1/endpoints/${ep.id}`, { body: { url: healthy.url } });
    expect(res.status, res.text).toBe(200);
    const shown = (await tenant.call('GET', `/v1/endpoints/${ep.id}`)).body;
    expect(shown.circuit).toEqual({ state: 'closed', openUntil: null, consecutiveFailures: 0 });
    // The old circuit's cooldown is 300 s: this arrives well before only because the circuit reset.
    await eventually(async () => ids.every((id) => healthy.eventIds().has(id)), 'the held events at the new receiver', 10_000);
  });

  it('a new secret: every queued delivery is signed with both secrets during the overlap', async () => {
    const receiver = track(await slowReceiver(50));
    const ep = await createEndpoint(tenant, { url: receiver.url, eventTypes: ['sec.*'], maxConcurrency: 1 });
    await publishMany(tenant, 30, 8, 'sec.signed');
    await eventually(async () => receiver.requests.length >= 3, 'the drain is under way');

    const rotated = await tenant.call('POST', `/v1/endpoints/${ep.id}/secret/rotate`);
    expect(rotated.status, rotated.text).toBe(200);
    const settled = await inFlightSettled(t, ep.id);
    await eventually(async () => ((await statusCounts(t, ep.id)).succeeded ?? 0) === 30, 'every delivery succeeded', 30_000);

    const later = receiver.requests.filter((r) => r.at > settled);
    expect(later.length).toBeGreaterThan(0);
    for (const r of later) {
      const ts = Number(r.headers['webhook-timestamp']);
      const sent = (r.headers['webhook-signature'] as string).split(' ');
      expect(sent).toHaveLength(2);
      expect(sent).toContain(signatureHeader([rotated.body.secret], idOf(r), ts, r.body));
      expect(sent).toContain(signatureHeader([ep.secret], idOf(r), ts, r.body));
    }
  });

  it('a lower maxAttempts applies to a delivery already waiting, at its next decision', async () => {
    const failing = track(await startReceiver((_req, res) => void res.writeHead(503).end()));
    const ep = await createEndpoint(tenant, { url: failing.url, eventTypes: ['att.*'], retryPolicy: { maxAttempts: 50, baseDelayMs: 300, maxDelayMs: 300 } });
    // One delivery: two failures stay under the circuit's threshold (3), which would hold it back.
    const ids = [await publish(tenant, 'att.one')];
    await eventually(async () => ((await deliveryOfEvent(tenant, ids[0]!))?.attemptCount ?? 0) >= 2, 'the delivery has failed twice');

    const res = await tenant.call('PATCH', `/v1/endpoints/${ep.id}`, { body: { retryPolicy: { maxAttempts: 3, baseDelayMs: 300, maxDelayMs: 300 } } });
    expect(res.status, res.text).toBe(200);
    const attemptsAtChange = await Promise.all(ids.map(async (id) => (await deliveryOfEvent(tenant, id))!.attemptCount));
    for (const [i, id] of ids.entries()) {
      const dead = await eventually(async () => {
        const d = await deliveryOfEvent(tenant, id);
        return d?.status === 'dead' && d;
      }, 'dead at its next decision');
      expect(dead.deadReason).toBe('max_attempts');
      // An attempt in flight at the change is decided under the policy it started with, at most.
      expect(dead.attemptCount).toBeLessThanOrEqual(Math.max(3, attemptsAtChange[i]! + 1));
    }
  });

  it('a new maxEventAgeSeconds applies to deliveries created after it: the deadline is fixed at fan-out', async () => {
    const receiver = track(await startReceiver());
    const ep = await createEndpoint(tenant, { url: receiver.url, eventTypes: ['age.*'], retryPolicy: { maxEventAgeSeconds: 3600 } });
    expect((await tenant.call('POST', `/v1/endpoints/${ep.id}/pause`)).status).toBe(200);
    const older = await publish(tenant, 'age.older');

    expect((await tenant.call('PATCH', `/v1/endpoints/${ep.id}`, { body: { retryPolicy: { maxEventAgeSeconds: 1 } } })).status).toBe(200);
    const newer = await publish(tenant, 'age.newer');
    await eventually(async () => (await deliveryOfEvent(tenant, newer))?.deadReason === 'max_age', 'the newer delivery dies at its 1 s deadline');
    expect((await deliveryOfEvent(tenant, older))?.status).toBe('pending');

    expect((await tenant.call('POST', `/v1/endpoints/${ep.id}/resume`)).status).toBe(200);
    await eventually(async () => receiver.eventIds().has(older), 'the older delivery arrives after the resume');
    expect(receiver.eventIds().has(newer)).toBe(false);
  });

  it('a new event-type filter applies to events accepted after it; waiting deliveries stay', async () => {
    const receiver = track(await startReceiver());
    const ep = await createEndpoint(tenant, { url: receiver.url, eventTypes: ['flt.kept', 'flt.dropped'] });
    expect((await tenant.call('POST', `/v1/endpoints/${ep.id}/pause`)).status).toBe(200);
    const waiting = [await publish(tenant, 'flt.kept'), await publish(tenant, 'flt.dropped')];

    expect((await tenant.call('PATCH', `/v1/endpoints/${ep.id}`, { body: { eventTypes: ['flt.kept'] } })).status).toBe(200);
    const keptAfter = await publish(tenant, 'flt.kept');
    const droppedAfter = await publish(tenant, 'flt.dropped');
    expect(await deliveryOfEvent(tenant, droppedAfter)).toBeUndefined();

    expect((await tenant.call('POST', `/v1/endpoints/${ep.id}/resume`)).status).toBe(200);
    await eventually(async () => [...waiting, keptAfter].every((id) => receiver.eventIds().has(id)), 'the waiting deliveries and the new match arrive');
    expect(receiver.eventIds().has(droppedAfter)).toBe(false);
  });
});
