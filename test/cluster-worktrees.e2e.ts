/**
 * Worktree starts in a cluster: the worktree is made on the member that executes the run, from
 * that member's checkout, on its own disk. Real daemons (the built CLI) on a real nats-server,
 * real git, executing members inside bubblewrap with their own filesystem views: a different
 * checkout bound at the parent's path P, and a disk of their own bound at the worktrees folder W
 * (config `worktrees.dir`, the same path on every member).
 *
 * Member A (the front) executes runs too, but serves no workspace holding P; member B's P is a
 * clone of the parent's repository at its commit. A worktree start through A runs on B: the
 * worktree and its branch are in B's clone, its files on B's disk (A's W stays empty), the
 * result names it, B's `subagentd worktrees list` lists it, a resume goes back to B in the same
 * tree, and dispose cleans up by the rule. When the member holding a running worktree child
 * dies, another member serving P does not take it over into another tree: the run ends `error`
 * saying why, and the worktree, on the dead member's disk, is orphaned at its next start and
 * pruned as in single mode.
 */
import { execFile, execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { expect, it } from 'vitest';
import type { RemoteSubagentRun, SubagentResult } from '../client/index.js';
import { rejection } from './support/assertions.js';
import { clusterScene } from './support/cluster-scene.js';
import { CLI, killAndWait, waitFor, type DaemonProcess } from './support/daemon-process.js';
import { branches, git, worktreePaths } from './support/git-repo.js';

const scene = clusterScene('subagentd-cluster-wt-');
const { clients, records } = scene;
const text = (value: string) => [{ type: 'text' as const, text: value }];
const ORIGIN = 'https://example.invalid/alpha.git';
const WAIT_MS = 1500;

/** The parent's repository at P, clones of it (members' views of P), and the worktrees folder W. */
function world() {
  const dir = scene.dir();
  const root = join(dir, 'view');
  const p = join(root, 'proj');
  mkdirSync(p, { recursive: true });
  git(p, 'init', '-q', '-b', 'main');
  git(p, 'remote', 'add', 'origin', ORIGIN);
  writeFileSync(join(p, 'notes.txt'), 'original\n');
  git(p, 'add', '-A');
  git(p, '-c', 'user.name=t', '-c', 'user.email=t@example.invalid', 'commit', '-q', '-m', 'initial');
  const clone = (name: string): string => {
    const path = join(dir, name);
    execFileSync('git', ['clone', '-q', p, path], { stdio: 'ignore' });
    git(path, 'remote', 'set-url', 'origin', ORIGIN);
    return path;
  };
  const w = join(dir, 'worktrees');
  const disk = (name: string): string => {
    const path = join(dir, name);
    mkdirSync(path);
    return path;
  };
  const nowhere = join(dir, 'nowhere');
  mkdirSync(w);
  mkdirSync(nowhere);
  return { dir, root, p, w, nowhere, clone, disk };
}

let scripts = 0;
function script(steps: unknown[]): string {
  const path = join(scene.dir(), `script-${++scripts}.json`);
  writeFileSync(path, JSON.stringify({ steps }));
  return `scripted:${path}`;
}

const memberConfig = (w: string) => ({ tools: { write: true }, worktrees: { dir: w }, limits: { maxConcurrentRuns: 4 } });

/** bwrap binding `checkout` at P and `disk` at W: this member's own view, as on its own machine. */
const view = (p: string, checkout: string, w: string, disk: string): string[] => ['bwrap', '--dev-bind', '/', '/', '--bind', checkout, p, '--bind', disk, w, '--die-with-parent', '--'];

/** `ackWaitMs`: the lease; the test of a member's death keeps it longer, so that only the kill (not a loaded machine) ends it. */
function member(at: ReturnType<typeof world>, checkout: string, disk: string, ackWaitMs = 2000): Promise<DaemonProcess> {
  return scene.member(memberConfig(at.w), { ackWaitMs, workspaces: [at.root], workspaceWaitMs: WAIT_MS }, { wrap: view(at.p, checkout, at.w, disk) });
}

/** `subagentd worktrees ACTION --json` over `daemon`'s state dir, in the filesystem view `wrap` (none: the host's). */
function worktreesCli(daemon: DaemonProcess, wrap: string[], action: string): Promise<unknown> {
  const [file, ...args] = [...wrap, process.execPath, CLI, 'worktrees', action, '--json', '--state-dir', daemon.stateDir, '--config', daemon.configPath];
  return new Promise((resolve, reject) => {
    execFile(file!, args, { timeout: 30_000, env: { PATH: process.env['PATH'] ?? '', HOME: process.env['HOME'] ?? '' } }, (error, stdout, stderr) =>
      error ? reject(new Error(`worktrees ${action}: ${stderr}`)) : resolve(JSON.parse(stdout)),
    );
  });
}

async function memberId(daemon: DaemonProcess): Promise<string> {
  return (await (await clients.connect(daemon.socket)).ops.status()).worker!.id;
}

it('a worktree start through A whose cwd only B serves gets its worktree on B\'s disk, from B\'s clone; two at once never share a tree; listed on B, resumed on B in the same tree, cleaned at dispose', async () => {
  const w = world();
  const checkoutB = w.clone('b-checkout');
  const diskB = w.disk('b-disk');
  const a = await scene.member(memberConfig(w.w), { ackWaitMs: 2000, workspaces: [w.nowhere], workspaceWaitMs: WAIT_MS });
  const b = await member(w, checkoutB, diskB);
  const idB = await memberId(b);
  const store = await records();
  const service = await clients.connect(a.socket);
  const inB = view(w.p, checkoutB, w.w, diskB);

  // Two children at once, each writing the same file its own way; the first is continued later.
  const models = [0, 1].map((i) =>
    script([
      { toolCalls: [{ name: 'write_file', arguments: { path: 'notes.txt', content: `child ${i}\n` } }] },
      { text: `wrote notes ${i}` },
      { toolCalls: [{ name: 'write_file', arguments: { path: 'second.txt', content: `turn two of ${i}\n` } }] },
      { text: 'second turn done' },
    ]),
  );
  const runs = (await Promise.all(
    models.map((model, i) =>
      service.start('spawn', {
        prompt: text(`edit ${i}`),
        parent: { sessionId: `wt-${i}`, cwd: w.p },
        agentOptions: { model },
        isolation: 'worktree',
        label: `Cluster edit ${i}`,
        signal: AbortSignal.timeout(60_000),
      }),
    ),
  )) as RemoteSubagentRun[];
  const results: SubagentResult[] = await Promise.all(runs.map((run) => run.result));
  const names: string[] = [];
  results.forEach((result, i) => {
    expect(result.stopReason).toBe('completed');
    const worktree = result.worktree!;
    expect(worktree.branch).toMatch(new RegExp(`^subagentd/cluster-edit-${i}-`));
    expect(worktree.path.startsWith(`${w.w}/`)).toBe(true);
    expect(worktree.changed).toEqual({ files: 1, insertions: 1, deletions: 1 });
    expect(store.seen(runs[i]!.id)!.record.worker!.id).toBe(idB);
    // On B's disk, in B's clone: the child's file, its branch with the commit naming the run.
    const name = basename(worktree.path);
    names.push(name);
    expect(readFileSync(join(diskB, name, 'notes.txt'), 'utf8')).toBe(`child ${i}\n`);
    expect(git(checkoutB, 'show', `${worktree.branch}:notes.txt`)).toBe(`child ${i}\n`);
    expect(git(checkoutB, 'log', '-1', '--format=%s', worktree.branch)).toContain(runs[i]!.id);
  });
  expect(new Set(results.map((r) => r.worktree!.path)).size).toBe(2);
  // Not on A's: A's W is empty, and the parent's repository (A's view of P) has no branch or worktree.
  expect(readdirSync(w.w)).toEqual([]);
  expect(branches(w.p)).toEqual([]);
  expect(worktreePaths(w.p)).toEqual([w.p]);
  expect(readFileSync(join(w.p, 'notes.txt'), 'utf8')).toBe('original\n');

  // `subagentd worktrees list` on B's machine lists both (git there sees them); on A's, nothing.
  const listed = (await worktreesCli(b, inB, 'list')) as Array<{ path: string; state: string; present: boolean; runIds: string[]; member?: string }>;
  expect(listed.map((l) => [l.path, l.state, l.present, l.member]).sort()).toEqual(results.map((r) => [r.worktree!.path, 'settled', true, idB]).sort());
  expect(await worktreesCli(a, [], 'list')).toEqual([]);

  // The first child continues on B, in its own tree.
  const next = (await runs[0]!.resume!(text('again'))) as RemoteSubagentRun;
  const again = await next.result;
  expect(again).toMatchObject({ stopReason: 'completed', worktree: { path: results[0]!.worktree!.path, branch: results[0]!.worktree!.branch } });
  expect(store.seen(next.id)!.record.worker!.id).toBe(idB);
  expect(readFileSync(join(diskB, names[0]!, 'second.txt'), 'utf8')).toBe('turn two of 0\n');
  expect(git(checkoutB, 'log', '-1', '--format=%s', results[0]!.worktree!.branch)).toContain(next.id);
  expect(existsSync(join(diskB, names[1]!, 'second.txt'))).toBe(false);

  // Dispose: the worktrees go from B's disk, the branches (they hold changes) stay: cleanup `auto`.
  await Promise.all([next.dispose(), runs[0]!.dispose(), runs[1]!.dispose()]);
  await waitFor(() => readdirSync(diskB).length === 0, 15_000, () => `B's worktrees to be removed: ${readdirSync(diskB).join(', ')}`);
  expect(branches(checkoutB).sort()).toEqual(results.map((r) => r.worktree!.branch).sort());
  const after = (await worktreesCli(b, inB, 'list')) as Array<{ state: string; present: boolean; branchExists: boolean }>;
  expect(after.map((l) => [l.state, l.present, l.branchExists])).toEqual([
    ['disposed', false, true],
    ['disposed', false, true],
  ]);

  // A front that stops keeps its settled runs for its next life: B releases the child, and its worktree stays.
  const kept = await service.start('spawn', {
    prompt: text('keep me'),
    parent: { sessionId: 'wt-kept', cwd: w.p },
    agentOptions: { model: script([{ text: 'nothing to change' }]) },
    isolation: 'worktree',
    label: 'kept',
    signal: AbortSignal.timeout(60_000),
  });
  const keptTree = (await kept.result).worktree!;
  expect(existsSync(join(diskB, basename(keptTree.path)))).toBe(true);
  const exited = new Promise((resolve) => a.proc.once('exit', resolve));
  a.proc.kill('SIGTERM');
  await exited;
  const afterStop = (await worktreesCli(b, inB, 'list')) as Array<{ path: string; state: string; present: boolean }>;
  expect(afterStop.find((l) => l.path === keptTree.path)).toMatchObject({ state: 'settled', present: true });
  expect(existsSync(join(diskB, basename(keptTree.path)))).toBe(true);
}, 120_000);

it('when the member holding a running worktree child dies, another member serving P does not continue it in its own tree: the run ends error, typed; the worktree is orphaned at that member\'s restart and pruned', async () => {
  const w = world();
  const [checkout1, checkout2] = [w.clone('checkout-1'), w.clone('checkout-2')];
  const [disk1, disk2] = [w.disk('disk-1'), w.disk('disk-2')];
  const front = await scene.member(memberConfig(w.w), { ackWaitMs: 5000, slots: 0, workspaceWaitMs: WAIT_MS });
  const m1 = await member(w, checkout1, disk1, 5000);
  const m2 = await member(w, checkout2, disk2, 5000);
  const ids = new Map([[await memberId(m1), { daemon: m1, checkout: checkout1, disk: disk1 }], [await memberId(m2), { daemon: m2, checkout: checkout2, disk: disk2 }]]);
  const store = await records();
  const service = await clients.connect(front.socket);
  const model = script([{ toolCalls: [{ name: 'write_file', arguments: { path: 'half.txt', content: 'half done\n' } }] }, { delayMs: 120_000, text: 'never' }]);
  const run = await service.start('spawn', {
    prompt: text('long edit'),
    parent: { sessionId: 'wt-death', cwd: w.p },
    agentOptions: { model },
    isolation: 'worktree',
    label: 'doomed',
    signal: AbortSignal.timeout(60_000),
  });
  const holderId = (await store.get(run.id))!.record.worker!.id;
  const holder = ids.get(holderId)!;
  const survivor = [...ids.values()].find((m) => m !== holder)!;
  await waitFor(() => readdirSync(holder.disk).some((name) => existsSync(join(holder.disk, name, 'half.txt'))), 30_000, () => 'the child to write in its worktree');
  const name = readdirSync(holder.disk)[0]!;
  await killAndWait(holder.daemon);

  const result = await run.result;
  expect(result.stopReason).toBe('error');
  expect(result.diagnostic).toContain('cannot migrate');
  expect(result.diagnostic).toContain('git worktree');
  const record = (await store.get(run.id))!.record;
  expect(record.worker!.id).not.toBe(holderId); // the survivor took the ticket, and refused to run it elsewhere
  expect(readdirSync(survivor.disk)).toEqual([]);
  expect(branches(survivor.checkout)).toEqual([]);
  expect(existsSync(join(holder.disk, name, 'half.txt'))).toBe(true);
  // Nor is it continued anywhere: the chain is pinned, and no live member holds it.
  const resumed = await rejection((run as RemoteSubagentRun).resume!(text('go on')));
  expect(resumed.code).toBe('RUN_STATE');
  expect(readdirSync(survivor.disk)).toEqual([]);

  // The holder comes back (a new member id): the worktree of its previous life is orphaned, and pruned by the rule.
  const inHolder = view(w.p, holder.checkout, w.w, holder.disk);
  const back = await scene.restart(holder.daemon, { wrap: inHolder });
  // The orphaning runs as the member starts: its records show it a moment after it listens.
  let listed: Array<{ name: string; state: string; present: boolean }> = [];
  for (const deadline = Date.now() + 15_000; listed[0]?.state !== 'orphaned' && Date.now() < deadline; ) {
    listed = (await worktreesCli(back, inHolder, 'list')) as typeof listed;
    if (listed[0]?.state !== 'orphaned') await new Promise((resolve) => setTimeout(resolve, 200));
  }
  expect(listed).toMatchObject([{ name, state: 'orphaned', present: true }]);
  const pruned = (await worktreesCli(back, inHolder, 'prune')) as Array<{ name: string; branchKept: boolean }>;
  expect(pruned).toEqual([{ name, runId: run.id, branchKept: true }]);
  expect(readdirSync(holder.disk)).toEqual([]);
  expect(git(holder.checkout, 'show', `subagentd/${name}:half.txt`)).toBe('half done\n');
  await run.dispose();
}, 120_000);
