import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

/** The package's own name resolves to its sources in tests (as tsconfig's paths do for tsc and tsx): one copy of every class. */
const source = (path: string): string => fileURLToPath(new URL(path, import.meta.url));

export default defineConfig({
  resolve: {
    alias: [
      { find: /^rxfeed$/, replacement: source('./src/index.ts') },
      { find: /^rxfeed\/(postgres|metrics|leases|emulator|sse)$/, replacement: source('./src/$1/index.ts') },
    ],
  },
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    reporters: ['default', './test/support/summaryReporter.ts'],
  },
});
