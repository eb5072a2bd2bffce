import { z } from 'zod';
import { eventTypeFilterPattern } from '../domain/event-types.js';
import { CIRCUIT_STATES } from '../domain/circuit.js';
import { ATTEMPT_OUTCOMES, DEAD_LETTER_REASONS, DELIVERY_STATUSES, FINAL_STATUSES, TRIGGERS, WAIT_REASONS } from '../domain/delivery-status.js';
import { MASKED_HEADER_VALUE } from '../domain/endpoint-headers.js';
import { ENDPOINT_STATUSES, ORDERINGS } from '../domain/endpoints.js';
import { INTAKE_OUTCOMES } from '../domain/events.js';
import { SIGNATURE_SCHEMES } from '../domain/signing.js';
import { endpointHeaders, endpointTls, endpointTlsView, eventFilter } from './endpoint-schemas.js';
import { filterValue, isoDate, pageQuery, timeRange, withOrderedWindow } from './query-schemas.js';

export const errorSchema = z
  .object({
    error: z.object({
      code: z.string().describe('Stable, machine-readable: validation_failed, not_found, unsupported_media_type, ...'),
      message: z.string().describe('For people; on a validation error it summarises every problem'),
      details: z
        .array(z.object({ path: z.string(), message: z.string() }))
        .optional()
        .describe('Validation errors only: every problem, each with the field, query parameter or header it concerns'),
    }),
  })
  .meta({ id: 'Error' });

export const idParams = z.object({ id: z.string().min(1).max(100) });

export { pageQuery, timeRange } from './query-schemas.js';

export const page = <T extends z.ZodType>(item: T) => z.object({ data: z.array(item), nextCursor: z.string().nullable() });

// --- admin -------------------------------------------------------------------------------------
export const createTenantBody = z.strictObject({ name: z.string().trim().min(1).max(200) });
export const tenantCreated = z.object({ id: z.string(), name: z.string(), apiKey: z.string() }).meta({ id: 'TenantCreated' });
export const tenantSchema = z.object({ id: z.string(), name: z.string(), createdAt: z.string() }).meta({ id: 'Tenant' });

// --- API keys ----------------------------------------------------------------------------------
export const createApiKeyBody = z.strictObject({ name: z.string().trim().min(1).max(200) });
export const apiKeyCreated = z
  .object({ id: z.string(), name: z.string(), key: z.string().describe('Shown only in this answer; only its hash is stored'), createdAt: z.string() })
  .meta({ id: 'ApiKeyCreated' });
export const apiKeySchema = z
  .object({
    id: z.string(),
    name: z.string(),
    prefix: z.string().nullable().describe('The first characters of the key (sk_ and 8 more); null for keys issued before prefixes were kept'),
    createdAt: z.string(),
    lastUsedAt: z.string().nullable().describe('To the minute: updated at most once a minute'),
  })
  .meta({ id: 'ApiKey' });
export const tenantDetailSchema = tenantSchema.extend({ apiKeys: z.array(apiKeySchema).describe('The live keys, newest first') }).meta({ id: 'TenantDetail' });

// --- sources: in source-schemas.ts -------------------------------------------------------------
export * from './source-schemas.js';

// --- endpoints ---------------------------------------------------------------------------------
const eventTypeFilter = z.string().max(200).regex(eventTypeFilterPattern, 'must be an event type, optionally ending in .*');
export const retryPolicySchema = z.strictObject({
  maxAttempts: z.number().int().min(1).max(100).optional(),
  baseDelayMs: z.number().int().min(100).max(86_400_000).optional(),
  maxDelayMs: z.number().int().min(100).max(604_800_000).optional(),
  // Bounded by RETENTION_DAYS too, checked by the route (it is configuration).
  maxEventAgeSeconds: z.number().int().min(1).max(315_360_000).optional(),
});
const endpointFields = {
  url: z.string().max(2048),
  eventTypes: z.array(eventTypeFilter).max(100),
  description: z.string().max(1000).nullable(),
  maxConcurrency: z.number().int().min(1).max(1000),
  rateLimitPerSecond: z.number().int().min(1).max(100_000).nullable(),
  retryPolicy: retryPolicySchema,
  ordering: z.enum(ORDERINGS).meta({ id: 'Ordering' }),
  headers: endpointHeaders,
  filter: eventFilter,
  tls: endpointTls,
  propagateTraceContext: z
    .boolean()
    .describe("Requests carry a W3C traceparent, so a receiver that traces continues the event's trace (default false)"),
  signature: z
    .strictObject({ scheme: z.enum(SIGNATURE_SCHEMES).meta({ id: 'SignatureScheme' }) })
    .describe('hmac (default): v1 signatures with a whsec_ secret the receiver holds. ed25519: v1a signatures; the platform holds the private key and the receiver verifies with signature.publicKey. Fixed at creation.'),
};
export const createEndpointBody = z.strictObject({
  url: endpointFields.url,
  eventTypes: endpointFields.eventTypes.optional(),
  description: endpointFields.description.optional(),
  maxConcurrency: endpointFields.maxConcurrency.optional(),
  rateLimitPerSecond: endpointFields.rateLimitPerSecond.optional(),
  retryPolicy: endpointFields.retryPolicy.optional(),
  ordering: endpointFields.ordering.optional(),
  headers: endpointFields.headers.optional(),
  filter: endpointFields.filter.optional(),
  tls: endpointFields.tls.optional(),
  propagateTraceContext: endpointFields.propagateTraceContext.optional(),
  signature: endpointFields.signature.optional(),
});
// Every field is optional on PATCH (only what is sent changes), but an empty change is refused.
export const patchEndpointBody = createEndpointBody
  .partial()
  .extend({ status: z.enum(ENDPOINT_STATUSES).optional() })
  .refine((body) => Object.keys(body).length > 0, 'at least one field is required');
/** POST /v1/endpoints/:id/pause and /resume: the body, and the reason in it, may be left out. */
export const endpointStatusBody = z
  .strictObject({ reason: z.string().trim().min(1).max(1000).optional().describe('Kept in the audit log and the operational event') })
  .optional();
export const circuitSchema = z
  .object({
    state: z.enum(CIRCUIT_STATES).describe('half_open: the cooldown has passed, one probe at a time until one succeeds'),
    openUntil: z.string().nullable().describe('Only while open: when the next probe may go'),
    consecutiveFailures: z.number(),
  })
  .meta({ id: 'Circuit' });
export const endpointHealthSchema = z
  .object({
    failingSince: z.string().nullable().describe('When the current failure streak began (its first failed attempt); null while healthy'),
    warnedThreshold: z
      .number()
      .nullable()
      .describe('The highest share of AUTO_DISABLE_AFTER_SECONDS announced as platform.endpoint.failing in this streak (0.5, 0.75, 0.9); null before the first'),
    autoDisableAt: z.string().nullable().describe('When the endpoint is disabled unless a delivery succeeds first; null while healthy'),
  })
  .meta({ id: 'EndpointHealth' });
export const effectiveRetryPolicySchema = z
  .object({
    maxAttempts: z.number(),
    baseDelayMs: z.number(),
    maxDelayMs: z.number(),
    maxEventAgeSeconds: z.number(),
    retryAfterMaxSeconds: z.number(),
    attemptTimeoutMs: z.number(),
  })
  .describe("The values in force: the endpoint's retryPolicy over the platform's defaults")
  .meta({ id: 'EffectiveRetryPolicy' });
export const endpointSchema = z
  .object({
    id: z.string(),
    url: z.string(),
    description: z.string().nullable(),
    eventTypes: z.array(z.string()),
    status: z.enum(ENDPOINT_STATUSES),
    disabledReason: z.string().nullable(),
    maxConcurrency: z.number(),
    rateLimitPerSecond: z.number().nullable(),
    retryPolicy: retryPolicySchema,
    ordering: endpointFields.ordering,
    headers: z.record(z.string(), z.string()).describe(`Every header name, each value shown as ${MASKED_HEADER_VALUE}`),
    filter: z.record(z.string(), z.unknown()).nullable().describe('As written, numbers digit for digit'),
    tls: endpointTlsView,
    propagateTraceContext: z.boolean(),
    signature: z
      .object({
        scheme: endpointFields.signature.shape.scheme,
        publicKey: z.string().optional().describe('Only for ed25519: whpk_ + base64 of the Ed25519 public key that verifies the v1a signatures'),
      })
      .meta({ id: 'EndpointSignature' }),
    createdAt: z.string(),
    updatedAt: z.string(),
    circuit: circuitSchema,
    health: endpointHealthSchema,
    effectiveRetryPolicy: effectiveRetryPolicySchema,
    secret: z.string().optional().describe('Only on creation, and only for hmac (an ed25519 endpoint has signature.publicKey instead)'),
  })
  .meta({ id: 'Endpoint' });
export const secretSchema = z
  .object({
    secret: z.string().optional().describe('hmac: the new whsec_ secret'),
    publicKey: z.string().optional().describe('ed25519: the new whpk_ public key (the private key is never shown)'),
    previousSecretExpiresAt: z.string().describe('Until then the previous secret keeps signing beside the new one (both in webhook-signature)'),
  })
  .meta({ id: 'EndpointSecret' });
export const currentSecretSchema = z
  .object({
    secret: z.string().optional().describe('hmac: the secret that signs every request now'),
    publicKey: z.string().optional().describe('ed25519: the whpk_ public key of the private key that signs every request now'),
    previousSecretExpiresAt: z
      .string()
      .nullable()
      .describe('During the overlap after a rotation: when the previous secret stops signing beside this one; null when it no longer signs'),
  })
  .meta({ id: 'EndpointCurrentSecret' });
export const testEndpointBody = z.strictObject({
  type: z
    .string()
    .min(1)
    .max(200)
    .regex(/^[A-Za-z0-9_.-]+$/, 'letters, digits, dot, dash and underscore only')
    .optional()
    .describe('platform.test unless given'),
  data: z.unknown().optional().describe('The event data; {} unless given'),
});
export const testSentSchema = z.object({ eventId: z.string(), deliveryId: z.string() }).meta({ id: 'EndpointTestSent' });
export const endpointStatsQuery = z.strictObject({
  since: isoDate.optional().describe('Start of the window (inclusive); 24 h before until by default'),
  until: isoDate.optional().describe('End of the window (exclusive); now by default. At most 31 days after since'),
});
export const endpointStatsSchema = z
  .object({
    since: z.string(),
    until: z.string(),
    attempts: z.number(),
    succeeded: z.number(),
    failed: z.number(),
    byStatusClass: z.object({ '2xx': z.number(), '3xx': z.number(), '4xx': z.number(), '5xx': z.number(), network: z.number() }),
    latencyMs: z.object({ p50: z.number().nullable(), p95: z.number().nullable(), p99: z.number().nullable() }),
    series: z
      .array(
        z.object({
          start: z.string().describe('Start of the hour (UTC)'),
          attempts: z.number(),
          failed: z.number(),
          latencyMs: z
            .object({ p50: z.number().nullable(), p95: z.number().nullable() })
            .describe("Percentiles of the hour's attempt durations; null in an hour without attempts"),
        }),
      )
      .describe('One entry per hour of the window, oldest first, hours without attempts included'),
  })
  .meta({ id: 'EndpointStats' });

// --- events ------------------------------------------------------------------------------------
export const publishEventBody = z.strictObject({
  type: z
    .string()
    .min(1)
    .max(200)
    .regex(/^[A-Za-z0-9_.-]+$/, 'letters, digits, dot, dash and underscore only')
    // Subscribers must be able to trust that platform.* events come from the platform itself.
    .refine((v) => !v.startsWith('platform.'), 'the platform. prefix is reserved for operational events'),
  messageId: z.string().min(1).max(200).optional(),
  data: z.unknown().refine((v) => v !== undefined, 'required'),
});
export const publishEventHeaders = z.object({
  'Idempotency-Key': z
    .string()
    .min(1)
    .max(255)
    // Operational events use keys in this namespace; a tenant key there could suppress one.
    .refine((v) => !v.startsWith('platform.'), 'must not start with "platform."')
    .optional()
    .describe('The same key again answers 200 with the first event and sends nothing new; 409 if the request differs'),
});
export const listEventsQuery = withOrderedWindow(
  z.strictObject({
    ...pageQuery,
    ...timeRange,
    type: filterValue(200).optional().describe('An event type, or a prefix ending in .* as in endpoint subscriptions: invoice.* matches invoice.paid'),
    messageId: filterValue(200).optional(),
  }),
);
// Named, so the OpenAPI document (and the portal's generated types) carry each list once.
export const deliveryStatusSchema = z.enum(DELIVERY_STATUSES).meta({ id: 'DeliveryStatus' });
export const deadLetterReasonSchema = z.enum(DEAD_LETTER_REASONS).meta({ id: 'DeadLetterReason' });
export const finalStatusSchema = z.enum(FINAL_STATUSES).meta({ id: 'FinalDeliveryStatus' });
export const deliverySummarySchema = z.object({
  id: z.string(),
  endpointId: z.string(),
  status: deliveryStatusSchema,
  attemptCount: z.number(),
  nextAttemptAt: z.string().nullable(),
  deadReason: z.union([deadLetterReasonSchema, z.null()]),
  lastError: z.string().nullable(),
  lastStatusCode: z.number().nullable(),
});
export const eventSchema = z
  .object({
    id: z.string(),
    type: z.string(),
    messageId: z.string().nullable(),
    sourceId: z.string().nullable(),
    origin: z.string(),
    status: z.string().nullable(),
    stale: z.boolean(),
    createdAt: z.string(),
    receiptCount: z.number().optional(),
    payload: z.unknown().optional(),
    deliveries: z.array(deliverySummarySchema).optional(),
  })
  .meta({ id: 'Event' });
export const publishedSchema = eventSchema.extend({ duplicate: z.boolean() });

// --- deliveries --------------------------------------------------------------------------------
export const listDeliveriesQuery = withOrderedWindow(
  z.strictObject({
    ...pageQuery,
    ...timeRange,
    status: deliveryStatusSchema.optional(),
    endpointId: filterValue(100).optional(),
    eventId: filterValue(100).optional(),
    eventType: filterValue(200).optional().describe('An event type, or a prefix ending in .*'),
    reason: deadLetterReasonSchema.optional(),
  }),
);
export const attemptSchema = z
  .object({
    id: z.string(),
    attemptNumber: z.number(),
    trigger: z.enum(TRIGGERS),
    startedAt: z.string(),
    durationMs: z.number(),
    statusCode: z.number().nullable(),
    outcome: z.enum(ATTEMPT_OUTCOMES),
    errorClass: z.string().nullable(),
    error: z.string().nullable(),
    responseExcerpt: z.string().nullable(),
    nextAttemptAt: z.string().nullable(),
  })
  .meta({ id: 'Attempt' });
export const deliverySchema = deliverySummarySchema
  .extend({
    eventId: z.string(),
    eventType: z.string().optional(),
    createdAt: z.string(),
    updatedAt: z.string(),
    succeededAt: z.string().nullable(),
    waitingFor: z
      .enum(WAIT_REASONS)
      .nullable()
      .optional()
      .describe("Why a pending delivery is not being sent: its endpoint's circuit is open, a retry's delay, or a later start (a paced replay); null when nothing holds it"),
    attempts: z.array(attemptSchema).optional(),
  })
  .meta({ id: 'Delivery' });

// --- messages ----------------------------------------------------------------------------------
export const messageParams = z.object({ messageId: z.string().min(1).max(200) });
export const messageSchema = z
  .object({
    messageId: z.string(),
    status: z.string().nullable(),
    final: z.boolean(),
    updatedAt: z.string(),
    events: z.array(
      eventSchema.extend({
        receipts: z.object({ count: z.number(), first: z.string().nullable(), last: z.string().nullable(), times: z.array(z.string()) }),
        deliveries: z.array(deliverySchema),
      }),
    ),
  })
  .meta({ id: 'MessageTimeline' });

// --- inbound -----------------------------------------------------------------------------------
export const inboundParams = z.object({ sourceId: z.string().min(1).max(100) });
export const inboundAccepted = z
  .object({ status: z.enum(INTAKE_OUTCOMES), receiptId: z.string(), eventId: z.string() })
  .meta({ id: 'InboundResult' });

// --- replay and audit: in replay-schemas.ts ----------------------------------------------------
