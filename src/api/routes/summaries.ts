import { deadLetterSummary } from '../../store/dead-letters-store.js';
import { listEventTypes } from '../../store/event-types-store.js';
import { deadLetterSummarySchema, eventTypeListSchema } from '../browse-schemas.js';
import type { ApiRoutes } from '../route.js';

/** Read-only summaries over events and deliveries: the event catalog and the dead-letter count. */
export function summaryRoutes(routes: ApiRoutes): void {
  routes.add(
    {
      method: 'get',
      path: '/v1/event-types',
      operationId: 'listEventTypes',
      reads: 'replica',
      summary: 'The event types received within retention, each with its count and newest event as an example',
      tag: 'events',
      auth: 'tenant',
      portal: 'scoped',
      success: { status: 200, description: 'The event types, alphabetically, at most 100', schema: eventTypeListSchema },
    },
    async ({ scope }) => ({ status: 200, body: await listEventTypes(scope) }),
  );
  routes.add(
    {
      method: 'get',
      path: '/v1/dead-letters/summary',
      operationId: 'getDeadLetterSummary',
      reads: 'replica',
      summary: 'How many deliveries are dead-lettered now, by reason and by endpoint; list them with GET /v1/deliveries?status=dead',
      tag: 'deliveries',
      auth: 'tenant',
      portal: 'scoped',
      success: { status: 200, description: 'The counts', schema: deadLetterSummarySchema },
    },
    async ({ scope }) => ({ status: 200, body: await deadLetterSummary(scope) }),
  );
}
