/**
 * Worktree isolation with a real ACP agent, in the real-clients lane: Qwen Code 0.24.4 (`qwen
 * --acp`, from the registry, cached under $TMPDIR) as an ACP provider of a real daemon process,
 * offline against a local chat-completions server. Its model asks Qwen's `write_file` tool to
 * write a file at the working directory Qwen was given; the permission policy
 * `allow-in-workspace` approves it only inside the workspace. The file must land in the child's
 * worktree and on its branch, never in the parent's tree. A package that cannot be installed
 * fails the test: it never skips.
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { ContentBlock, RemoteSubagentRun } from '../client/index.js';
import { chunk, startChatCompletionsServer, textResponse, type ChatCompletionsServer, type ScriptedResponse } from './support/chat-completions-server.js';
import { startDaemon, type DaemonProcess } from './support/daemon-process.js';
import { ClientPool } from './support/e2e-daemon.js';
import { branches, git, makeRepo, snapshot, worktreePaths } from './support/git-repo.js';
import { installCached, writeQwenSettings, type CachedPackage } from './support/real-agents.js';

const FILE = 'made-by-qwen.txt';
const CONTENT = 'written by Qwen Code in its worktree\n';
const LABEL = 'qwen writer';

let qwen: CachedPackage;
let model: ChatCompletionsServer;
let root: string;
let daemon: DaemonProcess | undefined;
const clients = new ClientPool();

/** The worktree Qwen works in, as its own prompt names it (the daemon names the folder after the label). */
function worktreeIn(body: unknown): string | undefined {
  return /(\/[^\s"'`\\]*\/qwen-writer-[^\s"'`\\/]+)/.exec(JSON.stringify(body))?.[1];
}

const writeCall = (path: string): ScriptedResponse => ({
  type: 'stream',
  steps: [
    {
      data: chunk({
        role: 'assistant',
        content: null,
        tool_calls: [{ index: 0, id: 'call_write', type: 'function', function: { name: 'write_file', arguments: JSON.stringify({ file_path: path, content: CONTENT }) } }],
      }),
    },
    { data: chunk({}, { finish_reason: 'tool_calls' }) },
    { done: true },
  ],
});

/** Qwen's model: write the file once (at the worktree it was told of), then report. */
function answer(body: { messages?: Array<{ role: string }> }): ScriptedResponse {
  if ((body.messages ?? []).some((m) => m.role === 'tool')) return textResponse(['Wrote the file.']);
  const worktree = worktreeIn(body.messages);
  if (worktree === undefined) return textResponse(['No worktree in sight.']);
  return writeCall(join(worktree, FILE));
}

beforeAll(async () => {
  model = await startChatCompletionsServer({ fallback: answer });
  qwen = await installCached('@qwen-code/qwen-code', '0.24.4');
  root = mkdtempSync(join(tmpdir(), 'subagentd-wt-qwen-'));
}, 300_000);
afterAll(async () => {
  await clients.closeAll();
  await daemon?.stop();
  await model?.close();
  if (root) rmSync(root, { recursive: true, force: true });
});

it('a Qwen Code child with isolation worktree writes inside its worktree, on its branch, and not in the parent tree', { timeout: 240_000 }, async () => {
  const home = join(root, 'home');
  writeQwenSettings(home);
  daemon = await startDaemon(
    {
      detachGraceMs: 0,
      providers: [
        {
          type: 'acp',
          name: 'qwen',
          command: process.execPath,
          args: [join(qwen.packageDir, 'cli-entry.js'), '--acp'],
          // TMPDIR under the test's root: Qwen Code's peer-socket dir (qwen-socks-<nonce>) goes with it.
          env: { HOME: home, TMPDIR: root, OPENAI_API_KEY: 'sk-fake', OPENAI_BASE_URL: model.baseUrl, OPENAI_MODEL: 'fake-model', NO_COLOR: '1' },
          initializeTimeoutMs: 120_000,
          permission: 'allow-in-workspace',
          fileAccess: { read: true, write: true },
        },
      ],
    },
    [],
    { fixtures: false },
  );
  const dir = makeRepo({ 'README.md': 'readme\n' });
  const repoDir = dir;
  try {
    const before = snapshot(dir);
    const service = await clients.connect(daemon.socket);
    const text: ContentBlock[] = [{ type: 'text', text: `Write ${FILE} in the working directory.` }];
    const run = (await service.start('qwen', { prompt: text, parent: { sessionId: 'qwen-wt', cwd: dir }, signal: new AbortController().signal, label: LABEL, isolation: 'worktree' })) as RemoteSubagentRun;
    const result = await run.result;
    expect(result.stopReason, result.diagnostic).toBe('completed');
    const worktree = result.worktree!;
    expect(worktree.branch).toMatch(/^subagentd\/qwen-writer-/);
    // Qwen was told the worktree as its working directory, and its model wrote there.
    expect(model.requests.some((r) => worktreeIn(r.body?.messages) === worktree.path)).toBe(true);
    expect(model.requests.some((r) => (r.body?.messages ?? []).some((m: { role: string }) => m.role === 'tool'))).toBe(true);
    expect(worktree.changed).toEqual({ files: 1, insertions: 1, deletions: 0 });
    expect(git(dir, 'show', `${worktree.branch}:${FILE}`)).toBe(CONTENT);
    expect(git(dir, 'diff', '--name-only', worktree.baseCommit, worktree.branch).trim()).toBe(FILE);
    expect(existsSync(join(dir, FILE))).toBe(false);
    expect(snapshot(dir)).toEqual(before);
    expect(git(dir, 'status', '--porcelain')).toBe('');
    expect(worktreePaths(dir)).toEqual([dir, worktree.path]);
    await run.dispose();
    // Changed: the worktree goes, the branch stays (cleanup `auto`).
    expect(worktreePaths(dir)).toEqual([dir]);
    expect(branches(dir)).toEqual([worktree.branch]);
  } finally {
    rmSync(repoDir, { recursive: true, force: true });
  }
});
