import { createPrivateKey, X509Certificate, type KeyObject } from 'node:crypto';
import type { Problem } from './errors.js';

/**
 * An endpoint's mutual TLS settings, in PEM: the client certificate presented to the receiver, its
 * private key, and optionally the CAs that alone may sign the receiver's certificate (a private CA
 * bundle replaces the system's roots for that endpoint; it does not add to them).
 */
export interface EndpointTls {
  clientCertificate: string;
  clientKey: string;
  caCertificates?: string;
}

/** Bound on each PEM field: a certificate chain or bundle this large is a mistake, not a setting. */
export const MAX_TLS_PEM_BYTES = 64 * 1024;

const PEM_CERT = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g;

/** The certificates of a PEM bundle, in order; throws when one does not parse. */
export function parseCertificates(bundle: string): X509Certificate[] {
  return (bundle.match(PEM_CERT) ?? []).map((pem) => new X509Certificate(pem));
}

/**
 * Every problem with a `tls` value, each at its path (`tls.clientKey`): the fields are PEM of at
 * most MAX_TLS_PEM_BYTES, the certificate and key parse, the key is the certificate's, and every
 * certificate of the CA bundle parses. The messages never echo the PEM.
 */
export function endpointTlsProblems(value: Record<string, unknown>): Problem[] {
  const problems: Problem[] = [];
  const field = (name: string, required: boolean): string | undefined => {
    const v = value[name];
    if (v === undefined && !required) return undefined;
    if (typeof v !== 'string' || v.trim() === '') {
      problems.push({ path: `tls.${name}`, message: 'must be a PEM string' });
      return undefined;
    }
    if (Buffer.byteLength(v) > MAX_TLS_PEM_BYTES) {
      problems.push({ path: `tls.${name}`, message: `must be at most ${MAX_TLS_PEM_BYTES} bytes` });
      return undefined;
    }
    return v;
  };
  for (const name of Object.keys(value)) {
    if (name !== 'clientCertificate' && name !== 'clientKey' && name !== 'caCertificates') problems.push({ path: `tls.${name}`, message: 'unknown field' });
  }
  const certText = field('clientCertificate', true);
  const keyText = field('clientKey', true);
  const caText = field('caCertificates', false);
  let cert: X509Certificate | undefined;
  let key: KeyObject | undefined;
  if (certText !== undefined) {
    try {
      cert = new X509Certificate(certText);
    } catch {
      problems.push({ path: 'tls.clientCertificate', message: 'is not a PEM X.509 certificate' });
    }
  }
  if (keyText !== undefined) {
    try {
      key = createPrivateKey(keyText);
    } catch {
      problems.push({ path: 'tls.clientKey', message: 'is not an unencrypted PEM private key' });
    }
  }
  if (cert && key && !cert.checkPrivateKey(key)) problems.push({ path: 'tls.clientKey', message: 'does not match tls.clientCertificate' });
  if (caText !== undefined) {
    try {
      if (parseCertificates(caText).length === 0) problems.push({ path: 'tls.caCertificates', message: 'holds no PEM certificate' });
    } catch {
      problems.push({ path: 'tls.caCertificates', message: 'holds a certificate that does not parse' });
    }
  }
  return problems;
}

/** What the API shows of a stored `tls`: who the client certificate names, never the key. */
export function endpointTlsView(tls: EndpointTls) {
  const cert = new X509Certificate(tls.clientCertificate);
  return {
    clientCertificate: { subject: cert.subject, issuer: cert.issuer, notAfter: new Date(cert.validTo).toISOString(), fingerprint256: cert.fingerprint256 },
    caCertificates: tls.caCertificates === undefined ? 0 : parseCertificates(tls.caCertificates).length,
  };
}
