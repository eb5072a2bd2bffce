import { conflict } from '../domain/errors.js';
import { idOfUuid, newStoredId, uuidOfId } from '../domain/ids.js';
import { stringifyJson, type RawJson } from '../domain/raw-json.js';
import type { TenantScope } from './tenant-scope.js';

export interface TestSend {
  type: string;
  /** The payload as the tenant wrote it. */
  data: RawJson;
}

/**
 * A test event for one endpoint: a real event and a single delivery to that endpoint, written in one
 * transaction through `fan_out_insert` (db/functions/fan_out_insert.sql), over `fan_out_write`, which
 * every other event's deliveries come from too, with this endpoint as its only target. From there the delivery is like any
 * other: admitted, signed and retried by the dispatcher, listed under the endpoint's deliveries.
 * Answers undefined when the endpoint does not exist (or is another tenant's).
 */
export async function sendTestEvent(
  scope: TenantScope,
  endpointId: string,
  input: TestSend,
  defaultMaxAgeSeconds: number,
): Promise<{ eventId: string; deliveryId: string } | undefined> {
  const key = uuidOfId('endpoint', endpointId);
  if (key === null) return undefined;
  return scope.transaction(async (s) => {
    // FOR SHARE: a concurrent delete or disable waits for this delivery to exist, then sees it.
    const ep = await s
      .from('endpoints')
      .whereNull('endpoints.deleted_at')
      .where('endpoints.id', key)
      .forShare()
      .first('id', 'status', 'retry_policy');
    if (!ep) return undefined;
    if (ep.status === 'disabled') throw conflict('endpoint_disabled', 'the endpoint is disabled; enable it (PATCH status: active) before sending a test event');
    // Drawn as stored and named for the API, as publish and intake draw theirs.
    const eventKey = newStoredId();
    const eventId = idOfUuid('event', eventKey);
    const deliveryKey = newStoredId();
    const deliveryId = idOfUuid('delivery', deliveryKey);
    const now = new Date();
    await s.insert('events', {
      id: eventKey,
      origin: 'api',
      type: input.type,
      data: stringifyJson(input.data) ?? null,
      created_at: now,
      test_endpoint_id: key,
    });
    const maxAge = (ep.retry_policy as Record<string, unknown>).maxEventAgeSeconds;
    // Composed, not built: a call of a PL/pgSQL function with a row constructor.
    await s.composed(
      `SELECT * FROM fan_out_insert(:eventId, :tenantId, :now::timestamptz, NULL, NULL, :defaultMaxAgeSeconds::int,
                                    ARRAY[ROW(:endpointId::uuid, true, false, :maxAgeSeconds::int)::fan_out_target], ARRAY[:deliveryId]::text[])`,
      { eventId: eventKey, now, defaultMaxAgeSeconds, endpointId: key, maxAgeSeconds: typeof maxAge === 'number' ? maxAge : null, deliveryId: deliveryKey },
    );
    return { eventId, deliveryId };
  });
}
