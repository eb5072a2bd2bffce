/**
 * The upgrade test's snapshot of a release's database: `test/fixtures/release-<version>.sql`
 * (plain pg_dump, restored with psql) and, beside it, what the test needs to know about it.
 * Written by `npm run release:snapshot`, read by test/integration/upgrade.test.ts.
 */
import { fileURLToPath } from 'node:url';

export interface ReleaseSnapshotManifest {
  version: string;
  /**
   * Settings the snapshot was made with. The upgraded platform runs with them too: the stored
   * secrets open only with this SECRETS_KEY (a test-only key), and the circuit's state depends on
   * CIRCUIT_FAILURE_THRESHOLD.
   */
  env: Record<string, string>;
  tenantId: string;
  /** The tenant's first key, in clear: the upgraded API must still accept it. */
  apiKey: string;
  /**
   * Each endpoint's id and the path of its URL. The snapshot's URLs point at the snapshot script's
   * receivers, gone once it ends; the test points each at its own receiver, keeping the path.
   */
  endpoints: Record<'delivering' | 'circuitOpen' | 'rejecting', { id: string; path: string }>;
  /** A bulk replay still running when the snapshot was taken. */
  replayId: string;
}

export function snapshotFiles(version: string): { sql: string; manifest: string } {
  const base = new URL(`../test/fixtures/release-${version}`, import.meta.url);
  return { sql: `${fileURLToPath(base)}.sql`, manifest: `${fileURLToPath(base)}.json` };
}
