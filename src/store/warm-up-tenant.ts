import { newStoredId } from '../domain/ids.js';
import { statement, type WarmUp } from '../infra/sql.js';

/** What a warm-up runs statements with (see WarmUp). */
export type WarmUpRun = Parameters<WarmUp>[0];

/** A tenant, and an endpoint of it subscribed to every type, that a warm-up makes for itself. */
export interface WarmUpTenant {
  /** As stored: a uuid. */
  tenantId: string;
  /** As stored: a uuid. */
  endpointId: string;
  /** The database's clock: what a warm-up's events are stamped with, so they are due at once. */
  now: Date;
}

/** The URL the warm-up's endpoint names: never sent to (its deliveries are recorded, not attempted). */
const warmUpEndpointUrl = 'https://warm-up.invalid/';

/** What the warm-up's endpoint and source store as their sealed secret: never opened, nothing is signed or verified. */
export const warmUpSecret = 'v1:warm-up';

const warmUpTenantStatement = statement(
  'warm_up_tenant',
  `WITH tenant AS (INSERT INTO tenants (id, name) VALUES (:tenantId::uuid, 'warm-up') RETURNING id)
   INSERT INTO endpoints (id, tenant_id, url, max_concurrency, secret_enc)
   SELECT :endpointId::uuid, tenant.id, :url, 1, :secret FROM tenant
   RETURNING now() AS now`,
);

/**
 * A UUIDv7 of time zero: below every id a tenant, endpoint or source was ever given, above the nil
 * uuid, and its own (random bits), so warm-ups running at once never wait for each other's rows.
 */
export function warmUpId(): string {
  return `00000000-0000-${newStoredId().slice(14)}`;
}

/**
 * Makes the warm-up's own tenant and endpoint, inside the warm-up's transaction (which is rolled
 * back). Their ids sort before every real tenant's and endpoint's, so the rolled-back rows leave
 * their index entries at the left end of each index keyed by tenant or endpoint, never inside a
 * real tenant's range (where a dead entry splits pages half-and-half), and no real tenant's
 * endpoints are read.
 */
export async function makeWarmUpTenant(run: WarmUpRun): Promise<WarmUpTenant> {
  const tenantId = warmUpId();
  const endpointId = warmUpId();
  const [made] = await run<{ now: Date }>(warmUpTenantStatement, { tenantId, endpointId, url: warmUpEndpointUrl, secret: warmUpSecret });
  return { tenantId, endpointId, now: made!.now };
}
