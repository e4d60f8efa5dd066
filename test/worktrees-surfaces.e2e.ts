/**
 * Worktree isolation on its other surfaces, against a real daemon process and real git: an ACP
 * child (the SDK fixture agent) works inside its worktree (process cwd, `session/new` cwd, its
 * fs writes), the model-facing tool says the child works on its own branch and names branch and
 * diffstat, `subagentd run --worktree [--base REF]` does the same from the CLI, and a provider's
 * config default isolates starts that name none.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import type { ContentBlock, ParentInput, RemoteSubagentRun } from '../client/index.js';
import { createSubagentTool } from '../tool/index.js';
import { SDK_AGENT } from './fixtures/acp-harness.js';
import { CLI, type DaemonProcess } from './support/daemon-process.js';
import { ClientPool, startE2eDaemon } from './support/e2e-daemon.js';
import { branches, git, makeRepo, snapshot, worktreePaths } from './support/git-repo.js';

let daemon: DaemonProcess;
const dirs: string[] = [];
const clients = new ClientPool();

beforeAll(async () => {
  daemon = await startE2eDaemon({
    tools: { write: true },
    detachGraceMs: 0,
    worktrees: { providers: { 'isolated-spawn-default': 'worktree', 'sdk-default': 'worktree' } },
    providers: [
      { type: 'acp', name: 'sdk-agent', command: process.execPath, args: [SDK_AGENT], env: { ACP_FIXTURE_MODE: 'write' }, fileAccess: { read: true, write: true }, initializeTimeoutMs: 5000 },
      { type: 'acp', name: 'sdk-default', command: process.execPath, args: [SDK_AGENT], env: { ACP_FIXTURE_MODE: 'write' }, fileAccess: { read: true, write: true }, initializeTimeoutMs: 5000 },
    ],
  });
});

afterEach(() => clients.closeAll());

afterAll(async () => {
  await daemon?.stop();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

const text = (value: string): ContentBlock[] => [{ type: 'text', text: value }];
function temp(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  dirs.push(dir);
  return dir;
}
function repo(files: Record<string, string>): string {
  const dir = makeRepo(files);
  dirs.push(dir);
  return dir;
}
function script(steps: unknown[]): string {
  const path = join(temp('subagentd-wt-script-'), 'script.json');
  writeFileSync(path, JSON.stringify({ steps }));
  return `scripted:${path}`;
}
const records = (file: string): Array<Record<string, unknown>> =>
  readFileSync(file, 'utf8')
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line));

for (const [provider, extra] of [
  ['sdk-agent', { isolation: 'worktree' as const }],
  ['sdk-default', {}],
] as const) {
  it(`an ACP child (${provider}${provider === 'sdk-default' ? ', isolated by its config default' : ''}) runs and writes inside its worktree, not in the parent's tree`, async () => {
    const dir = repo({ 'README.md': 'readme\n' });
    const before = snapshot(dir);
    const record = join(temp('subagentd-wt-acp-'), 'record.jsonl');
    const service = await clients.connect(daemon.socket);
    const run = (await service.start(provider, {
      prompt: text('made-by-acp.txt\nwritten by the ACP agent'),
      parent: { sessionId: 'acp-wt', cwd: dir },
      signal: new AbortController().signal,
      env: { ACP_FIXTURE_RECORD: record },
      label: 'acp writer',
      ...extra,
    })) as RemoteSubagentRun;
    const result = await run.result;
    expect(result.output).toEqual([{ type: 'text', text: expect.stringContaining('wrote') }]);
    const worktree = result.worktree!;
    expect(worktree.branch).toMatch(/^subagentd\/acp-writer-/);
    const seen = records(record);
    expect(seen.find((e) => e['event'] === 'start')!['cwd']).toBe(worktree.path);
    expect((seen.find((e) => e['event'] === 'session/new')!['params'] as { cwd: string }).cwd).toBe(worktree.path);
    expect(worktree.changed).toEqual({ files: 1, insertions: 1, deletions: 0 });
    expect(git(dir, 'show', `${worktree.branch}:made-by-acp.txt`)).toBe('written by the ACP agent');
    expect(existsSync(join(dir, 'made-by-acp.txt'))).toBe(false);
    expect(snapshot(dir)).toEqual(before);
    await run.dispose();
    expect(worktreePaths(dir)).toEqual([dir]);
    expect(branches(dir)).toEqual([worktree.branch]);
  });
}

it("the subagent tool with isolation 'worktree' tells the model the child works on its own branch, and names branch and diffstat", async () => {
  const dir = repo({ 'notes.txt': 'old note\n' });
  const service = await clients.connect(daemon.socket);
  const model = script([{ toolCalls: [{ name: 'edit_file', arguments: { path: 'notes.txt', oldText: 'old note', newText: 'new note\nsecond line' } }] }, { text: 'updated the note' }]);
  const handle = createSubagentTool<ParentInput>(service, { provider: 'spawn', isolation: 'worktree', agentOptions: { model } });
  try {
    const tool = handle.current()!;
    expect(tool.description).toContain('own branch');
    expect(tool.description).toContain('git worktree');
    const answer = await tool.execute({ description: 'Update the note', prompt: 'update notes.txt' }, { parent: { sessionId: 'tool-wt', cwd: dir } });
    expect(answer.isError ?? false).toBe(false);
    const said = answer.content.map((block) => (block.type === 'text' ? block.text : '')).join('');
    expect(said).toContain('updated the note');
    const [branch] = branches(dir);
    expect(branch).toMatch(/^subagentd\/update-the-note-/);
    expect(said).toContain(`1 file changed, 2 insertions(+), 1 deletion(-); committed on branch ${branch}`);
    expect(readFileSync(join(dir, 'notes.txt'), 'utf8')).toBe('old note\n');
    expect(worktreePaths(dir)).toEqual([dir]);
  } finally {
    await handle.dispose();
  }
});

function cli(cwd: string, ...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [CLI, ...args, '--socket', daemon.socket, '--state-dir', daemon.stateDir],
      { cwd, timeout: 30_000, env: { PATH: process.env['PATH'] ?? '', HOME: process.env['HOME'] ?? '' } },
      (error, stdout, stderr) => resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

it('`subagentd run --worktree --base REF` runs the child on its own branch from REF and reports it; --base alone is a usage error', async () => {
  const dir = repo({ 'v.txt': 'v1\n' });
  git(dir, 'tag', 'v1');
  writeFileSync(join(dir, 'v.txt'), 'v2\n');
  git(dir, 'commit', '-q', '-am', 'v2');
  const model = script([{ toolCalls: [{ name: 'edit_file', arguments: { path: 'v.txt', oldText: 'v1', newText: 'v1 patched' } }] }, { text: 'patched' }]);
  const human = await cli(dir, 'run', '--worktree', '--base', 'v1', '--model', model, '--quiet', 'patch v1');
  expect(human.code).toBe(0);
  expect(human.stdout.trim()).toBe('patched');
  expect(human.stderr).toMatch(/1 file changed, 1 insertion\(\+\), 1 deletion\(-\); committed on branch subagentd\/patch-v1-\S+, based on v1/);
  const [branch] = branches(dir);
  expect(git(dir, 'show', `${branch}:v.txt`)).toBe('v1 patched\n');
  expect(git(dir, 'merge-base', branch!, 'v1').trim()).toBe(git(dir, 'rev-parse', 'v1^{commit}').trim());
  expect(readFileSync(join(dir, 'v.txt'), 'utf8')).toBe('v2\n');

  const json = await cli(dir, 'run', '--worktree', '--model', script([{ text: 'nothing' }]), '--json', 'look');
  expect(json.code).toBe(0);
  expect(JSON.parse(json.stdout).worktree).toMatchObject({ baseRef: 'HEAD', changed: { files: 0 } });

  const usage = await cli(dir, 'run', '--base', 'v1', 'x');
  expect(usage.code).toBe(2);
  expect(usage.stderr).toContain('--base needs --worktree');
});
