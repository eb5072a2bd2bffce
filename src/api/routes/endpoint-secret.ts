import { notFound } from '../../domain/errors.js';
import { generateWebhookSecret } from '../../domain/signing.js';
import { revealEndpointSecret, rotateEndpointSecret } from '../../store/endpoints-store.js';
import type { ApiContext } from '../context.js';
import type { ApiRoutes } from '../route.js';
import { currentSecretSchema, idParams, secretSchema } from '../schemas.js';

/** Show an endpoint's signing secret, and rotate it. */
export function endpointSecretRoutes(routes: ApiRoutes, ctx: ApiContext): void {
  const tag = 'endpoints';

  routes.add(
    {
      method: 'get',
      path: '/v1/endpoints/:id/secret',
      operationId: 'getEndpointSecret',
      summary: 'Show the current signing secret (and, during a rotation, when the previous one stops signing); audited, never cached',
      tag,
      auth: 'tenant',
      portal: 'scoped',
      portalCapability: 'manage',
      params: idParams,
      success: { status: 200, description: 'The current secret', schema: currentSecretSchema },
      errors: [404],
    },
    async ({ params, scope }) => {
      const revealed = await revealEndpointSecret(scope, ctx.box, params.id);
      if (!revealed) throw notFound('endpoint');
      return {
        status: 200,
        headers: { 'cache-control': 'no-store' },
        body: { secret: revealed.secret, previousSecretExpiresAt: revealed.previousSecretExpiresAt?.toISOString() ?? null },
      };
    },
  );
  routes.add(
    {
      method: 'post',
      path: '/v1/endpoints/:id/secret/rotate',
      operationId: 'rotateEndpointSecret',
      summary: 'Rotate the signing secret; the old one keeps signing beside the new one for 24 h',
      tag,
      auth: 'tenant',
      portal: 'scoped',
      params: idParams,
      success: { status: 200, description: 'The new secret, and until when the previous one keeps signing', schema: secretSchema },
      errors: [404],
    },
    async ({ params, scope }) => {
      const secret = generateWebhookSecret();
      const previousSecretExpiresAt = await rotateEndpointSecret(scope, ctx.box, params.id, secret);
      if (!previousSecretExpiresAt) throw notFound('endpoint');
      return { status: 200, body: { secret, previousSecretExpiresAt: previousSecretExpiresAt.toISOString() } };
    },
  );
}
