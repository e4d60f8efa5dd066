import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { collectImports, importViolations } from '../scripts/import-rules.js';

const REPO = fileURLToPath(new URL('..', import.meta.url));

describe('import rules', () => {
  it('the tree keeps them: rooms import only what they may, providers stay apart, no cycles', () => {
    const edges = collectImports(REPO);
    expect(edges.length).toBeGreaterThan(300);
    expect(importViolations(edges)).toEqual([]);
  });

  it('the checker names each kind of violation', () => {
    const problems = importViolations([
      { from: 'protocol/seam.ts', to: 'common/socket-path.ts' },
      { from: 'client/connect.ts', to: 'daemon/daemon.ts' },
      { from: 'daemon/daemon.ts', to: 'client/index.ts' },
      { from: 'daemon/providers/acp/acp-run.ts', to: 'daemon/providers/in-process/in-process-run.ts' },
      { from: 'daemon/a.ts', to: 'daemon/b.ts' },
      { from: 'daemon/b.ts', to: 'daemon/a.ts' },
    ]);
    expect(problems).toEqual([
      'protocol/seam.ts imports common/socket-path.ts: protocol/ may import only itself',
      'client/connect.ts imports daemon/daemon.ts: client/ may import only protocol, common, tool',
      'daemon/daemon.ts imports client/index.ts: daemon/ may import only protocol, common, tool',
      'daemon/providers/acp/acp-run.ts imports daemon/providers/in-process/in-process-run.ts: providers never import each other',
      'import cycle: daemon/a.ts -> daemon/b.ts',
    ]);
  });
});
