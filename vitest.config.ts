import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.spec.ts', 'test/**/*.e2e.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: 'forks',
    // Two files at a time on 2 cores: the e2e files mostly wait on child processes and sockets, and
    // no test depends on speed. One at a time, the suite took 15 min; two, under 8 (CONTRIBUTING.md).
    // Three took 500 s against 752 s, but raced an MCP progress check once under that load.
    maxWorkers: 2,
    teardownTimeout: 10_000,
  },
});
