import { z } from 'zod';
import { endpointHeaderProblems, MAX_ENDPOINT_HEADERS, MAX_HEADER_VALUE_BYTES } from '../domain/endpoint-headers.js';
import { endpointTlsProblems, MAX_TLS_PEM_BYTES, type EndpointTls } from '../domain/endpoint-tls.js';
import type { Problem } from '../domain/errors.js';
import { compileEventFilter } from '../domain/event-filter.js';
import { toExactJson } from '../domain/exact-json.js';

/*
 * An endpoint's fields whose rules live in domain/ (headers, filter): the schema asks the rule,
 * so the API reports every problem the rule finds, each at its path, with the body's other problems.
 */

/** Problems found by a domain rule, as issues at their paths under the field (`headers.X-Key`). */
function addProblems(ctx: z.RefinementCtx, field: string, problems: Problem[]): void {
  for (const p of problems) ctx.addIssue({ code: 'custom', message: p.message, path: p.path === field ? [] : [p.path.slice(field.length + 1)] });
}
export const endpointHeaders = z
  .record(z.string(), z.unknown())
  .superRefine((headers, ctx) => addProblems(ctx, 'headers', endpointHeaderProblems(headers)))
  .transform((headers) => headers as Record<string, string>)
  .nullable()
  .describe(`The endpoint's own request headers, sent on every attempt: at most ${MAX_ENDPOINT_HEADERS}, values up to ${MAX_HEADER_VALUE_BYTES} bytes; names the platform sets (webhook-*, content-type, host, ...) are refused. Replaced whole on PATCH; null or {} removes them.`);
export const eventFilter = z
  .record(z.string(), z.unknown())
  .superRefine((filter, ctx) => {
    const compiled = compileEventFilter(toExactJson(filter));
    if (!compiled.ok) addProblems(ctx, 'filter', compiled.problems);
  })
  .nullable()
  .describe('Only events matching this filter over type and data are delivered (see docs/api.md); null removes it');
export const endpointTls = z
  .record(z.string(), z.unknown())
  .superRefine((tls, ctx) => addProblems(ctx, 'tls', endpointTlsProblems(tls)))
  .transform((tls) => tls as unknown as EndpointTls)
  .nullable()
  .describe(`Mutual TLS for an https endpoint: {clientCertificate, clientKey, caCertificates?}, each PEM of at most ${MAX_TLS_PEM_BYTES} bytes. The key must be the certificate's. caCertificates, when given, replaces the system's roots for this endpoint. Stored encrypted and never returned; null removes it.`);
export const endpointTlsView = z
  .object({
    clientCertificate: z.object({ subject: z.string(), issuer: z.string(), notAfter: z.string(), fingerprint256: z.string() }),
    caCertificates: z.number().describe('How many CA certificates the endpoint trusts instead of the system roots; 0: the system roots'),
  })
  .nullable()
  .describe('What is stored for mutual TLS: the client certificate named, never the key')
  .meta({ id: 'EndpointTls' });
