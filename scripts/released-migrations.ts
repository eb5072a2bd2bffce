/**
 * What "released" means for migrations: migrations/released.json records the checksum of every
 * migration file of the latest release, and a released migration never changes again (tables change
 * in a new migration). Written by `npm run release:freeze`, checked by
 * test/unit/released-migrations.test.ts.
 */
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DirectoryMigrationSource } from '../src/infra/migration-source.js';

export const releasedFile = fileURLToPath(new URL('../migrations/released.json', import.meta.url));
export const migrationsSourceDirectory = fileURLToPath(new URL('../migrations', import.meta.url));

export interface ReleasedMigrations {
  version: string;
  /** Migration name (its file name without extension, as knex records it) → sha256 of the file. */
  migrations: Record<string, string>;
}

/** sha256 of a migration's text with line endings normalized, so a CRLF checkout hashes like LF. */
export function migrationChecksum(text: string): string {
  return createHash('sha256').update(text.replace(/\r\n?/g, '\n')).digest('hex');
}

/**
 * Every migration in the directory, by the name knex records, with its checksum; and every module
 * under migrations/lib, which migrations import, as `lib/<name>`: a released migration's meaning
 * includes what it imports.
 */
export async function currentMigrations(directory = migrationsSourceDirectory): Promise<Record<string, string>> {
  const source = new DirectoryMigrationSource(directory);
  const checksums: Record<string, string> = {};
  for (const file of await source.getMigrations()) {
    checksums[source.getMigrationName(file)] = migrationChecksum(readFileSync(join(directory, file), 'utf8'));
  }
  const lib = join(directory, 'lib');
  if (existsSync(lib)) {
    for (const file of readdirSync(lib).filter((f) => f.endsWith('.ts')).sort()) {
      checksums[`lib/${file.slice(0, -'.ts'.length)}`] = migrationChecksum(readFileSync(join(lib, file), 'utf8'));
    }
  }
  return checksums;
}

/**
 * One line per released migration that no longer matches its release, naming its file. Migrations
 * that are not in the release yet are free to change.
 */
export function releasedMigrationProblems(released: ReleasedMigrations, current: Record<string, string>): string[] {
  const problems: string[] = [];
  for (const [name, checksum] of Object.entries(released.migrations)) {
    const now = current[name];
    if (now === undefined) problems.push(`migrations/${name}.ts was released in ${released.version} and has been deleted`);
    else if (now !== checksum) problems.push(`migrations/${name}.ts was released in ${released.version} and has changed: write a new migration instead`);
  }
  return problems;
}

export function readReleased(file = releasedFile): ReleasedMigrations {
  return JSON.parse(readFileSync(file, 'utf8')) as ReleasedMigrations;
}

export function packageVersion(): string {
  return (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version;
}
