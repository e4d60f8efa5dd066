/**
 * Runs execute only where their workspace is: real daemons (the built CLI) on a real nats-server,
 * each executing member inside bubblewrap with its own filesystem view, a different directory
 * bound at the same path (as on separate machines), real git repositories.
 *
 * The front (no slots) sees the parent's repository `alpha` at commit C2 at path P. Member A's P
 * is a clone of alpha at C2; B's P is another repository (`beta`); C's P is a clone of alpha that
 * has only C1. Runs started with cwd P execute on A only; a cwd that no member serves is refused
 * WORKSPACE_UNAVAILABLE naming it; once A is gone, a start at P is refused too (B and C are up and
 * idle), and a continuable run resumed then goes to A2 (another clone at C2), not to B or C.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import type { RemoteSubagentRun } from '../client/index.js';
import { rejection } from './support/assertions.js';
import { clusterScene } from './support/cluster-scene.js';
import { killAndWait, type DaemonProcess } from './support/daemon-process.js';

const scene = clusterScene('subagentd-cluster-ws-');
const { clients, records } = scene;
const text = (value: string) => [{ type: 'text' as const, text: value }];
const ALPHA = 'https://example.invalid/alpha.git';
const BETA = 'https://example.invalid/beta.git';
const WAIT_MS = 1500;

function git(cwd: string, ...args: string[]): string {
  const env = { ...process.env, GIT_AUTHOR_NAME: 't', GIT_AUTHOR_EMAIL: 't@example.invalid', GIT_COMMITTER_NAME: 't', GIT_COMMITTER_EMAIL: 't@example.invalid' };
  return execFileSync('git', ['-C', cwd, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] }).toString().trim();
}

function commit(repo: string, file: string): string {
  writeFileSync(join(repo, file), `${file}\n`);
  git(repo, 'add', file);
  git(repo, 'commit', '-q', '-m', file);
  return git(repo, 'rev-parse', 'HEAD');
}

function newRepo(path: string, origin: string): void {
  mkdirSync(path, { recursive: true });
  git(path, 'init', '-q');
  git(path, 'remote', 'add', 'origin', origin);
}

function cloneOf(source: string, path: string): string {
  execFileSync('git', ['clone', '-q', source, path], { stdio: 'ignore' });
  git(path, 'remote', 'set-url', 'origin', ALPHA);
  return path;
}

/** The repositories: P (the front's view), and what each member sees at P. */
function world() {
  const dir = scene.dir();
  const root = join(dir, 'view');
  const p = join(root, 'proj');
  newRepo(p, ALPHA);
  commit(p, 'one');
  const stale = cloneOf(p, join(dir, 'stale')); // has C1 only
  const head = commit(p, 'two');
  const good = cloneOf(p, join(dir, 'good'));
  const good2 = cloneOf(p, join(dir, 'good2'));
  const other = join(dir, 'other');
  newRepo(other, BETA);
  commit(other, 'one');
  const elsewhere = join(dir, 'elsewhere');
  newRepo(elsewhere, ALPHA);
  return { root, p, head, stale, good, good2, other, elsewhere };
}

/** An executing member whose view of `at` is `source` (bwrap binds it there), serving `root` only. */
function member(model: string, root: string, at: string, source: string): Promise<DaemonProcess> {
  return scene.member(
    { model: { default: model }, limits: { maxConcurrentRuns: 2 } },
    { ackWaitMs: 2000, workspaces: [root], workspaceWaitMs: WAIT_MS },
    { wrap: ['bwrap', '--dev-bind', '/', '/', '--bind', source, at, '--die-with-parent', '--'] },
  );
}

async function memberId(daemon: DaemonProcess): Promise<string> {
  const status = await (await clients.connect(daemon.socket)).ops.status();
  return status.worker!.id;
}

it('runs execute only on the member whose view holds the parent\'s repository at its commit; a cwd no member serves is refused, typed', async () => {
  const w = world();
  const model = scene.scriptedModel(50);
  const front = await scene.member({ model: { default: model } }, { ackWaitMs: 2000, slots: 0, workspaceWaitMs: WAIT_MS });
  const a = await member(model, w.root, w.p, w.good);
  const b = await member(model, w.root, w.p, w.other);
  const c = await member(model, w.root, w.p, w.stale);
  const [idA, idB, idC] = [await memberId(a), await memberId(b), await memberId(c)];
  // status names each member's workspaces: the roots it serves.
  expect((await (await clients.connect(b.socket)).ops.status()).worker).toMatchObject({ id: idB, workspaces: [w.root] });
  const store = await records();
  const service = await clients.connect(front.socket);

  // Six runs from three clients at once: A executes them two at a time while B and C, idle, get
  // tickets and give them back (same path, a different repository; the right one without C2).
  const runs = await Promise.all(
    Array.from({ length: 6 }, (_, i) => service.start('spawn', { prompt: text(`task ${i}`), parent: { sessionId: `ws-${i % 3}`, cwd: w.p }, signal: AbortSignal.timeout(60_000) })),
  );
  for (const run of runs) expect(await run.result).toMatchObject({ stopReason: 'completed' });
  const workers = runs.map((run) => store.seen(run.id)!.record.worker!.id);
  expect(workers).toEqual(runs.map(() => idA));
  expect(store.seen(runs[0]!.id)!.record.workspace).toEqual({ cwd: w.p, root: w.p, head: w.head, origin: ALPHA });
  // run info names the executing member and its workspaces.
  expect((await service.ops.inspect(runs[0]!.id)).run.worker).toMatchObject({ id: idA, workspaces: [w.root] });
  expect([...store.all()].map(({ record }) => record.worker?.id).filter((id) => id === idB || id === idC)).toEqual([]);

  // A cwd outside every member's workspaces (it exists on all of them): refused, naming it.
  const refused = await rejection(service.start('spawn', { prompt: text('nowhere'), parent: { sessionId: 'ws-x', cwd: w.elsewhere }, signal: AbortSignal.timeout(30_000) }));
  expect(refused.code).toBe('WORKSPACE_UNAVAILABLE');
  expect(refused.message).toContain(`cwd ${w.elsewhere}`);
  await Promise.all(runs.map((run) => run.dispose()));
}, 90_000);

it('with the only member that serves P gone, a start at P is refused although B and C are idle; a continuable run resumed goes to a member that serves it', async () => {
  const w = world();
  const model = scene.scriptedModel(50);
  const front = await scene.member({ model: { default: model } }, { ackWaitMs: 2000, slots: 0, workspaceWaitMs: WAIT_MS });
  const a = await member(model, w.root, w.p, w.good);
  const b = await member(model, w.root, w.p, w.other);
  const c = await member(model, w.root, w.p, w.stale);
  const [idA, idB, idC] = [await memberId(a), await memberId(b), await memberId(c)];
  const store = await records();
  const service = await clients.connect(front.socket);
  const parent = { sessionId: 'ws-resume', cwd: w.p };

  const run = (await service.start('spawn', { prompt: text('first turn'), parent, signal: AbortSignal.timeout(60_000) })) as RemoteSubagentRun;
  expect(await run.result).toMatchObject({ stopReason: 'completed' });
  expect(store.seen(run.id)!.record.worker!.id).toBe(idA);
  await killAndWait(a);

  const refused = await rejection(service.start('spawn', { prompt: text('no one'), parent, signal: AbortSignal.timeout(30_000) }));
  expect(refused.code).toBe('WORKSPACE_UNAVAILABLE');
  expect(refused.message).toContain(`cwd ${w.p} (git repository ${w.p} at commit ${w.head.slice(0, 12)}`);

  const a2 = await member(model, w.root, w.p, w.good2);
  const idA2 = await memberId(a2);
  const next = (await run.resume!(text('second turn'))) as RemoteSubagentRun;
  expect(await next.result).toMatchObject({ stopReason: 'completed' });
  const record = (await store.get(next.id))!.record;
  expect(record).toMatchObject({ resumes: { runId: run.id }, workspace: { cwd: w.p, head: w.head } });
  expect(record.worker!.id).toBe(idA2);
  expect([idB, idC]).not.toContain(record.worker!.id);
  await next.dispose();
}, 90_000);
