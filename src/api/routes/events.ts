import type { Knex } from 'knex';
import { AppError, notFound } from '../../domain/errors.js';
import { typeIdTime } from '../../domain/retention.js';
import { deliveryColumns, rowToDeliverySummary, type DeliveryRow } from '../../store/deliveries-store.js';
import { eventColumns, publishEvent, rowToEvent, whereEventType, type EventRow } from '../../store/events-store.js';
import { paginate } from '../../store/pagination.js';
import { watermark } from '../../store/retention-store.js';
import type { ApiContext } from '../context.js';
import { rawJsonMember } from '../json-body.js';
import type { ApiRoutes } from '../route.js';
import { eventSchema, idParams, listEventsQuery, page, publishedSchema, publishEventBody, publishEventHeaders } from '../schemas.js';

/**
 * An event id says when it was made: one older than what retention has removed, and not found, has
 * expired (404 `expired`). Anything else not found is an ordinary 404; an id of an event that never
 * existed in the removed range cannot be told apart, and also answers `expired`.
 */
async function expiredEvent(db: Knex, id: string): Promise<AppError | undefined> {
  const madeAt = typeIdTime(id);
  const removedBefore = madeAt && (await watermark(db, 'events'));
  if (!madeAt || !removedBefore || madeAt >= removedBefore) return undefined;
  return new AppError(404, 'expired', `event ${id} has expired: retention removed events made before ${removedBefore.toISOString()}`);
}

export function eventRoutes(routes: ApiRoutes, ctx: ApiContext): void {
  const tag = 'events';
  routes.add(
    {
      method: 'post',
      path: '/v1/events',
      operationId: 'publishEvent',
      summary: 'Publish an event; the same Idempotency-Key returns the first event and sends nothing new',
      tag,
      auth: 'tenant',
      headers: publishEventHeaders,
      body: publishEventBody,
      success: [
        { status: 202, description: 'Accepted: a new event, fanned out to the subscribed endpoints', schema: publishedSchema },
        { status: 200, description: 'This Idempotency-Key was seen before: the first event, and nothing new is sent', schema: publishedSchema },
      ],
      errors: [409],
    },
    async ({ req, headers, body, scope }) => {
      const key = headers['Idempotency-Key'];
      // `data` is validated as parsed but forwarded as the client wrote it.
      const data = rawJsonMember(req, 'data');
      const result = await publishEvent(scope, { type: body.type, messageId: body.messageId, data, idempotencyKey: key }, ctx.config.retry.maxEventAgeSeconds);
      ctx.lifecycle.fannedOut(result.fanOut);
      return { status: result.duplicate ? 200 : 202, body: { ...rowToEvent(result.event), duplicate: result.duplicate } };
    },
  );
  routes.add(
    {
      method: 'get',
      path: '/v1/events',
      operationId: 'listEvents',
      summary: 'Search events by type (or a type prefix ending in .*), message id and time range',
      tag,
      auth: 'tenant',
      portal: 'scoped',
      query: listEventsQuery,
      success: { status: 200, description: 'A page of events, newest first', schema: page(eventSchema) },
    },
    async ({ query, scope }) => {
      const q = scope.from('events').select(eventColumns);
      if (query.type) whereEventType(q, 'events.type', query.type);
      if (query.messageId) q.where('events.message_id', query.messageId);
      if (query.since) q.where('events.created_at', '>=', query.since);
      if (query.until) q.where('events.created_at', '<', query.until);
      return { status: 200, body: await paginate(q, 'events.id', query, (r: EventRow) => rowToEvent(r)) };
    },
  );
  routes.add(
    {
      method: 'get',
      path: '/v1/events/:id',
      operationId: 'getEvent',
      summary: 'Get an event with its receipt count and deliveries',
      tag,
      auth: 'tenant',
      portal: 'scoped',
      params: idParams,
      success: { status: 200, description: 'The event', schema: eventSchema },
      errors: [404],
    },
    async ({ params, scope }) => {
      const row: EventRow | undefined = await scope.from('events').where('events.id', params.id).first(eventColumns);
      if (!row) throw (await expiredEvent(scope.db, params.id)) ?? notFound('event');
      const [{ count }] = await scope.from('receipts').where('receipts.event_id', row.id).count({ count: '*' });
      const deliveries: DeliveryRow[] = await scope.from('deliveries').where('deliveries.event_id', row.id).orderBy('deliveries.id').select(deliveryColumns);
      return {
        status: 200,
        body: { ...rowToEvent(row, { payload: true }), receiptCount: Number(count), deliveries: deliveries.map(rowToDeliverySummary) },
      };
    },
  );
}
