import { notFound } from '../../domain/errors.js';
import { ed25519PrivateKey, ed25519PublicKeyText, generateSigningSecret, type SignatureScheme } from '../../domain/signing.js';
import { revealEndpointSecret, rotateEndpointSecret } from '../../store/endpoints-store.js';
import type { ApiContext } from '../context.js';
import type { ApiRoutes } from '../route.js';
import { currentSecretSchema, idParams, secretSchema } from '../schemas.js';
import { assertMayChangeEndpoint } from './endpoint-view.js';

/**
 * What a receiver needs to verify: an hmac endpoint's shared secret, or an ed25519 endpoint's public
 * key (its private key never leaves the platform).
 */
function verifyingKey(scheme: SignatureScheme, secret: string): { secret: string } | { publicKey: string } {
  return scheme === 'hmac' ? { secret } : { publicKey: ed25519PublicKeyText(ed25519PrivateKey(secret)) };
}

/** Show an endpoint's signing secret (or public key), and rotate it. */
export function endpointSecretRoutes(routes: ApiRoutes, ctx: ApiContext): void {
  const tag = 'endpoints';

  routes.add(
    {
      method: 'get',
      path: '/v1/endpoints/:id/secret',
      operationId: 'getEndpointSecret',
      summary: 'Show the current signing secret, or for ed25519 its public key (and, during a rotation, when the previous one stops signing); audited, never cached',
      tag,
      auth: 'tenant',
      portal: 'scoped',
      portalCapability: 'manage',
      params: idParams,
      success: { status: 200, description: 'The current secret', schema: currentSecretSchema },
      errors: [404],
    },
    async ({ params, scope }) => {
      await assertMayChangeEndpoint(scope, params.id);
      const revealed = await revealEndpointSecret(scope, ctx.box, params.id);
      if (!revealed) throw notFound('endpoint');
      return {
        status: 200,
        headers: { 'cache-control': 'no-store' },
        body: { ...verifyingKey(revealed.scheme, revealed.secret), previousSecretExpiresAt: revealed.previousSecretExpiresAt?.toISOString() ?? null },
      };
    },
  );
  routes.add(
    {
      method: 'post',
      path: '/v1/endpoints/:id/secret/rotate',
      operationId: 'rotateEndpointSecret',
      summary: 'Rotate the signing secret (ed25519: a new key pair); the old one keeps signing beside the new one for 24 h',
      tag,
      auth: 'tenant',
      portal: 'scoped',
      params: idParams,
      success: { status: 200, description: 'The new secret, and until when the previous one keeps signing', schema: secretSchema },
      errors: [404],
    },
    async ({ params, scope }) => {
      await assertMayChangeEndpoint(scope, params.id);
      const rotated = await rotateEndpointSecret(scope, ctx.box, params.id, (scheme) => generateSigningSecret(scheme).secret);
      if (!rotated) throw notFound('endpoint');
      return {
        status: 200,
        body: { ...verifyingKey(rotated.scheme, rotated.secret), previousSecretExpiresAt: rotated.previousSecretExpiresAt.toISOString() },
      };
    },
  );
}
