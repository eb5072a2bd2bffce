import type { Knex } from 'knex';
import { ConfigError } from '../config/index.js';
import type { SecretBox } from '../domain/secret-box.js';

/**
 * Opens one stored secret (an endpoint's or a source's signing secret) with SECRETS_KEY before the
 * process serves anything. A process started with another key than the one the secrets were sealed
 * with could neither verify a callback nor sign a delivery; without this check it would answer
 * every provider 503 and fail every attempt, and the errors would read like a database outage. It
 * refuses to start instead, saying which variable is wrong. An empty database has nothing to check.
 */
export async function checkSecretsKey(db: Knex, box: SecretBox): Promise<void> {
  const { rows } = await db.raw<{ rows: Array<{ id: string; secret_enc: string }> }>(
    `(SELECT id, secret_enc FROM endpoints LIMIT 1) UNION ALL (SELECT id, secret_enc FROM sources LIMIT 1) LIMIT 1`,
  );
  const sample = rows[0];
  if (!sample) return;
  try {
    box.open(sample.secret_enc, sample.id);
  } catch {
    throw new ConfigError(
      `invalid configuration: SECRETS_KEY: does not open the secrets stored in this database (${sample.id}); start with the key they were sealed with`,
    );
  }
}
