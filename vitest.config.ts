import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.spec.ts', 'test/**/*.e2e.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: 'forks',
    // Three files at a time on 2 cores: the e2e files mostly wait on child processes and sockets, and
    // no test depends on speed. One at a time, the suite took 15 min; two, ~620 s quiet and ~950 s
    // under other load; three, 625 s under a load of 5-7. The MCP progress check that once failed
    // at three read progress through the SDK client, which drops progress arriving with its result
    // (test/mcp-face.e2e.ts now reads the wire).
    maxWorkers: 3,
    teardownTimeout: 10_000,
  },
});
