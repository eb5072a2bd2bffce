/**
 * `npm run release:freeze`: records every migration now in migrations/ as released in the version
 * package.json names. Run when cutting a release (see docs/operations/upgrade.md); from then on
 * test/unit/released-migrations.test.ts fails if any of them changes.
 */
import { writeFileSync } from 'node:fs';
import { currentMigrations, packageVersion, releasedFile, type ReleasedMigrations } from './released-migrations.js';

const released: ReleasedMigrations = { version: packageVersion(), migrations: await currentMigrations() };
writeFileSync(releasedFile, `${JSON.stringify(released, null, 2)}\n`);
process.stdout.write(`migrations/released.json: ${Object.keys(released.migrations).length} migrations frozen as ${released.version}\n`);
