import { z } from 'zod';
import { windowOrderProblem } from '../domain/time-window.js';
import { invalidCursor, isCursor } from '../store/pagination.js';

// The pieces of listings and filters: pages, time windows, filter values.

/** Spread into z.strictObject: a query parameter a route does not name is refused. */
export const pageQuery = {
  limit: z.coerce.number().int().min(1).max(500).default(50),
  // Empty is the first page, as absent is; anything else must be a cursor this API gave out.
  cursor: z
    .string()
    .max(200)
    .refine((c) => c === '' || isCursor(c), { message: invalidCursor.message, params: { code: invalidCursor.code } })
    .optional(),
};

export const isoDate = z.iso.datetime({ offset: true }).transform((v) => new Date(v));
export const timeRange = { since: isoDate.optional(), until: isoDate.optional() };

/**
 * Refines a schema holding `timeRange`: a reversed window is refused (src/domain/time-window.ts).
 * Given with `onAnyObject`: zod skips an object's refinement once a field failed in a way it cannot go
 * past (an unknown enum value), and the answer must still list every problem. It runs for any
 * object, then; a field that failed is not a Date, which windowOrderProblem ignores.
 */
function windowInOrder(value: { since?: Date; until?: Date }, ctx: z.RefinementCtx): void {
  const problem = windowOrderProblem(value.since, value.until);
  if (problem) ctx.addIssue({ code: 'custom', path: [problem.path], message: problem.message });
}

const onAnyObject = { when: (payload: { value: unknown }) => typeof payload.value === 'object' && payload.value !== null };

/** A filter's value: an empty one would silently match everything, as if the filter were absent. */
export const filterValue = (max: number) => z.string().min(1, 'must not be empty; leave it out to filter nothing').max(max);

/** A query or filter holding `timeRange`, refusing a reversed window beside its other problems. */
export const withOrderedWindow = <T extends z.ZodObject>(schema: T): T => schema.superRefine(windowInOrder, onAnyObject);
