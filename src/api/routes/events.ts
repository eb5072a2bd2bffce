import { badRequest, notFound } from '../../domain/errors.js';
import { deliveryColumns, rowToDeliverySummary, type DeliveryRow } from '../../store/deliveries-store.js';
import { eventColumns, publishEvent, rowToEvent, whereEventType, type EventRow } from '../../store/events-store.js';
import { paginate } from '../../store/pagination.js';
import type { ApiContext } from '../context.js';
import type { ApiRoutes } from '../route.js';
import { eventSchema, idParams, listEventsQuery, page, publishedSchema, publishEventBody } from '../schemas.js';

export function eventRoutes(routes: ApiRoutes, ctx: ApiContext): void {
  const tag = 'events';
  routes.add(
    {
      method: 'post',
      path: '/v1/events',
      summary: 'Publish an event; the same Idempotency-Key returns the first event and sends nothing new',
      tag,
      auth: 'tenant',
      body: publishEventBody,
      success: { status: 202, description: 'Accepted (200 when the Idempotency-Key was seen before)', schema: publishedSchema },
      errors: [409],
    },
    async ({ req, body, scope }) => {
      const key = req.get('idempotency-key');
      if (key !== undefined && (key.length === 0 || key.length > 255)) {
        throw badRequest('invalid_idempotency_key', 'Idempotency-Key must be 1 to 255 characters');
      }
      // Operational events use keys in this namespace; a tenant key there could suppress one.
      if (key?.startsWith('platform.')) {
        throw badRequest('invalid_idempotency_key', 'Idempotency-Key must not start with "platform."');
      }
      const result = await publishEvent(scope, { type: body.type, messageId: body.messageId, data: body.data, idempotencyKey: key }, ctx.config.retry.maxEventAgeSeconds);
      ctx.lifecycle.fannedOut(result.fanOut);
      return { status: result.duplicate ? 200 : 202, body: { ...rowToEvent(result.event), duplicate: result.duplicate } };
    },
  );
  routes.add(
    {
      method: 'get',
      path: '/v1/events',
      summary: 'Search events by type (or a type prefix ending in .*), message id and time range',
      tag,
      auth: 'tenant',
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
      summary: 'Get an event with its receipt count and deliveries',
      tag,
      auth: 'tenant',
      params: idParams,
      success: { status: 200, description: 'The event', schema: eventSchema },
      errors: [404],
    },
    async ({ params, scope }) => {
      const row: EventRow | undefined = await scope.from('events').where('events.id', params.id).first(eventColumns);
      if (!row) throw notFound('event');
      const [{ count }] = await scope.from('receipts').where('receipts.event_id', row.id).count({ count: '*' });
      const deliveries: DeliveryRow[] = await scope.from('deliveries').where('deliveries.event_id', row.id).orderBy('deliveries.id').select(deliveryColumns);
      return {
        status: 200,
        body: { ...rowToEvent(row, { payload: true }), receiptCount: Number(count), deliveries: deliveries.map(rowToDeliverySummary) },
      };
    },
  );
}
