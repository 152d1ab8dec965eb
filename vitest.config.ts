import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 120_000,
    hookTimeout: 120_000,
    // End-to-end tests start servers and processes; two workers match the 2-core CI machine.
    maxWorkers: 2,
    reporters: ['default', './test/helpers/summary-reporter.ts'],
    // Every run gets its own TMPDIR and fails if a test left anything in it.
    globalSetup: ['./test/helpers/tmp-guard.ts'],
  },
});
