/**
 * Worktree isolation through the real client and a real daemon process, on real git
 * repositories: each isolated child works in its own `git worktree` on its own branch, the
 * parent's tree is never touched, and dispose cleans up by the rule. The children run the
 * scripted model (one script per child, so each makes its own edit).
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { ContentBlock, RemoteSubagentRun, RemoteSubagentService, SubagentResult } from '../client/index.js';
import { type DaemonProcess } from './support/daemon-process.js';
import { ClientPool, RunPool, startE2eDaemon } from './support/e2e-daemon.js';
import { rejection } from './support/assertions.js';
import { branches, git, makeRepo, snapshot, worktreePaths } from './support/git-repo.js';

let daemon: DaemonProcess;
let scriptsDir: string;
const repos: string[] = [];
const clients = new ClientPool();
const runs = new RunPool();

beforeAll(async () => {
  daemon = await startE2eDaemon({ tools: { write: true }, detachGraceMs: 0 });
  scriptsDir = mkdtempSync(join(tmpdir(), 'subagentd-wt-scripts-'));
});

afterEach(async () => {
  await runs.disposeAll();
  await clients.closeAll();
});

afterAll(async () => {
  await daemon?.stop();
  for (const dir of [scriptsDir, ...repos]) if (dir) rmSync(dir, { recursive: true, force: true });
});

const text = (value: string): ContentBlock[] => [{ type: 'text', text: value }];
let scriptCount = 0;
function scripted(steps: unknown[]): string {
  const path = join(scriptsDir, `script-${++scriptCount}.json`);
  writeFileSync(path, JSON.stringify({ steps }));
  return `scripted:${path}`;
}
const editScript = (path: string, oldText: string, newText: string): string =>
  scripted([{ toolCalls: [{ name: 'edit_file', arguments: { path, oldText, newText } }] }, { text: `edited ${path}` }]);

function repo(files: Record<string, string>): string {
  const dir = makeRepo(files);
  repos.push(dir);
  return dir;
}

async function start(service: RemoteSubagentService, cwd: string, model: string, extra: Record<string, unknown> = {}): Promise<RemoteSubagentRun> {
  const run = await service.start('spawn', {
    prompt: text('edit'),
    parent: { sessionId: 'parent-wt', cwd },
    signal: new AbortController().signal,
    agentOptions: { model },
    isolation: 'worktree',
    ...extra,
  });
  return runs.track(run as RemoteSubagentRun);
}

describe('isolation: worktree', () => {
  it('8 concurrent children editing one file end on 8 branches, each with exactly its own change; the parent tree is untouched; dispose leaves no worktree', async () => {
    const dir = repo({ 'shared.txt': 'line: original\n', 'other.txt': 'keep\n' });
    const before = snapshot(dir);
    const service = await clients.connect(daemon.socket);
    const started = await Promise.all(
      Array.from({ length: 8 }, (_, i) => start(service, dir, editScript('shared.txt', 'line: original', `line: child-${i}`), { label: `Edit number ${i}` })),
    );
    const results: SubagentResult[] = await Promise.all(started.map((run) => run.result));
    const seen = new Set<string>();
    results.forEach((result, i) => {
      expect(result.stopReason).toBe('completed');
      const worktree = result.worktree!;
      expect(worktree.branch).toMatch(new RegExp(`^subagentd/edit-number-${i}-`));
      expect(worktree.baseRef).toBe('HEAD');
      expect(worktree.baseCommit).toBe(git(dir, 'rev-parse', 'HEAD').trim());
      expect(worktree.changed).toEqual({ files: 1, insertions: 1, deletions: 1 });
      expect(worktree.committed).toBe(true);
      expect(worktree.parentUncommitted).toBeUndefined();
      // The branch holds exactly this child's edit, committed with a message naming run and label.
      expect(git(dir, 'show', `${worktree.branch}:shared.txt`)).toBe(`line: child-${i}\n`);
      expect(git(dir, 'diff', '--name-only', worktree.baseCommit, worktree.branch).trim()).toBe('shared.txt');
      expect(git(dir, 'log', '-1', '--format=%s', worktree.branch)).toContain(started[i]!.id);
      expect(git(dir, 'log', '-1', '--format=%s', worktree.branch)).toContain(`Edit number ${i}`);
      expect(git(dir, 'rev-parse', worktree.branch).trim()).toBe(worktree.headCommit);
      seen.add(worktree.path);
    });
    expect(seen.size).toBe(8);
    expect(worktreePaths(dir)).toHaveLength(9);
    expect(snapshot(dir)).toEqual(before);
    expect(git(dir, 'status', '--porcelain')).toBe('');

    await Promise.all(started.map((run) => run.dispose()));
    // Changes: the worktree goes, the branch stays (cleanup `auto`).
    expect(worktreePaths(dir)).toEqual([dir]);
    expect(branches(dir)).toHaveLength(8);
    expect(snapshot(dir)).toEqual(before);
  });

  it('maps the parent cwd to the same place in the worktree, and a child that changed nothing leaves neither worktree nor branch', async () => {
    const dir = repo({ 'top.txt': 'top\n' });
    mkdirSync(join(dir, 'pkg'));
    writeFileSync(join(dir, 'pkg', 'inner.txt'), 'inner v1\n');
    git(dir, 'add', '-A');
    git(dir, 'commit', '-q', '-m', 'pkg');
    const service = await clients.connect(daemon.socket);
    const editing = await start(service, join(dir, 'pkg'), editScript('inner.txt', 'inner v1', 'inner v2'));
    const edited = (await editing.result).worktree!;
    expect(git(dir, 'show', `${edited.branch}:pkg/inner.txt`)).toBe('inner v2\n');
    expect(readFileSync(join(dir, 'pkg', 'inner.txt'), 'utf8')).toBe('inner v1\n');

    const idle = await start(service, dir, scripted([{ text: 'nothing to do' }]));
    const untouched = (await idle.result).worktree!;
    expect(untouched.changed).toEqual({ files: 0, insertions: 0, deletions: 0 });
    expect(untouched.headCommit).toBe(untouched.baseCommit);
    expect(worktreePaths(dir)).toContain(untouched.path);
    await idle.dispose();
    expect(worktreePaths(dir)).not.toContain(untouched.path);
    expect(branches(dir)).not.toContain(untouched.branch);
  });

  it('refuses a cwd outside any repository (naming it) and an unknown baseRef, before anything starts', async () => {
    const plain = mkdtempSync(join(tmpdir(), 'subagentd-not-a-repo-'));
    repos.push(plain);
    const service = await clients.connect(daemon.socket);
    const outside = await rejection(start(service, plain, scripted([{ text: 'x' }])));
    expect(outside).toMatchObject({ code: 'INVALID_REQUEST' });
    expect((outside as Error).message).toContain(plain);
    const dir = repo({ 'a.txt': 'a\n' });
    const badRef = await rejection(start(service, dir, scripted([{ text: 'x' }]), { baseRef: 'no-such-branch' }));
    expect(badRef).toMatchObject({ code: 'INVALID_REQUEST' });
    expect((badRef as Error).message).toContain('no-such-branch');
    expect(worktreePaths(dir)).toEqual([dir]);
    expect(branches(dir)).toEqual([]);
  });

  it('starts at baseRef; leaves the parent uncommitted changes out (and says so) unless includeUncommitted', async () => {
    const dir = repo({ 'a.txt': 'a1\n' });
    git(dir, 'branch', 'older');
    writeFileSync(join(dir, 'a.txt'), 'a2\n');
    git(dir, 'commit', '-q', '-am', 'a2');
    writeFileSync(join(dir, 'a.txt'), 'a3 uncommitted\n');
    writeFileSync(join(dir, 'new.txt'), 'untracked\n');
    const before = snapshot(dir);
    const service = await clients.connect(daemon.socket);

    const fromOlder = await start(service, dir, scripted([{ toolCalls: [{ name: 'read_file', arguments: { path: 'a.txt' } }] }, { text: 'read' }]), { baseRef: 'older' });
    const older = (await fromOlder.result).worktree!;
    expect(older.baseRef).toBe('older');
    expect(older.baseCommit).toBe(git(dir, 'rev-parse', 'older').trim());
    expect(older.parentUncommitted).toBe('left');

    const leaving = await start(service, dir, editScript('a.txt', 'a2', 'a2 by child'));
    const left = (await leaving.result).worktree!;
    expect(left.parentUncommitted).toBe('left');
    expect(git(dir, 'show', `${left.branch}:a.txt`)).toBe('a2 by child\n');

    const carrying = await start(service, dir, editScript('a.txt', 'a3 uncommitted', 'a3 by child'), { includeUncommitted: true });
    const carried = (await carrying.result).worktree!;
    expect(carried.parentUncommitted).toBe('carried');
    expect(git(dir, 'show', `${carried.branch}:a.txt`)).toBe('a3 by child\n');
    expect(git(dir, 'show', `${carried.branch}:new.txt`)).toBe('untracked\n');
    // The child's own change is counted from the carried state, not from HEAD.
    expect(carried.changed.files).toBe(1);
    expect(snapshot(dir)).toEqual(before);
  });
});
