import { z } from 'zod';
import { REPLAY_KINDS, REPLAY_STATUSES } from '../domain/replays.js';
import { filterValue, pageQuery, timeRange, withOrderedWindow } from './query-schemas.js';
import { deadLetterReasonSchema, deliverySchema, finalStatusSchema } from './schemas.js';

// Schemas of replays (one delivery, a bulk replay and its progress) and of the audit log.

export const replayBody = z.strictObject({ reason: z.string().trim().min(1).max(1000) });
export const replayFilterSchema = withOrderedWindow(
  z.strictObject({
    status: finalStatusSchema.optional(),
    endpointId: filterValue(100).optional(),
    eventType: filterValue(200).optional().describe('An event type, or a prefix ending in .*'),
    reason: deadLetterReasonSchema.optional(),
    ...timeRange,
  }),
);
export const bulkReplayBody = z.strictObject({
  filter: replayFilterSchema.default({}),
  reason: replayBody.shape.reason,
  limit: z.number().int().min(1).optional(),
  dryRun: z.boolean().optional(),
});
export const replayAccepted = z.object({ status: z.literal('replaying'), deliveryId: z.string() }).meta({ id: 'ReplayAccepted' });
export const bulkReplayResult = z
  .object({
    id: z.string().optional().describe('The replay, to follow with GET /v1/replays/{id}; absent on a dry run'),
    count: z.number().describe('Deliveries replayed (or, on a dry run, that would be): at most the limit'),
    dryRun: z.boolean(),
    matching: z.number().optional().describe('Dry run only: every delivery the filter matches, before the limit'),
    sample: z.array(deliverySchema).optional().describe('Dry run only: the first deliveries the replay would take'),
  })
  .meta({ id: 'BulkReplayResult' });
export const replayProgressSchema = z
  .object({ id: z.string(), kind: z.enum(REPLAY_KINDS).describe('A bulk replay, or a backfill of one endpoint'), status: z.enum(REPLAY_STATUSES), total: z.number(), done: z.number(), failed: z.number(), reason: z.string(), filter: z.unknown(), createdAt: z.string() })
  .meta({ id: 'ReplayProgress' });
export const auditQuery = withOrderedWindow(
  z.strictObject({
    ...pageQuery,
    ...timeRange,
    action: filterValue(100).optional(),
    targetType: filterValue(100).optional(),
    targetId: filterValue(100).optional(),
  }),
);
export const auditEntrySchema = z
  .object({
    id: z.string(),
    actor: z.object({ type: z.string(), id: z.string().nullable() }),
    action: z.string(),
    target: z.object({ type: z.string(), id: z.string() }),
    reason: z.string().nullable(),
    details: z.unknown(),
    createdAt: z.string(),
  })
  .meta({ id: 'AuditEntry' });
