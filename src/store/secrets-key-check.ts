import type { Knex } from 'knex';
import { ConfigError } from '../config/index.js';
import type { SecretBox } from '../domain/secret-box.js';
import { endpointFromDb } from './endpoints-store.js';

/**
 * Opens one stored secret (an endpoint's or a source's signing secret) with SECRETS_KEY before the
 * process serves anything. A process started with another key than the one the secrets were sealed
 * with could neither verify a callback nor sign a delivery; without this check it would answer
 * every provider 503 and fail every attempt, and the errors would read like a database outage. It
 * refuses to start instead, saying which variable is wrong. An empty database has nothing to check.
 */
export async function checkSecretsKey(platformDb: Knex, box: SecretBox): Promise<void> {
  type Sealed = { id: string; secret_enc: string };
  const sample: Sealed | undefined =
    endpointFromDb<Sealed>(await platformDb('endpoints').first('id', 'secret_enc')) ?? (await platformDb('sources').first('id', 'secret_enc'));
  if (!sample) return;
  try {
    box.open(sample.secret_enc, sample.id);
  } catch {
    throw new ConfigError(
      `invalid configuration: SECRETS_KEY: does not open the secrets stored in this database (${sample.id}); start with the key they were sealed with`,
    );
  }
}
