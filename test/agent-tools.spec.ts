import { mkdir, readFile, realpath, stat, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { ToolCall } from '../protocol/index.js';
import type { AgentTool, ToolPolicy } from '../daemon/agent/tools/tool.js';
import { ToolRegistry, ToolSchemaError } from '../daemon/agent/tools/tool-registry.js';
import { Workspace } from '../daemon/workspace/workspace.js';
import { workspaceTools } from '../daemon/agent/tools/workspace-tools.js';
import { useTempDirs } from './support/scripted-fixtures.js';

const tempDir = useTempDirs();
let callCount = 0;

function call(name: string, args: unknown): ToolCall {
  callCount += 1;
  return { id: `c${callCount}`, name, arguments: typeof args === 'string' ? args : JSON.stringify(args) };
}

async function setup(policy: ToolPolicy = { write: false, shell: false }, env: Record<string, string> = {}) {
  const root = await tempDir('ws-');
  const outside = await tempDir('outside-');
  await writeFile(join(root, 'inside.txt'), 'line one\nline two\nneedle here\n');
  await mkdir(join(root, 'src'));
  await writeFile(join(root, 'src', 'a.ts'), 'const needle = 1;\n');
  await writeFile(join(outside, 'secret.txt'), 'top secret needle');
  await symlink(join(outside, 'secret.txt'), join(root, 'link-to-secret'));
  await symlink(outside, join(root, 'link-to-outside'));
  const registry = new ToolRegistry(workspaceTools(await Workspace.open(root), policy, env));
  const invoke = (name: string, args: unknown) => registry.invoke(call(name, args), { callId: 'x', signal: new AbortController().signal });
  const textOf = async (name: string, args: unknown) => {
    const outcome = await invoke(name, args);
    return { isError: outcome.isError, text: outcome.content.map((b) => (b.type === 'text' ? b.text : '')).join('') };
  };
  return { root, outside, registry, invoke, textOf };
}

describe('workspace tools', () => {
  it('offers only the reading tools by default', async () => {
    const { registry, textOf, root } = await setup();
    expect(registry.specs().map((s) => s.name)).toEqual(['read_file', 'list_directory', 'search_text']);
    const write = await textOf('write_file', { path: 'new.txt', content: 'x' });
    expect(write.isError).toBe(true);
    expect(write.text).toMatch(/not available/);
    expect(await textOf('run_shell', { command: 'touch made-by-shell' })).toMatchObject({ isError: true });
    await expect(stat(join(root, 'new.txt'))).rejects.toThrow();
    await expect(stat(join(root, 'made-by-shell'))).rejects.toThrow();
  });

  it('reads, lists and searches inside the root', async () => {
    const { textOf } = await setup();
    expect(await textOf('read_file', { path: 'inside.txt', startLine: 2, endLine: 3 })).toEqual({ isError: false, text: 'line two\nneedle here' });
    const listing = await textOf('list_directory', {});
    expect(listing.text.split('\n')).toEqual(['inside.txt', 'link-to-outside@', 'link-to-secret@', 'src/']);
    const found = await textOf('search_text', { query: 'needle' });
    // Symlinks are not followed, so the outside secret never shows up.
    expect(found.text.split('\n').sort()).toEqual(['inside.txt:3: needle here', 'src/a.ts:1: const needle = 1;']);
  });

  it('refuses paths that escape the root, symlinks included', async () => {
    const { textOf, outside } = await setup({ write: true, shell: false });
    for (const path of ['../outside.txt', join(outside, 'secret.txt'), 'link-to-secret', 'link-to-outside/secret.txt', 'src/../../x']) {
      const read = await textOf('read_file', { path });
      expect(read.isError, path).toBe(true);
      expect(read.text, path).not.toContain('top secret');
    }
    expect((await textOf('list_directory', { path: 'link-to-outside' })).isError).toBe(true);
    expect((await textOf('search_text', { query: 'needle', path: 'link-to-outside' })).isError).toBe(true);
    const escapes = await textOf('write_file', { path: 'link-to-outside/planted.txt', content: 'x' });
    expect(escapes).toMatchObject({ isError: true });
    expect(escapes.text).toMatch(/outside the workspace/);
    expect((await textOf('write_file', { path: '../planted.txt', content: 'x' })).isError).toBe(true);
    expect((await textOf('edit_file', { path: 'link-to-secret', oldText: 'top', newText: 'no' })).isError).toBe(true);
    await expect(stat(join(outside, 'planted.txt'))).rejects.toThrow();
    expect(await readFile(join(outside, 'secret.txt'), 'utf8')).toBe('top secret needle');
  });

  it('writes and edits inside the root when the policy allows it', async () => {
    const { textOf, root } = await setup({ write: true, shell: false });
    expect((await textOf('write_file', { path: 'deep/new.txt', content: 'alpha beta alpha' })).isError).toBe(false);
    expect(await readFile(join(root, 'deep/new.txt'), 'utf8')).toBe('alpha beta alpha');
    const ambiguous = await textOf('edit_file', { path: 'deep/new.txt', oldText: 'alpha', newText: 'gamma' });
    expect(ambiguous.isError).toBe(true);
    expect((await textOf('edit_file', { path: 'deep/new.txt', oldText: 'beta', newText: 'delta' })).isError).toBe(false);
    expect((await textOf('edit_file', { path: 'deep/new.txt', oldText: 'alpha', newText: 'x', replaceAll: true })).isError).toBe(false);
    expect(await readFile(join(root, 'deep/new.txt'), 'utf8')).toBe('x delta x');
  });

  it('runs the shell in the root with only the request env plus PATH', async () => {
    process.env['SUBAGENTD_TEST_SECRET'] = 'leaked';
    try {
      const { textOf, root } = await setup({ write: false, shell: true }, { GREETING: 'hello' });
      const out = await textOf('run_shell', { command: 'echo "g=$GREETING s=$SUBAGENTD_TEST_SECRET"; pwd; env | wc -l' });
      expect(out.isError).toBe(false);
      const lines = out.text.split('\n');
      expect(lines).toContain('g=hello s=');
      expect(lines).toContain(await realpath(root));
      expect(out.text).not.toContain('leaked');
      const failing = await textOf('run_shell', { command: 'exit 3' });
      expect(failing).toMatchObject({ isError: true });
      expect(failing.text).toMatch(/exit code 3/);
    } finally {
      delete process.env['SUBAGENTD_TEST_SECRET'];
    }
  });

  it('kills a shell command at its timeout', async () => {
    const { textOf } = await setup({ write: false, shell: true, shellTimeoutMs: 200 });
    const started = Date.now();
    const out = await textOf('run_shell', { command: 'sleep 10' });
    expect(out.isError).toBe(true);
    expect(out.text).toMatch(/timed out after 200 ms/);
    expect(Date.now() - started).toBeLessThan(3000);
  });
});

describe('tool registry', () => {
  const echo: AgentTool = {
    name: 'echo',
    description: 'echo',
    parameters: { type: 'object', properties: { n: { type: 'integer' } }, required: ['n'], additionalProperties: false },
    execute: async (args) => ({ content: [{ type: 'text', text: JSON.stringify(args) }], isError: false }),
  };
  const boom: AgentTool = { ...echo, name: 'boom', execute: async () => Promise.reject(new Error('kaput')) };
  const registry = new ToolRegistry([echo, boom]);
  const run = async (c: ToolCall) => {
    const outcome = await registry.invoke(c, { callId: c.id, signal: new AbortController().signal });
    return { isError: outcome.isError, text: outcome.content.map((b) => (b.type === 'text' ? b.text : '')).join('') };
  };

  it('turns every failure into an error result the model can read', async () => {
    expect(await run(call('echo', { n: 2 }))).toEqual({ isError: false, text: '{"n":2}' });
    expect(await run(call('echo', '{"n": 2'))).toMatchObject({ isError: true, text: expect.stringMatching(/not valid JSON/) });
    expect(await run(call('echo', { n: 'two' }))).toMatchObject({ isError: true, text: expect.stringMatching(/arguments\/n must be integer/) });
    expect(await run(call('missing', {}))).toMatchObject({ isError: true, text: expect.stringMatching(/"missing" is not available/) });
    expect(await run(call('boom', { n: 1 }))).toEqual({ isError: true, text: 'boom failed: kaput' });
  });

  it('rejects an uncompilable schema at construction, naming the tool', () => {
    const bad: AgentTool = { ...echo, name: 'bad', parameters: { type: 'object', properties: { x: { type: 'no-such-type' } } } };
    expect(() => new ToolRegistry([bad])).toThrow(ToolSchemaError);
    expect(() => new ToolRegistry([bad])).toThrow(/tool "bad"/);
  });
});
