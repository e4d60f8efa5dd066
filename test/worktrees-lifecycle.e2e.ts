/**
 * The life of isolated children's worktrees across daemon deaths and restarts, and the
 * `subagentd worktrees` command: an orphan after kill -9 is listed and pruned (the branch by the
 * cleanup rule), a continuable child answers after a restart in the same worktree, and `merge`
 * merges a clean branch and refuses a conflicting one with the parent's tree untouched. Real
 * daemon processes, the real CLI, real git.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import type { ContentBlock, RemoteChildren, RemoteSubagentRun } from '../client/index.js';
import { CLI, killAndWait, restartDaemon, startDaemon, waitFor, type DaemonProcess } from './support/daemon-process.js';
import { ClientPool } from './support/e2e-daemon.js';
import { branches, git, makeRepo, snapshot, worktreePaths } from './support/git-repo.js';

const KEY = 'worktree-owner-key-0123456789';
const daemons: DaemonProcess[] = [];
const dirs: string[] = [];
const clients = new ClientPool();

afterEach(async () => {
  await clients.closeAll();
  await Promise.all(daemons.splice(0).map((d) => d.stop()));
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
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

async function daemonWith(config: Record<string, unknown> = {}): Promise<DaemonProcess> {
  const daemon = await startDaemon({ tools: { write: true, shell: true }, ...config }, [], { fixtures: false });
  daemons.push(daemon);
  return daemon;
}

/** `subagentd worktrees ...` against the daemon's state dir and config: exit code and stdout/stderr. */
function worktreesCli(daemon: DaemonProcess, ...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [CLI, 'worktrees', ...args, '--state-dir', daemon.stateDir, '--config', daemon.configPath, '--socket', daemon.socket],
      { timeout: 30_000, env: { PATH: process.env['PATH'] ?? '', HOME: process.env['HOME'] ?? '' } },
      (error, stdout, stderr) => resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

function records(daemon: DaemonProcess): Array<{ name: string; path: string; branch: string; runIds: string[]; state: string }> {
  const dir = join(daemon.stateDir, 'worktrees', 'records');
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .filter((f) => f.endsWith('.json'))
    .map((f) => JSON.parse(readFileSync(join(dir, f), 'utf8')));
}

it('after kill -9 mid-run and a restart, `worktrees list` shows the orphan with its run and state; `prune` removes it and keeps its branch (auto, with changes)', async () => {
  const dir = repo({ 'a.txt': 'a\n' });
  const daemon = await daemonWith();
  const service = await clients.connect(daemon.socket);
  const model = script([
    { toolCalls: [{ name: 'write_file', arguments: { path: 'partial.txt', content: 'half done\n' } }] },
    { delayMs: 120_000, text: 'never reached' },
  ]);
  const run = (await service.start('spawn', {
    prompt: text('work'),
    parent: { sessionId: 'p', cwd: dir },
    signal: new AbortController().signal,
    agentOptions: { model },
    isolation: 'worktree',
    label: 'long job',
  })) as RemoteSubagentRun;
  await waitFor(() => records(daemon).some((r) => existsSync(join(r.path, 'partial.txt'))), 20_000, () => 'the child wrote partial.txt in its worktree');
  const [record] = records(daemon);
  expect(record!.runIds).toEqual([run.id]);
  await clients.closeAll();
  await killAndWait(daemon);

  const next = await restartDaemon(daemon, {});
  daemons.splice(0, 1, next);
  let listed: Array<{ runIds: string[]; state: string; present: boolean; branch: string; path: string }> = [];
  await waitFor(
    () => records(next)[0]?.state === 'orphaned',
    20_000,
    () => `the restarted daemon marked the worktree orphaned (${JSON.stringify(records(next))})`,
  );
  const list = await worktreesCli(next, 'list', '--json');
  expect(list.code).toBe(0);
  listed = JSON.parse(list.stdout);
  expect(listed).toHaveLength(1);
  expect(listed[0]).toMatchObject({ runIds: [run.id], state: 'orphaned', present: true, branch: record!.branch, path: record!.path });
  const human = await worktreesCli(next, 'list');
  expect(human.stdout).toContain(run.id);
  expect(human.stdout).toContain('orphaned');
  expect(worktreePaths(dir)).toContain(record!.path);

  const prune = await worktreesCli(next, 'prune');
  expect(prune.code).toBe(0);
  expect(prune.stdout).toContain(`branch ${record!.branch} kept`);
  expect(worktreePaths(dir)).toEqual([dir]);
  expect(existsSync(record!.path)).toBe(false);
  // The interrupted work is on the branch.
  expect(branches(dir)).toEqual([record!.branch]);
  expect(git(dir, 'show', `${record!.branch}:partial.txt`)).toBe('half done\n');
  // Its record stays for the branch (`worktrees merge` finds it), the worktree gone.
  expect(JSON.parse((await worktreesCli(next, 'list', '--json')).stdout)).toMatchObject([{ state: 'disposed', present: false, branchExists: true }]);
});

it("an orphan whose cleanup is 'always' loses its branch too at prune", async () => {
  const dir = repo({ 'a.txt': 'a\n' });
  const daemon = await daemonWith();
  const service = await clients.connect(daemon.socket);
  const model = script([{ toolCalls: [{ name: 'write_file', arguments: { path: 'x.txt', content: 'x\n' } }] }, { delayMs: 120_000, text: 'never' }]);
  await service.start('spawn', { prompt: text('w'), parent: { sessionId: 'p', cwd: dir }, signal: new AbortController().signal, agentOptions: { model }, isolation: 'worktree', cleanup: 'always' });
  await waitFor(() => records(daemon).some((r) => existsSync(join(r.path, 'x.txt'))), 20_000, () => 'the child wrote x.txt');
  await clients.closeAll();
  await killAndWait(daemon);
  const next = await restartDaemon(daemon, {});
  daemons.splice(0, 1, next);
  await waitFor(() => records(next)[0]?.state === 'orphaned', 20_000, () => 'orphan marked');
  expect((await worktreesCli(next, 'prune')).code).toBe(0);
  expect(worktreePaths(dir)).toEqual([dir]);
  expect(branches(dir)).toEqual([]);
});

it('a continuable child in a worktree answers a second message after a daemon restart, in the same worktree and on the same branch', async () => {
  const dir = repo({ 'a.txt': 'a\n' });
  const before = snapshot(dir);
  const daemon = await daemonWith();
  const parent = { sessionId: 'harness-wt', cwd: dir };
  // Each turn replays the script (a restored child starts it over): one line appended per turn.
  const model = script([{ toolCalls: [{ name: 'run_shell', arguments: { command: 'printf "turn\\n" >> turns.txt && pwd' } }] }, { text: 'appended' }]);
  const children = (await clients.connect(daemon.socket, { ownerKey: KEY })).children as RemoteChildren;
  const settled: string[] = [];
  children.onSettled((notice) => settled.push(notice.text));
  const { childId } = await children.start('spawn', { prompt: text('append'), parent, label: 'appender', signal: new AbortController().signal, agentOptions: { model }, isolation: 'worktree' });
  await waitFor(() => settled.length === 1, 20_000, () => 'first turn settled');
  const [record] = records(daemon);
  expect(record!.state).toBe('settled');
  expect(git(dir, 'show', `${record!.branch}:turns.txt`)).toBe('turn\n');

  await clients.closeAll();
  const exited = new Promise((resolve) => daemon.proc.once('exit', resolve));
  daemon.proc.kill('SIGTERM');
  await exited;
  // The orderly stop removed nothing: the child may be continued.
  expect(worktreePaths(dir)).toContain(record!.path);
  const next = await restartDaemon(daemon, {});
  daemons.splice(0, 1, next);

  const again = (await clients.connect(next.socket, { ownerKey: KEY })).children as RemoteChildren;
  const settledAgain: string[] = [];
  again.onSettled((notice) => settledAgain.push(notice.text));
  await again.sendMessage(childId, text('append again'), parent);
  await waitFor(() => settledAgain.length === 1, 20_000, () => 'second turn settled');
  expect(settledAgain[0]).toContain('appended');
  // The parent is told the branch and the diffstat in the settlement notice.
  expect(settledAgain[0]).toContain(`committed on branch ${record!.branch}`);
  const after = records(next);
  expect(after).toHaveLength(1);
  expect(after[0]!.path).toBe(record!.path);
  expect(after[0]!.runIds).toHaveLength(2);
  expect(git(dir, 'show', `${record!.branch}:turns.txt`)).toBe('turn\nturn\n');
  expect(git(dir, 'rev-list', '--count', `main..${record!.branch}`).trim()).toBe('2');
  expect(snapshot(dir)).toEqual(before);
});

it('`worktrees merge` merges a clean branch into the parent branch and refuses a conflicting one, listing the files, the parent untouched', async () => {
  const dir = repo({ 'a.txt': 'one\ntwo\nthree\n', 'b.txt': 'b\n' });
  const daemon = await daemonWith({ detachGraceMs: 0 });
  const service = await clients.connect(daemon.socket);
  const start = async (model: string, label: string): Promise<RemoteSubagentRun> => {
    const run = (await service.start('spawn', { prompt: text('edit'), parent: { sessionId: 'p', cwd: dir }, signal: new AbortController().signal, agentOptions: { model }, isolation: 'worktree', label })) as RemoteSubagentRun;
    await run.result;
    await run.dispose();
    return run;
  };
  const edit = (path: string, oldText: string, newText: string): string => script([{ toolCalls: [{ name: 'edit_file', arguments: { path, oldText, newText } }] }, { text: 'ok' }]);
  const clean = await start(edit('b.txt', 'b', 'b merged'), 'clean');
  const first = await start(edit('a.txt', 'two', 'TWO from first'), 'first');
  const second = await start(edit('a.txt', 'two', 'two from second'), 'second');

  const merged = await worktreesCli(daemon, 'merge', clean.id);
  expect(merged.code).toBe(0);
  expect(readFileSync(join(dir, 'b.txt'), 'utf8')).toBe('b merged\n');
  expect((await worktreesCli(daemon, 'merge', first.id)).code).toBe(0);
  expect(readFileSync(join(dir, 'a.txt'), 'utf8')).toBe('one\nTWO from first\nthree\n');
  const head = git(dir, 'rev-parse', 'HEAD');
  const before = snapshot(dir);

  const refused = await worktreesCli(daemon, 'merge', second.id, '--json');
  expect(refused.code).toBe(1);
  expect(JSON.parse(refused.stdout)).toMatchObject({ merged: false, conflicts: ['a.txt'] });
  const human = await worktreesCli(daemon, 'merge', second.id);
  expect(human.code).toBe(1);
  expect(human.stderr).toContain('a.txt');
  expect(snapshot(dir)).toEqual(before);
  expect(git(dir, 'rev-parse', 'HEAD')).toBe(head);
  expect(git(dir, 'status', '--porcelain')).toBe('');
  expect(existsSync(join(dir, '.git', 'MERGE_HEAD'))).toBe(false);
});
