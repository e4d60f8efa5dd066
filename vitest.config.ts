import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.spec.ts', 'test/**/*.e2e.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: 'forks',
    // Three files at a time on 2 cores: the e2e files mostly wait on child processes, sockets and
    // (the upstream ones) minute-long rate windows, and no test depends on speed (CONTRIBUTING.md).
    maxWorkers: 3,
    teardownTimeout: 10_000,
  },
});
