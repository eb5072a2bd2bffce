/**
 * The provider contracts a source can speak. Each has one adapter in src/inbound/adapters/; the
 * list is the `type` of `POST /v1/sources` and the `source_type` label of the receipts metric.
 */
export const SOURCE_TYPES = ['momo-communication', 'momo-automation', 'standard-webhooks', 'stripe', 'github', 'shopify', 'hmac'] as const;
export type SourceType = (typeof SOURCE_TYPES)[number];
