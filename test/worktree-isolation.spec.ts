/**
 * The isolation wrapper's refusals, which come before any provider or git work: cluster mode
 * passes the mode on to the executing member, isolation fields without `worktree` are refused, a start without
 * isolation reaches the provider untouched; and the branch-name slug of a label.
 */
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import type { DaemonProvider, ProviderStartRequest, RunHost } from '../daemon/provider.js';
import { WorktreeIsolation } from '../daemon/worktrees/isolating-provider.js';
import { slug } from '../daemon/worktrees/worktree-manager.js';

const log = pino({ level: 'silent' });
const host: RunHost = {
  runId: 'run_abcdefgh12345678',
  callTool: () => Promise.reject(new Error('no tools')),
  askPermission: () => Promise.reject(new Error('no prompts')),
  emit: () => undefined,
  log,
};

function recordingProvider(): { provider: DaemonProvider; seen: ProviderStartRequest[] } {
  const seen: ProviderStartRequest[] = [];
  const provider: DaemonProvider = {
    name: 'inner',
    capabilities: { outputSchema: false, depthLimit: false, toolFilter: false, persona: false },
    inheritsParentContext: false,
    runtime: { sendMessage: false, resume: false },
    async start(request) {
      seen.push(request);
      return { id: 'child-1', localAgent: undefined, result: Promise.resolve({ output: [], stopReason: 'completed' }), dispose: async () => undefined };
    },
  };
  return { provider, seen };
}

const request = (extra: Partial<ProviderStartRequest> = {}): ProviderStartRequest => ({
  prompt: [{ type: 'text', text: 'x' }],
  parent: { sessionId: 'p', cwd: '/nowhere/in/particular' },
  childDepth: 1,
  signal: new AbortController().signal,
  host,
  ...extra,
});

describe('worktree isolation wrapper', () => {
  it('in cluster mode passes the settled mode on to the stand-in (the executing member builds the worktree), git untouched; the executing side adds no defaults of its own', async () => {
    const { provider, seen } = recordingProvider();
    const options = { stateWorktrees: '/nonexistent', carried: true, defaults: { inner: 'worktree' as const }, shuttingDown: () => false };
    const isolation = new WorktreeIsolation(options);
    await isolation.decorate(provider).start(request({ isolation: { baseRef: 'main' } }));
    await isolation.decorate(provider).start(request());
    expect(seen.map((r) => [r.parent.cwd, r.isolation])).toEqual([
      ['/nowhere/in/particular', { isolation: 'worktree', baseRef: 'main' }],
      ['/nowhere/in/particular', { isolation: 'worktree' }],
    ]);
    // The member executing a run without `isolation` runs it as it is, whatever its own defaults.
    const executing = isolation.isolate(provider, { member: 'm1', keeps: () => false });
    await executing.start(request());
    expect(seen[2]!.parent.cwd).toBe('/nowhere/in/particular');
    expect('isolation' in seen[2]!).toBe(false);
  });

  it('refuses baseRef, includeUncommitted or cleanup without worktree isolation', async () => {
    const { provider, seen } = recordingProvider();
    const wrapped = new WorktreeIsolation({ stateWorktrees: '/nonexistent', shuttingDown: () => false }).decorate(provider);
    for (const fields of [{ baseRef: 'main' }, { includeUncommitted: true }, { cleanup: 'keep' as const }]) {
      await expect(wrapped.start(request({ isolation: fields }))).rejects.toMatchObject({ code: 'INVALID_REQUEST', details: { field: '/isolation' } });
    }
    expect(seen).toEqual([]);
  });

  it('passes a start without isolation through untouched, without the isolation field; keeps the provider as it describes itself', async () => {
    const { provider, seen } = recordingProvider();
    const wrapped = new WorktreeIsolation({ stateWorktrees: '/nonexistent', shuttingDown: () => false }).decorate(provider);
    expect([wrapped.name, wrapped.runtime, wrapped.inheritsParentContext]).toEqual([provider.name, provider.runtime, provider.inheritsParentContext]);
    const run = await wrapped.start(request({ isolation: { isolation: 'none' } }));
    expect(run.id).toBe('child-1');
    expect(seen).toHaveLength(1);
    expect(seen[0]!.parent.cwd).toBe('/nowhere/in/particular');
    expect('isolation' in seen[0]!).toBe(false);
  });

  it('makes branch-name slugs of labels', () => {
    expect(slug('Fix the flaky test!')).toBe('fix-the-flaky-test');
    expect(slug(undefined)).toBe('child');
    expect(slug('...')).toBe('child');
    expect(slug('Ünïcode only ✓')).toBe('n-code-only');
    expect(slug('a'.repeat(60))).toHaveLength(40);
  });
});
