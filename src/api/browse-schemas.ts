import { z } from 'zod';
import { DEAD_LETTER_REASONS } from '../domain/delivery-status.js';
import { DEAD_LETTER_ENDPOINTS_CAP } from '../store/dead-letters-store.js';
import { EVENT_TYPE_COUNT_CAP, EVENT_TYPE_SCAN_CAP, EVENT_TYPES_CAP } from '../store/event-types-store.js';

// Schemas of the read-only summaries the portal's overview and event catalog are built on.

export const eventTypeSummarySchema = z
  .object({
    type: z.string(),
    count: z
      .number()
      .describe(
        `Events of this type kept now (within retention), counted up to ${EVENT_TYPE_COUNT_CAP}. A portal session limited to endpoints counts the events delivered to them among the newest ${EVENT_TYPE_SCAN_CAP} of the type, and does not list a type none of those went to`,
      ),
    countCapped: z.boolean().describe(`True when there are more than ${EVENT_TYPE_COUNT_CAP}: count is then ${EVENT_TYPE_COUNT_CAP}, a lower bound`),
    latest: z
      .object({
        id: z.string(),
        createdAt: z.string(),
        messageId: z.string().nullable(),
        data: z.unknown().describe("The event's data exactly as received: same digits, escapes and key order"),
      })
      .describe('The most recent event of this type, as an example'),
  })
  .meta({ id: 'EventTypeSummary' });

export const eventTypeListSchema = z
  .object({
    data: z.array(eventTypeSummarySchema).describe(`In alphabetical order; at most ${EVENT_TYPES_CAP} types`),
    truncated: z.boolean().describe(`True when more types exist than the ${EVENT_TYPES_CAP} listed: search events by type to find the others`),
  })
  .meta({ id: 'EventTypeList' });

const byReason = z.object(Object.fromEntries(DEAD_LETTER_REASONS.map((r) => [r, z.number()])) as Record<(typeof DEAD_LETTER_REASONS)[number], z.ZodNumber>);

export const deadLetterSummarySchema = z
  .object({
    total: z.number().describe('Deliveries dead-lettered now (status dead) and still kept by retention, exactly counted'),
    byReason: byReason.describe('The total split by why each delivery was given up on'),
    byEndpoint: z
      .array(z.object({ endpointId: z.string(), count: z.number() }))
      .describe(`Endpoints with at least one dead-lettered delivery, most first; at most ${DEAD_LETTER_ENDPOINTS_CAP}`),
    byEndpointTruncated: z.boolean().describe('True when more endpoints have dead letters than byEndpoint lists'),
  })
  .meta({ id: 'DeadLetterSummary' });
