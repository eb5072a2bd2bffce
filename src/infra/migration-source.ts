import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Knex } from 'knex';

type Migration = { up: (knex: Knex) => Promise<void>; down: (knex: Knex) => Promise<void> };

/**
 * Loads migrations through our own dynamic import rather than knex's, so the same files run under
 * tsx, under the test runner's transform, and compiled to JavaScript.
 */
export class DirectoryMigrationSource implements Knex.MigrationSource<string> {
  constructor(private readonly directory: string) {}

  async getMigrations(): Promise<string[]> {
    return readdirSync(this.directory)
      .filter((f) => /^\d+_[a-z0-9_]+\.(ts|js)$/.test(f) && !f.endsWith('.d.ts'))
      .sort();
  }

  getMigrationName(file: string): string {
    // Named without extension so a compiled build and the TypeScript sources share one history.
    return file.replace(/\.(ts|js)$/, '');
  }

  async getMigration(file: string): Promise<Migration> {
    return (await import(pathToFileURL(join(this.directory, file)).href)) as Migration;
  }
}
