/**
 * `subagentd mcp --isolation worktree` end to end, driven by the MCP SDK's own `Client` over
 * stdio as an MCP host would: the face's cwd is a real git repository, the child (a scripted
 * model with the write tools on) edits a file, and the edit lands on the child's own branch. The
 * tool result names that branch and gives the diffstat; the parent's tree is byte-identical.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { RemoteSubagentService } from '../client/index.js';
import { CliSandbox, HEAVY_TEST_MS } from './support/cli-harness.js';
import { daemonOps, openMcpFace, waitForRun, type McpFace } from './support/face-harness.js';
import { branches, git, snapshot, worktreePaths } from './support/git-repo.js';

let box: CliSandbox;
let ops: RemoteSubagentService | undefined;
let mcp: McpFace | undefined;

beforeAll(() => {
  box = new CliSandbox('subagentd-mcp-wt-');
  // The face's cwd (box.work) becomes a repository with the README committed.
  git(box.work, 'init', '-q', '-b', 'main');
  git(box.work, 'config', 'user.name', 'Test');
  git(box.work, 'config', 'user.email', 'test@example.com');
  git(box.work, 'add', '-A');
  git(box.work, 'commit', '-q', '-m', 'initial');
});
afterAll(async () => {
  await mcp?.close().catch(() => undefined);
  await ops?.close();
  await box.cleanup();
});

it('a call through `mcp --isolation worktree` edits on the child branch; the result names branch and diffstat; the parent tree is untouched', { timeout: HEAVY_TEST_MS }, async () => {
  const before = snapshot(box.work);
  const headBefore = git(box.work, 'rev-parse', 'HEAD').trim();
  const config = box.file('config.json', { tools: { write: true } });
  const script = box.file('edit.json', {
    steps: [
      { toolCalls: [{ name: 'edit_file', arguments: { path: 'README.md', oldText: '# sandbox', newText: '# sandbox, edited by the child' } }] },
      { toolCalls: [{ name: 'write_file', arguments: { path: 'notes.txt', content: 'one\ntwo\n' } }] },
      { text: 'Edited the README and wrote notes.', finish: 'stop' },
    ],
  });
  mcp = await openMcpFace(box, ['--config', config, '--model', `scripted:${script}`, '--isolation', 'worktree']);
  const result = (await mcp.client.callTool({ name: 'subagent', arguments: { description: 'Edit the readme', prompt: 'Edit the README and write notes.' } })) as CallToolResult;
  const text = result.content.map((c) => (c.type === 'text' ? c.text : '')).join('');
  expect(result.isError, `${text}\n${mcp.stderr()}`).toBeFalsy();
  expect(text).toContain('Edited the README and wrote notes.');

  const made = branches(box.work);
  expect(made).toHaveLength(1);
  const branch = made[0]!;
  expect(branch).toMatch(/^subagentd\/edit-the-readme-/);
  expect(text).toContain(branch);
  // The diffstat: 2 files, 3 insertions, 1 deletion (README's title line replaced, notes' two lines).
  expect(git(box.work, 'diff', '--shortstat', headBefore, branch).trim()).toBe('2 files changed, 3 insertions(+), 1 deletion(-)');
  expect(text).toContain(`[worktree] 2 files changed, 3 insertions(+), 1 deletion(-); committed on branch ${branch}, based on HEAD (${headBefore.slice(0, 12)}).`);

  expect(git(box.work, 'show', `${branch}:README.md`)).toContain('# sandbox, edited by the child');
  expect(git(box.work, 'show', `${branch}:notes.txt`)).toBe('one\ntwo\n');
  expect(snapshot(box.work)).toEqual(before);
  expect(git(box.work, 'rev-parse', 'HEAD').trim()).toBe(headBefore);
  expect(git(box.work, 'status', '--porcelain')).toBe('');

  // The face disposes the run when the call ends: the worktree goes, the changed branch stays.
  ops = await daemonOps(box);
  await waitForRun(ops, (r) => r.stopReason === 'completed' && r.state === 'disposed', 'the disposed run');
  expect(worktreePaths(box.work)).toEqual([box.work]);
  expect(branches(box.work)).toEqual([branch]);
});
