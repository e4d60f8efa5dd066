/**
 * The subagent tool's configuration: every key's default and validation, what is refused at
 * configuration and what at mount, and that the request carries config verbatim (agentOptions
 * copied, never materialised as {}).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SubagentError } from '../protocol/index.js';
import { createSubagentTool, resolveToolConfig, type SubagentToolConfig } from '../tool/index.js';
import { waitFor } from './support/scripted-fixtures.js';
import { FakeService, provider } from './support/tool-fakes.js';

function configError(config: unknown): SubagentError {
  try {
    resolveToolConfig(config as SubagentToolConfig);
  } catch (error) {
    if (error instanceof SubagentError) return error;
    throw error;
  }
  throw new Error('the config was accepted');
}

describe('maxDepth', () => {
  it.each([['3'], [Number.NaN], [Infinity], [-Infinity], [-1], [1.5], [-0], [Number.MAX_SAFE_INTEGER + 1], [null]])(
    '%s is refused at configuration with the pinned message',
    (maxDepth) => {
      const error = configError({ provider: 'p', maxDepth });
      expect(error.message).toBe('maxDepth must be a non-negative safe integer');
      expect(error.code).toBe('INVALID_REQUEST');
      // And createSubagentTool throws the same before touching the service.
      expect(() => createSubagentTool(new FakeService(), { provider: 'p', maxDepth } as SubagentToolConfig)).toThrow(
        'maxDepth must be a non-negative safe integer',
      );
    },
  );

  it('defaults to 3; 0 and MAX_SAFE_INTEGER are caps; provider-managed sends none', () => {
    expect(resolveToolConfig({ provider: 'p' }).maxDepth).toBe(3);
    expect(resolveToolConfig({ provider: 'p', maxDepth: 0 }).maxDepth).toBe(0);
    expect(resolveToolConfig({ provider: 'p', maxDepth: Number.MAX_SAFE_INTEGER }).maxDepth).toBe(Number.MAX_SAFE_INTEGER);
    expect('maxDepth' in resolveToolConfig({ provider: 'p', maxDepth: 'provider-managed' })).toBe(false);
  });
});

describe('the other keys', () => {
  it('defaults: toolName subagent, background enabled, one-shot', () => {
    expect(resolveToolConfig({ provider: 'p' })).toEqual({
      provider: 'p',
      toolName: 'subagent',
      enableRunInBackground: true,
      backgroundMode: 'one-shot',
      maxDepth: 3,
    });
  });

  it.each([
    [{}, '/provider'],
    [{ provider: '' }, '/provider'],
    [{ provider: 'p', toolName: 'has space' }, '/toolName'],
    [{ provider: 'p', enableRunInBackground: 'yes' }, '/enableRunInBackground'],
    [{ provider: 'p', backgroundMode: 'forever' }, '/backgroundMode'],
    [{ provider: 'p', backgroundMode: 'continuable', enableRunInBackground: false }, '/backgroundMode'],
    [{ provider: 'p', agentOptions: [] }, '/agentOptions'],
    [{ provider: 'p', persona: 7 }, '/persona'],
    [{ provider: 'p', toolFilter: {} }, '/toolFilter'],
    [{ provider: 'p', toolFilter: { allow: ['a'], deny: ['b'] } }, '/toolFilter'],
    [{ provider: 'p', toolFilter: { allow: [1] } }, '/toolFilter/allow'],
    [{ provider: 'p', colour: 'blue' }, '/colour'],
  ])('%j is refused, naming %s', (config, field) => {
    expect(configError(config).details.field).toBe(field);
  });

  it('an explicit filter with neither allow nor deny fails when the tool is configured', () => {
    const service = new FakeService();
    expect(() => createSubagentTool(service, { provider: 'p', toolFilter: {} as never })).toThrow(/exactly one of allow or deny/);
  });
});

describe('the request carries the config verbatim', () => {
  async function requestFor(config: SubagentToolConfig) {
    const service = new FakeService();
    service.add(provider('p'));
    const tool = createSubagentTool(service, config).current()!;
    const call = tool.execute({ description: 'label it', prompt: 'do it' }, { parent: 'agent-1' });
    await waitFor(() => service.runs.length === 1);
    const run = service.runs[0]!;
    run.resolve({ output: [], stopReason: 'completed' });
    await call;
    return run.request;
  }

  it('without agentOptions, persona and toolFilter the request has none of them (no {})', async () => {
    const request = await requestFor({ provider: 'p' });
    const { signal, ...rest } = request;
    expect(signal).toBeInstanceOf(AbortSignal);
    expect(rest).toEqual({ label: 'label it', prompt: [{ type: 'text', text: 'do it' }], parent: 'agent-1', maxDepth: 3 });
    expect(Object.keys(rest).sort()).toEqual(['label', 'maxDepth', 'parent', 'prompt']);
  });

  it('agentOptions are copied to every request; persona and toolFilter forwarded; provider-managed sends no maxDepth', async () => {
    const agentOptions = { model: 'm', custom: { deep: true } };
    const config: SubagentToolConfig = { provider: 'p', agentOptions, persona: 'You are terse.', toolFilter: { deny: ['shell'] }, maxDepth: 'provider-managed' };
    const first = await requestFor(config);
    const second = await requestFor(config);
    expect(first.agentOptions).toEqual(agentOptions);
    expect(first.agentOptions).not.toBe(second.agentOptions);
    expect(first.persona).toBe('You are terse.');
    expect(first.toolFilter).toEqual({ deny: ['shell'] });
    expect('maxDepth' in first).toBe(false);
  });
});

describe('refused at mount', () => {
  it.each([
    [{ maxDepth: 2 }, { depthLimit: false }, "maxDepth: 'provider-managed'"],
    [{ persona: 'x', maxDepth: 'provider-managed' as const }, { persona: false, depthLimit: false }, 'persona'],
    [{ toolFilter: { allow: ['a'] } }, { toolFilter: false }, 'toolFilter'],
  ])('%j on a provider without %j', (extra, missing, named) => {
    const service = new FakeService();
    service.add(provider('p', { capabilities: { outputSchema: true, depthLimit: true, toolFilter: true, persona: true, ...missing } }));
    const handle = createSubagentTool(service, { provider: 'p', ...extra });
    expect(handle.current()).toBeUndefined();
    expect(handle.refusal()?.code).toBe('UNSUPPORTED_CAPABILITY');
    expect(handle.refusal()?.message).toContain(named);
  });
});

describe('the folder', () => {
  it('imports nothing of ours but protocol/ (the daemon mounts the same tool in its children)', () => {
    const dir = join(import.meta.dirname, '..', 'tool');
    const imports = readdirSync(dir)
      .filter((file) => file.endsWith('.ts'))
      .flatMap((file) => [...readFileSync(join(dir, file), 'utf8').matchAll(/from '(\.\.?\/[^']+)'/g)].map((m) => m[1]!));
    expect(imports.length).toBeGreaterThan(0);
    expect(imports.filter((path) => path.startsWith('../') && !path.startsWith('../protocol/'))).toEqual([]);
  });
});
