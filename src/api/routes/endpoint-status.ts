import { notFound } from '../../domain/errors.js';
import type { EndpointStatus } from '../../domain/endpoints.js';
import type { ApiContext } from '../context.js';
import type { ApiRoutes } from '../route.js';
import { endpointSchema, endpointStatusBody, idParams } from '../schemas.js';
import { assertMayChangeEndpoint, presentEndpoint } from './endpoint-view.js';

/**
 * Pause and resume: shorthands for PATCH {status: "paused" | "active"}, taking the same path (the
 * lifecycle's endpoint update), with a reason for the audit log and the operational event.
 */
export function endpointStatusRoutes(routes: ApiRoutes, ctx: ApiContext): void {
  const tag = 'endpoints';
  const actions: Array<{ path: string; operationId: string; summary: string; to: EndpointStatus }> = [
    {
      path: '/v1/endpoints/:id/pause',
      operationId: 'pauseEndpoint',
      summary: 'Pause an endpoint: no attempt starts, waiting work and new events stay pending (max event age still applies)',
      to: 'paused',
    },
    {
      path: '/v1/endpoints/:id/resume',
      operationId: 'resumeEndpoint',
      summary: 'Resume an endpoint: everything waiting is delivered, in order where ordering is on',
      to: 'active',
    },
  ];
  for (const action of actions) {
    routes.add(
      {
        method: 'post',
        path: action.path,
        operationId: action.operationId,
        summary: action.summary,
        tag,
        auth: 'tenant',
        portal: 'scoped',
        params: idParams,
        body: endpointStatusBody,
        success: { status: 200, description: 'The endpoint', schema: endpointSchema },
        errors: [404],
      },
      async ({ params, body, scope }) => {
        await assertMayChangeEndpoint(scope, params.id);
        const row = await ctx.lifecycle.updateEndpoint(scope, ctx.box, params.id, { status: action.to, statusReason: body?.reason });
        if (!row) throw notFound('endpoint');
        return { status: 200, body: presentEndpoint(ctx.config, ctx.box, row) };
      },
    );
  }
}
