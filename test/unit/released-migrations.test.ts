import { describe, expect, it } from 'vitest';
import {
  currentMigrations,
  migrationChecksum,
  packageVersion,
  readReleased,
  releasedMigrationProblems,
  type ReleasedMigrations,
} from '../../scripts/released-migrations.js';

describe('released migrations', () => {
  it('every migration of the latest release is still in migrations/ exactly as released', async () => {
    const released = readReleased();
    expect(Object.keys(released.migrations).length).toBeGreaterThan(0);
    expect(releasedMigrationProblems(released, await currentMigrations())).toEqual([]);
  });

  it('is frozen for the version package.json names (run `npm run release:freeze` when cutting a release)', () => {
    expect(readReleased().version).toBe(packageVersion());
  });

  it('names a released migration that changed or was deleted, and lets new migrations through', () => {
    const released: ReleasedMigrations = {
      version: '1.2.0',
      migrations: { '001_kept': migrationChecksum('a'), '002_edited': migrationChecksum('b'), '003_deleted': migrationChecksum('c') },
    };
    const current = { '001_kept': migrationChecksum('a'), '002_edited': migrationChecksum('b2'), '004_new': migrationChecksum('d') };
    expect(releasedMigrationProblems(released, current)).toEqual([
      'migrations/002_edited.ts was released in 1.2.0 and has changed: write a new migration instead',
      'migrations/003_deleted.ts was released in 1.2.0 and has been deleted',
    ]);
  });

  it('holds the modules under migrations/lib to the same rule, since migrations import them', async () => {
    const current = await currentMigrations();
    expect(Object.keys(current)).toContain('lib/typeid-sql');
    expect(Object.keys(current)).toContain('20261206000053_delivery_ids_as_uuid');
  });

  it('hashes a CRLF or CR checkout of a file like its LF original', () => {
    expect(migrationChecksum('one\r\ntwo\r\n')).toBe(migrationChecksum('one\ntwo\n'));
    expect(migrationChecksum('one\rtwo')).toBe(migrationChecksum('one\ntwo'));
    expect(migrationChecksum('one\ntwo')).not.toBe(migrationChecksum('one two'));
  });
});
