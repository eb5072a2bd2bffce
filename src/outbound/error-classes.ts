/** How a failed request is classed: by error type and code, never by message text (docs/failure-matrix.md). */
import { errors as undiciErrors } from 'undici';
import type { ErrorClass } from '../domain/retry-policy.js';
import { ProxyRejectedError } from './egress-proxy.js';

/** Raised inside the connector; undici hands it to the pending request unchanged. */
export class SsrfRefusedError extends Error {
  readonly code = 'WEBHOOK_SSRF_REFUSED';
  constructor(message: string) {
    super(message);
    this.name = 'SsrfRefusedError';
  }
}

const CODE_CLASSES: Record<string, [ErrorClass, string]> = {
  WEBHOOK_SSRF_REFUSED: ['ssrf_refused', 'refused: target is not a public address'],
  WEBHOOK_ATTEMPT_TIMEOUT: ['attempt_timeout', 'attempt timed out'],
  WEBHOOK_PROXY_REJECTED: ['proxy_rejected', 'egress proxy refused to connect to the target'],
  ECONNREFUSED: ['connection_refused', 'connection refused'],
  ECONNRESET: ['connection_reset', 'connection reset by peer'],
  EPIPE: ['connection_reset', 'connection closed while sending'],
  UND_ERR_SOCKET: ['connection_reset', 'connection closed before a complete response'],
  ENOTFOUND: ['dns_failure', 'hostname could not be resolved'],
  EAI_AGAIN: ['dns_failure', 'DNS lookup failed temporarily'],
  EAI_FAIL: ['dns_failure', 'DNS lookup failed'],
  EAI_NODATA: ['dns_failure', 'hostname has no addresses'],
  ENODATA: ['dns_failure', 'hostname has no addresses'],
  ESERVFAIL: ['dns_failure', 'DNS server failure'],
  UND_ERR_CONNECT_TIMEOUT: ['connect_timeout', 'connect timed out'],
  ETIMEDOUT: ['connect_timeout', 'connect timed out'],
  UND_ERR_HEADERS_TIMEOUT: ['attempt_timeout', 'timed out waiting for response headers'],
  UND_ERR_BODY_TIMEOUT: ['attempt_timeout', 'timed out reading the response body'],
  UND_ERR_HEADERS_OVERFLOW: ['malformed_response', 'response headers too large'],
  UND_ERR_RES_CONTENT_LENGTH_MISMATCH: ['malformed_response', 'response length mismatch'],
  UND_ERR_INVALID_ARG: ['invalid_target', 'request rejected by the HTTP client'],
  // The receiver's alerts: it wants, or refused, our client certificate.
  ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED: ['tls_handshake_failed', 'tls_handshake_failed: certificate required'],
  ERR_SSL_SSLV3_ALERT_BAD_CERTIFICATE: ['tls_handshake_failed', 'tls_handshake_failed: the receiver rejected our certificate'],
  ERR_SSL_SSLV3_ALERT_HANDSHAKE_FAILURE: ['tls_handshake_failed', 'tls_handshake_failed: handshake failure'],
  ERR_SSL_TLSV1_ALERT_UNKNOWN_CA: ['tls_handshake_failed', 'tls_handshake_failed: the receiver does not trust our certificate\'s CA'],
  ERR_SSL_TLSV1_ALERT_ACCESS_DENIED: ['tls_handshake_failed', 'tls_handshake_failed: access denied'],
  // Our verdict on the receiver's certificate.
  UNABLE_TO_VERIFY_LEAF_SIGNATURE: ['tls_handshake_failed', "tls_handshake_failed: unable to verify the receiver's certificate"],
  UNABLE_TO_GET_ISSUER_CERT_LOCALLY: ['tls_handshake_failed', "tls_handshake_failed: unable to verify the receiver's certificate"],
  SELF_SIGNED_CERT_IN_CHAIN: ['tls_handshake_failed', "tls_handshake_failed: unable to verify the receiver's certificate"],
  DEPTH_ZERO_SELF_SIGNED_CERT: ['tls_handshake_failed', "tls_handshake_failed: the receiver's certificate is self-signed"],
  CERT_HAS_EXPIRED: ['tls_handshake_failed', "tls_handshake_failed: the receiver's certificate has expired"],
  ERR_TLS_CERT_ALTNAME_INVALID: ['tls_handshake_failed', "tls_handshake_failed: the receiver's certificate does not name its host"],
};

/**
 * An error before any response from an endpoint with mutual TLS. Under TLS 1.3 the receiver checks
 * our certificate after our side of the handshake is done, and a refusal reaches us as the
 * connection closing or reset before any answer (UND_ERR_SOCKET, ECONNRESET, EPIPE: whichever the
 * timing gives), not as an alert: so on such an endpoint that is classed as the handshake failure
 * it almost always is.
 */
export function classifyMutualTlsError(err: unknown): [ErrorClass, string] {
  const [errorClass, message] = classifyError(err);
  if (errorClass !== 'connection_reset') return [errorClass, message];
  const code = /\((\w+)\)$/.exec(message)?.[1];
  return ['tls_handshake_failed', `tls_handshake_failed: the receiver closed the connection before answering, as it does when it refuses our client certificate${code ? ` (${code})` : ''}`];
}

/**
 * Maps an error to (class, message) by its code alone, looking through `cause` chains. Messages
 * are fixed text plus the code: never the error's own message, which can carry URLs or headers.
 */
export function classifyError(err: unknown): [ErrorClass, string] {
  if (err instanceof SsrfRefusedError) return ['ssrf_refused', `refused: ${err.message}`]; // our text
  if (err instanceof ProxyRejectedError) return ['proxy_rejected', err.message]; // our text
  // undici 7 can build parser errors whose code is undefined, so the type decides, not the code.
  if (err instanceof undiciErrors.HTTPParserError) {
    const code = typeof err.code === 'string' && /^HPE_[A-Z_]{1,40}$/.test(err.code) ? ` (${err.code})` : '';
    return ['malformed_response', `malformed HTTP response${code}`];
  }
  let e: unknown = err;
  for (let depth = 0; depth < 4 && typeof e === 'object' && e !== null; depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && /^[A-Za-z0-9_]{1,64}$/.test(code)) {
      const known = CODE_CLASSES[code];
      if (known) return [known[0], code.startsWith('WEBHOOK_') ? known[1] : `${known[1]} (${code})`];
      if (code.startsWith('HPE_')) return ['malformed_response', `malformed HTTP response (${code})`];
      if (/CERT|TLS|SSL/.test(code)) return ['tls_handshake_failed', `tls_handshake_failed (${code})`];
    }
    e = (e as { cause?: unknown }).cause;
  }
  const top = err as { code?: unknown; name?: unknown } | null;
  const code = typeof top?.code === 'string' && /^[A-Za-z0-9_]{1,64}$/.test(top.code) ? ` (${top.code})` : '';
  return ['network_other', `network error${code}`];
}
