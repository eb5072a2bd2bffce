import { z } from 'zod';
import { replayBody } from './replay-schemas.js';
import { createEndpointBody, eventSchema, timeRange } from './schemas.js';

// Schemas of POST /v1/endpoints/:id/backfill.

export const backfillBody = z.strictObject({
  since: timeRange.since.unwrap().describe('Start of the window (inclusive): events accepted at or after it. Within RETENTION_DAYS'),
  until: timeRange.until.describe('End of the window (exclusive); now by default. After since'),
  eventTypes: createEndpointBody.shape.eventTypes
    .unwrap()
    .min(1)
    .optional()
    .describe("Narrows the endpoint's own eventTypes: an event must match both. Absent: the endpoint's filter alone"),
  dryRun: z.boolean().optional().describe('Count and sample what would be created; create nothing'),
  reason: replayBody.shape.reason.describe('Why: recorded in the audit log'),
});

export const backfillStarted = z
  .object({
    id: z.string().describe('The backfill, to follow with GET /v1/replays/{id}'),
    total: z.number().describe('Deliveries created: one per matching event that had none to this endpoint'),
  })
  .meta({ id: 'BackfillStarted' });

export const backfillPreview = z
  .object({
    total: z.number().describe('Deliveries a backfill would create now'),
    sample: z.array(eventSchema).describe('The first (oldest) events it would deliver, at most 10'),
  })
  .meta({ id: 'BackfillPreview' });
