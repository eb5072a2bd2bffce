import type { Request, Response } from 'express';
import type { SourceType } from '../../domain/sources.js';
import { IntakeError, type IntakeService } from '../../inbound/intake-service.js';
import { metrics, type ReceiptOutcome } from '../../metrics/registry.js';
import { requestSpan } from '../server-spans.js';
import type { ApiContext } from '../context.js';
import { rawBody } from '../raw-body.js';
import type { ApiRoutes, Middleware } from '../route.js';
import { inboundAccepted, inboundParams } from '../schemas.js';

/**
 * Counts every callback that reached a known source, with the time from request in to response
 * out, whatever the answer was. This is the provider retry chain as SREs see it.
 */
export function inboundMetrics(intake: IntakeService): Middleware {
  return (req: Request, res: Response, next) => {
    const started = process.hrtime.bigint();
    const span = requestSpan(res);
    // Read now: once an error has travelled on to the app-level error handler, Express has
    // replaced req.params, so at 'finish' every rejection would look like an unknown source.
    const sourceId = String(req.params.sourceId);
    res.on('finish', () => {
      // Timed at the response, not after the source type lookup below.
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      const outcome = res.locals.inboundOutcome as ReceiptOutcome | undefined;
      const count = (sourceType: SourceType) => {
        const labels = { source_type: sourceType, outcome: outcome ?? outcomeFromStatus(res.statusCode) };
        metrics.inboundAck.observe(labels, seconds, span);
        metrics.inboundReceipts.inc(labels);
      };
      // The usual case is answered from the source cache the request itself filled.
      const known = intake.cachedSourceType(sourceId);
      if (known) count(known);
      // Unknown source or storage down: not a receipt of any source type.
      else intake.sourceType(sourceId).then(count, () => undefined);
    });
    next();
  };
}

function outcomeFromStatus(status: number): ReceiptOutcome {
  if (status === 401) return 'rejected_signature';
  if (status >= 500) return 'unavailable';
  return 'rejected_malformed';
}

export function inboundRawBody(limitBytes: number): Middleware {
  // Every content type is read as bytes: the signature covers the body exactly as sent.
  return rawBody(limitBytes);
}

export function inboundRoutes(routes: ApiRoutes, ctx: ApiContext): void {
  routes.add(
    {
      method: 'post',
      path: '/inbound/:sourceId',
      operationId: 'receiveProviderCallback',
      summary: 'Provider callback; authenticated by the provider signature over the raw body',
      tag: 'inbound',
      auth: 'signature',
      params: inboundParams,
      rawBody: true,
      success: { status: 200, description: 'Durably accepted, a duplicate, or stale', schema: inboundAccepted },
      errors: [400, 401, 404, 413, 415, 503],
    },
    async ({ req, res, params }) => {
      const rawBody = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
      const headers: Record<string, string | undefined> = {};
      for (const [name, value] of Object.entries(req.headers)) headers[name] = Array.isArray(value) ? value.join(', ') : value;
      try {
        const record = await ctx.intake.receive(params.sourceId, { rawBody, headers, now: new Date() }, requestSpan(res));
        res.locals.inboundOutcome = record.outcome;
        return { status: 200, body: { status: record.outcome, receiptId: record.receiptId, eventId: record.eventId } };
      } catch (err) {
        if (err instanceof IntakeError) res.locals.inboundOutcome = err.outcome;
        throw err;
      }
    },
  );
}
