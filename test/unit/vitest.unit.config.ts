import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

// Unit tests only: pure code, no database or Redis, so no globalSetup.
export default defineConfig({
  root: fileURLToPath(new URL('../..', import.meta.url)),
  test: {
    // http-client.test.ts uses loopback HTTP servers only (no database/Redis), so it runs here too.
    include: ['test/unit/**/*.test.ts', 'test/integration/http-client.test.ts'],
  },
});
