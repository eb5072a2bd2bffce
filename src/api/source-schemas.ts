import { z } from 'zod';
import { HMAC_ALGORITHMS, HMAC_ENCODINGS, hmacConfigProblems } from '../domain/hmac-source.js';
import { SOURCE_TYPES } from '../domain/sources.js';

/** Request and response shapes of /v1/sources (schemas.ts re-exports them). */
export const sourceTypeSchema = z.enum(SOURCE_TYPES);
// An HTTP field name (RFC 9110 token); compared case-insensitively.
const headerName = z.string().min(1).max(100).regex(/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/, 'must be an HTTP header name');
export const hmacConfigSchema = z
  .strictObject({
    header: headerName.describe('The header carrying the signature'),
    algorithm: z.enum(HMAC_ALGORITHMS),
    encoding: z.enum(HMAC_ENCODINGS).describe('How the digest is written in the header'),
    prefix: z.string().min(1).max(50).optional().describe('Text before the digest, e.g. sha256='),
    timestampHeader: headerName.optional().describe('A header with unix seconds; outside toleranceSeconds the call is refused'),
    toleranceSeconds: z.number().int().min(1).max(86_400).optional().describe('300 by default'),
    signedContent: z.string().min(1).max(200).describe('What is signed: {body} once, optionally {timestamp} and {id}, e.g. {timestamp}.{body}'),
    idHeader: headerName.optional().describe('The event id, the same on every retry: duplicates become one event'),
    typeHeader: headerName.optional().describe('The event type; otherwise the body field typeField'),
    typeField: z.string().min(1).max(100).optional().describe('Top-level body field with the event type when there is no typeHeader (type by default)'),
  })
  // Run even when a field is malformed, so one answer lists every problem.
  .superRefine(
    (config: unknown, ctx) => {
      if (typeof config !== 'object' || config === null) return;
      for (const problem of hmacConfigProblems(config as Record<string, unknown>)) ctx.addIssue({ code: 'custom', path: [problem.path], message: problem.message });
    },
    { when: () => true },
  )
  .meta({ id: 'HmacSourceConfig' });
export const createSourceBody = z
  .strictObject({
    type: sourceTypeSchema,
    name: z.string().trim().min(1).max(200),
    secret: z.string().min(16).max(512).optional(),
    reconcile: z
      .strictObject({
        baseUrl: z.url({ protocol: /^https?$/ }),
        apiKey: z.string().min(1).max(1024),
        afterSeconds: z.number().int().min(10).max(604_800).optional(),
      })
      .optional(),
    hmac: hmacConfigSchema.optional().describe('Required for type hmac, refused for any other type'),
  })
  .superRefine(
    (body: unknown, ctx) => {
      if (typeof body !== 'object' || body === null) return;
      const { type, hmac } = body as { type?: unknown; hmac?: unknown };
      if (type === 'hmac' && hmac === undefined) ctx.addIssue({ code: 'custom', path: ['hmac'], message: 'is required for type hmac' });
      if (type !== 'hmac' && hmac !== undefined) ctx.addIssue({ code: 'custom', path: ['hmac'], message: 'is only for type hmac' });
    },
    { when: () => true },
  );
export const sourceSchema = z
  .object({
    id: z.string(),
    type: sourceTypeSchema,
    name: z.string(),
    ingestUrl: z.string(),
    reconcile: z.object({ baseUrl: z.string(), afterSeconds: z.number() }).nullable(),
    hmac: hmacConfigSchema.optional().describe('Only on sources of type hmac'),
    createdAt: z.string(),
    updatedAt: z.string(),
    previousSecretExpiresAt: z.string().nullable().describe('After a new secret: until then the previous secret also verifies callbacks'),
    secret: z.string().optional().describe('Only on creation, and only when the platform generated it'),
  })
  .meta({ id: 'Source' });
// Only what is sent changes; `reconcile: null` stops reconciliation. An empty change is refused.
export const patchSourceBody = z
  .strictObject({
    name: createSourceBody.shape.name.optional(),
    secret: createSourceBody.shape.secret.describe('The new secret; the previous one keeps verifying for 24 h'),
    reconcile: createSourceBody.shape.reconcile.unwrap().nullable().optional(),
  })
  .refine((body) => Object.keys(body).length > 0, 'at least one field is required');
