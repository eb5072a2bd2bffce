import type { Knex } from 'knex';
import type { Logger } from 'pino';
import type { Config } from '../config/index.js';
import type { SecretBox } from '../domain/secret-box.js';
import type { DeliveryLifecycle } from '../delivery/index.js';
import type { ReadReplica } from '../infra/read-replica.js';
import type { RedisClient } from '../infra/redis.js';
import type { IntakeService } from '../inbound/intake-service.js';

/** What the HTTP layer needs from the rest of the process; built once in the composition root. */
export interface ApiContext {
  config: Config;
  /**
   * Unscoped: reaches every tenant's rows. Only authentication, admin routes and the platform's own
   * work use it; tenant routes get a TenantScope instead.
   */
  platformDb: Knex;
  /** Where reads that tolerate lag go (the read replica, or the primary); absent, every read is on the primary. */
  reads?: ReadReplica;
  redis: RedisClient;
  box: SecretBox;
  intake: IntakeService;
  logger: Logger;
  /** Accounts for deliveries that API actions create, dead-letter or restart (metrics, dispatcher wake-up). */
  lifecycle: Pick<DeliveryLifecycle, 'fannedOut' | 'updateEndpoint' | 'deleteEndpoint' | 'replayDelivery' | 'startBulkReplay' | 'backfill'>;
}
