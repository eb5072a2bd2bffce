import { migrationsDirectory } from './src/infra/db.js';
import { DirectoryMigrationSource } from './src/infra/migration-source.js';

/** For the knex CLI (`npx knex --knexfile knexfile.ts migrate:status` under tsx); the app migrates itself on start. */
export default {
  client: 'pg',
  connection: process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/webhooks',
  migrations: { migrationSource: new DirectoryMigrationSource(migrationsDirectory) },
};
