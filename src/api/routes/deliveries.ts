import { notFound } from '../../domain/errors.js';
import { attemptsFor, findDelivery, listDeliveriesQuery, rowToDelivery, type DeliveryRow } from '../../store/deliveries-store.js';
import { messageTimeline } from '../../store/messages-store.js';
import { paginate } from '../../store/pagination.js';
import type { ApiRoutes } from '../route.js';
import { deliverySchema, idParams, listDeliveriesQuery as listQuery, messageParams, messageSchema, page } from '../schemas.js';

export function deliveryRoutes(routes: ApiRoutes): void {
  routes.add(
    {
      method: 'get',
      path: '/v1/deliveries',
      operationId: 'listDeliveries',
      reads: 'replica',
      summary: 'Search deliveries by status, dead-letter reason, endpoint, event, event type and time range',
      tag: 'deliveries',
      auth: 'tenant',
      portal: 'scoped',
      query: listQuery,
      success: { status: 200, description: 'A page of deliveries, newest first', schema: page(deliverySchema) },
    },
    async ({ query, scope }) => ({
      status: 200,
      body: await paginate(listDeliveriesQuery(scope, query), 'deliveries.id', query, (r: DeliveryRow) => rowToDelivery(r), 'delivery'),
    }),
  );
  routes.add(
    {
      method: 'get',
      path: '/v1/deliveries/:id',
      operationId: 'getDelivery',
      reads: 'replica-when-read-only',
      summary: 'Get a delivery with every attempt',
      tag: 'deliveries',
      auth: 'tenant',
      portal: 'scoped',
      params: idParams,
      success: { status: 200, description: 'The delivery', schema: deliverySchema },
      errors: [404],
    },
    async ({ params, scope }) =>
      scope.snapshot(async (read) => {
        const row = await findDelivery(read, params.id);
        if (!row) throw notFound('delivery');
        const attempts = await attemptsFor(read, [row.id]);
        return { status: 200 as const, body: rowToDelivery(row, attempts.get(row.id) ?? []) };
      }),
  );
  routes.add(
    {
      method: 'get',
      path: '/v1/messages/:messageId',
      operationId: 'getMessageTimeline',
      reads: 'replica-when-read-only',
      summary: "A message's current status and timeline: events, their receipts, deliveries and attempts",
      tag: 'messages',
      auth: 'tenant',
      portal: 'scoped',
      params: messageParams,
      success: { status: 200, description: 'The timeline', schema: messageSchema },
      errors: [404],
    },
    async ({ params, scope }) => {
      const timeline = await messageTimeline(scope, params.messageId);
      if (!timeline) throw notFound('message');
      return { status: 200, body: timeline };
    },
  );
}
