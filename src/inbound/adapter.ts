import type { RawJson } from '../domain/raw-json.js';

/**
 * The contract every provider adapter implements. Adding a provider means adding one file under
 * adapters/ and listing it in adapters/index.ts; the intake service never names a provider.
 */
export type SourceType = 'momo-communication' | 'momo-automation' | 'standard-webhooks';

export interface InboundRequest {
  /** Exact bytes as received; signatures are checked against these, never against re-encoded JSON. */
  rawBody: Buffer;
  /** Lower-cased header names. */
  headers: Readonly<Record<string, string | undefined>>;
  now: Date;
}

export type VerifyFailure = 'missing_signature' | 'bad_signature' | 'timestamp_out_of_range';
export type VerifyResult = { ok: true } | { ok: false; reason: VerifyFailure; message: string };

/** A message status as the contract orders it; rank only ever grows for one message. */
export interface MessageStatus {
  value: string;
  rank: number;
  /** Final statuses end reconciliation for the message. */
  final: boolean;
}

export interface ParsedEvent {
  /** Event type forwarded to endpoints and matched against their eventTypes filters. */
  type: string;
  /** Unique per source for one logical event: the same provider event always yields the same key. */
  dedupeKey: string;
  /** The business resource the event concerns (message, order, group...), if any. */
  messageId?: string;
  /** Set only where the contract defines an ordered status for the resource. */
  status?: MessageStatus;
  /** Provider's own ordering hint when it has one (sequence/version); used for per-message ordering. */
  sequence?: number;
  /** The provider's business payload as it wrote it, forwarded as `data` without being re-serialised. */
  data: RawJson;
}

export type ParseResult = { ok: true; event: ParsedEvent } | { ok: false; code: 'malformed_json' | 'missing_field' | 'invalid_field'; message: string };

export interface InboundAdapter {
  readonly type: SourceType;
  /** Checks the signature over the exact raw bytes, in constant time, before anything is parsed. */
  verify(request: InboundRequest, secret: string): VerifyResult;
  /** Parses an already verified body. Never throws. */
  parse(request: InboundRequest): ParseResult;
  /**
   * What recognises a byte-identical repeat of a verified callback without parsing it: by default
   * the SHA-256 of the raw body. A contract whose event identity lives outside the body (a header
   * such as `webhook-id`) must fold it in, or two events with equal bodies would be taken for one.
   */
  repeatDigest?(request: InboundRequest): string;
  /** A fresh signing secret in the provider's own format, for sources created without one. */
  generateSecret(): string;
}
