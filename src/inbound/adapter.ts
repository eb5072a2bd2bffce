import type { ParsedEvent } from '../domain/events.js';
import type { SourceType } from '../domain/sources.js';

/**
 * The contract every provider adapter implements. Adding a provider means adding one file under
 * adapters/ and listing it in adapters/index.ts; the intake service never names a provider.
 */
export interface InboundRequest {
  /** Exact bytes as received; signatures are checked against these, never against re-encoded JSON. */
  rawBody: Buffer;
  /** Lower-cased header names. */
  headers: Readonly<Record<string, string | undefined>>;
  now: Date;
}

export type VerifyFailure = 'missing_signature' | 'bad_signature' | 'timestamp_out_of_range';
export type VerifyResult = { ok: true } | { ok: false; reason: VerifyFailure; message: string };

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
