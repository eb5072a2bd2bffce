import { notFound } from '../../domain/errors.js';
import { rowToDeliverySummary } from '../../store/deliveries-store.js';
import { expiredEvent, findEventWithDeliveries, searchEventsQuery } from '../../store/event-lookup-store.js';
import { publishEvent, rowToEvent, type EventRow } from '../../store/events-store.js';
import { paginate } from '../../store/pagination.js';
import type { ApiContext } from '../context.js';
import { rawJsonMember } from '../json-body.js';
import type { ApiRoutes } from '../route.js';
import { requestSpan } from '../server-spans.js';
import { eventSchema, idParams, listEventsQuery, page, publishedSchema, publishEventBody, publishEventHeaders } from '../schemas.js';

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
    async ({ req, res, headers, body, scope }) => {
      const key = headers['Idempotency-Key'];
      // `data` is validated as parsed but forwarded as the client wrote it.
      const data = rawJsonMember(req, 'data');
      const input = { type: body.type, messageId: body.messageId, data, idempotencyKey: key, span: requestSpan(res) };
      const result = await publishEvent(scope, input, ctx.config.retry.maxEventAgeSeconds);
      ctx.lifecycle.fannedOut(result.fanOut);
      return { status: result.duplicate ? 200 : 202, body: { ...rowToEvent(result.event), duplicate: result.duplicate } };
    },
  );
  routes.add(
    {
      method: 'get',
      path: '/v1/events',
      operationId: 'listEvents',
      reads: 'replica',
      summary: 'Search events by type (or a type prefix ending in .*), message id and time range',
      tag,
      auth: 'tenant',
      portal: 'scoped',
      query: listEventsQuery,
      success: { status: 200, description: 'A page of events, newest first', schema: page(eventSchema) },
    },
    async ({ query, scope }) => ({
      status: 200,
      body: await paginate(searchEventsQuery(scope, query), 'events.id', query, (r: EventRow) => rowToEvent(r), 'event'),
    }),
  );
  routes.add(
    {
      method: 'get',
      path: '/v1/events/:id',
      operationId: 'getEvent',
      reads: 'replica-when-read-only',
      summary: 'Get an event with its receipt count and deliveries',
      tag,
      auth: 'tenant',
      portal: 'scoped',
      params: idParams,
      success: { status: 200, description: 'The event', schema: eventSchema },
      errors: [404],
    },
    async ({ params, scope }) => {
      const found = await findEventWithDeliveries(scope, params.id);
      if (!found) throw (await expiredEvent(scope, params.id)) ?? notFound('event');
      return {
        status: 200,
        body: { ...rowToEvent(found.event, { payload: true }), receiptCount: found.receiptCount, deliveries: found.deliveries.map(rowToDeliverySummary) },
      };
    },
  );
}
