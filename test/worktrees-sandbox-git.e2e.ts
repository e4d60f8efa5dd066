/**
 * git inside the shell sandbox, in a worktree: a worktree's `.git` is a file naming the main
 * repository's `.git/worktrees/<name>`, outside the sandbox's view. A scripted child with
 * `tools.shell` on (real bwrap), isolated in a worktree, edits a file and then runs
 * `git status --porcelain` and `git diff` through `run_shell`; both must see the edit. The
 * command writes what git said into the worktree, so it lands on the child's branch.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import type { ContentBlock, RemoteSubagentRun } from '../client/index.js';
import { findWorkingBwrap } from '../daemon/sandbox/bwrap.js';
import { startDaemon, type DaemonProcess } from './support/daemon-process.js';
import { ClientPool } from './support/e2e-daemon.js';
import { git, makeRepo, snapshot } from './support/git-repo.js';

const daemons: DaemonProcess[] = [];
const dirs: string[] = [];
const clients = new ClientPool();

afterEach(async () => {
  await clients.closeAll();
  await Promise.all(daemons.splice(0).map((d) => d.stop()));
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

const text = (value: string): ContentBlock[] => [{ type: 'text', text: value }];

it('git status and git diff work in a worktree child sandboxed run_shell, and the main repository stays read-only there', async () => {
  // The real sandbox is required: without a working bwrap this test fails rather than skips.
  expect(await findWorkingBwrap()).toBeDefined();
  const dir = makeRepo({ 'a.txt': 'one\n' });
  dirs.push(dir);
  const before = snapshot(dir);
  const refsBefore = git(dir, 'for-each-ref');
  const scripts = mkdtempSync(join(tmpdir(), 'subagentd-wt-git-script-'));
  dirs.push(scripts);
  const command = [
    '{ git status --porcelain; echo "status-exit=$?"; git diff; echo "diff-exit=$?";',
    // Writing the main repository's refs from inside must fail: it is bound read-only.
    'git update-ref refs/heads/from-sandbox HEAD 2>/dev/null; echo "update-ref-exit=$?"; } > git-out.txt 2>&1',
  ].join(' ');
  const scriptPath = join(scripts, 'script.json');
  writeFileSync(
    scriptPath,
    JSON.stringify({
      steps: [
        { toolCalls: [{ name: 'edit_file', arguments: { path: 'a.txt', oldText: 'one', newText: 'two' } }] },
        { toolCalls: [{ name: 'run_shell', arguments: { command } }] },
        { text: 'done' },
      ],
    }),
  );
  const daemon = await startDaemon({ tools: { write: true, shell: true } }, [], { fixtures: false });
  daemons.push(daemon);
  const service = await clients.connect(daemon.socket);
  const run = (await service.start('spawn', {
    prompt: text('edit and look'),
    parent: { sessionId: 'p-git', cwd: dir },
    signal: new AbortController().signal,
    agentOptions: { model: `scripted:${scriptPath}` },
    isolation: 'worktree',
  })) as RemoteSubagentRun;
  const result = await run.result;
  expect(result.stopReason).toBe('completed');
  const branch = result.worktree!.branch;
  const out = git(dir, 'show', `${branch}:git-out.txt`);
  expect(out).toContain(' M a.txt');
  expect(out).toContain('status-exit=0');
  expect(out).toContain('-one');
  expect(out).toContain('+two');
  expect(out).toContain('diff-exit=0');
  expect(out).not.toContain('update-ref-exit=0');
  expect(out).not.toContain('not a git repository');
  await run.dispose();
  // The sandbox wrote no ref: besides the child's kept branch, the refs are as they were.
  expect(git(dir, 'for-each-ref').split('\n').filter((l) => !l.includes('refs/heads/subagentd/')).join('\n')).toBe(refsBefore);
  expect(snapshot(dir)).toEqual(before);
});
