import type { Config } from '../../config/index.js';
import { circuitView } from '../../domain/circuit.js';
import { forbidden, notFound } from '../../domain/errors.js';
import { typeFiltersWithin } from '../../domain/event-types.js';
import { healthView } from '../../domain/failure-warnings.js';
import { maskEndpointHeaders } from '../../domain/endpoint-headers.js';
import { endpointTlsView } from '../../domain/endpoint-tls.js';
import { RawJson } from '../../domain/raw-json.js';
import { resolvePolicy } from '../../domain/retry-policy.js';
import type { SecretBox } from '../../domain/secret-box.js';
import { ed25519PrivateKey, ed25519PublicKeyText } from '../../domain/signing.js';
import { getEndpoint, openHeaders, openTls, rowToEndpoint, type EndpointRow } from '../../store/endpoints-store.js';
import type { TenantScope } from '../../store/tenant-scope.js';

/**
 * Refuses a portal session limited to event types a change of an endpoint (or a look at its
 * secret) unless the endpoint takes no type beyond the session's, and `eventTypes`, when the change
 * sets them, stay within them too. An endpoint also carries the events the session may not see:
 * re-pointing, re-subscribing, pausing or deleting it, or signing as it, would reach those.
 * Nothing to check for an API key or a session not limited to types.
 */
export async function assertMayChangeEndpoint(scope: TenantScope, id: string, eventTypes?: readonly string[]): Promise<void> {
  const limit = scope.session?.eventTypes;
  if (limit === undefined) return;
  const row = await getEndpoint(scope, id);
  if (!row) throw notFound('endpoint');
  const types = limit.join(', ');
  if (!typeFiltersWithin(row.event_types, limit)) {
    throw forbidden(`this portal link is limited to the event types ${types}, and this endpoint takes others too, so the link cannot change it`);
  }
  if (eventTypes !== undefined && !typeFiltersWithin(eventTypes, limit)) {
    throw forbidden(`this portal link is limited to the event types ${types}: the endpoint's eventTypes must stay within them (an empty list takes every type)`);
  }
}

/** The retry policy dispatch applies to this endpoint: the platform defaults merged with its own. */
export function effectiveRetryPolicy(config: Config, row: EndpointRow) {
  return { ...resolvePolicy(config.retry, row.retry_policy), attemptTimeoutMs: config.attemptTimeoutMs };
}

/**
 * How the endpoint's requests are signed; for ed25519 the public key that verifies them, derived
 * from the private key the platform holds (which is never shown).
 */
export function signatureView(box: SecretBox, row: Pick<EndpointRow, 'id' | 'signature_scheme' | 'secret_enc'>) {
  if (row.signature_scheme === 'hmac') return { scheme: row.signature_scheme };
  return { scheme: row.signature_scheme, publicKey: ed25519PublicKeyText(ed25519PrivateKey(box.open(row.secret_enc, row.id))) };
}

/**
 * What dispatch obeys now, beside what the tenant configured: the circuit, the failure streak and
 * the merged policy. Header values and the TLS key are never shown; the filter is shown as written.
 */
export function presentEndpoint(config: Config, box: SecretBox, row: EndpointRow, now = new Date()) {
  return {
    ...rowToEndpoint(row),
    headers: maskEndpointHeaders(openHeaders(box, row)),
    filter: row.filter === null ? null : new RawJson(row.filter),
    tls: tlsView(box, row),
    signature: signatureView(box, row),
    circuit: circuitView({ consecutiveFailures: row.consecutive_failures, openUntil: row.circuit_open_until }, config.circuitFailureThreshold, now),
    health: healthView({ failingSince: row.failing_since, warnedPercent: row.failure_warned_percent }, config.autoDisableAfterSeconds),
    effectiveRetryPolicy: effectiveRetryPolicy(config, row),
  };
}

/** Who the client certificate names and how many CAs are trusted; the key never leaves the seal. */
function tlsView(box: SecretBox, row: Pick<EndpointRow, 'id' | 'tls_enc'>) {
  const tls = openTls(box, row);
  return tls === null ? null : endpointTlsView(tls);
}
