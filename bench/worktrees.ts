/**
 * Worktree isolation's own cost: making a child's worktree of a 10,000-file repository (the
 * daemon's whole preparation: locate the repository, resolve the base, check the branch name,
 * look for uncommitted changes, `git worktree add`) against `git worktree add` alone on the same
 * repository, in alternating pairs; and finishing a turn that changed one file (stage, commit,
 * numstat, head) against `git add -A && git commit` alone. Removal is not timed.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { WorktreeManager } from '../daemon/worktrees/worktree-manager.js';
import type { Cleanup } from './procs.js';
import type { Report } from './report.js';
import { ms, ratio, ratios, spreadOf, spreadText, summarize } from './stats.js';
import { Table } from './table.js';

export interface WorktreesBenchOptions {
  readonly files: number;
  readonly pairs: number;
}

const GIT_ENV = { ...process.env, GIT_AUTHOR_NAME: 'bench', GIT_AUTHOR_EMAIL: 'bench@localhost', GIT_COMMITTER_NAME: 'bench', GIT_COMMITTER_EMAIL: 'bench@localhost' };
const git = (cwd: string, ...args: string[]): string => execFileSync('git', args, { cwd, env: GIT_ENV, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });

function makeRepo(dir: string, files: number): void {
  git(dir, 'init', '-q', '-b', 'main');
  const perDir = 100;
  for (let i = 0; i < files; i += 1) {
    const sub = join(dir, `d${Math.floor(i / perDir)}`);
    if (i % perDir === 0) mkdirSync(sub);
    writeFileSync(join(sub, `f${i}.txt`), `file ${i}\n`);
  }
  git(dir, 'add', '-A');
  git(dir, 'commit', '-q', '-m', 'initial');
}

const timed = async (task: () => unknown): Promise<number> => {
  const t0 = performance.now();
  await task();
  return performance.now() - t0;
};

export async function worktreesBench(report: Report, cleanup: Cleanup, options: WorktreesBenchOptions): Promise<void> {
  report.section(
    'Worktree isolation',
    `A child's worktree of a ${options.files.toLocaleString('en')}-file repository, made by the daemon's worktree manager (locate, resolve the base, check the branch name, look for uncommitted changes, git worktree add), against git worktree add alone; and the end of a turn that changed one file (stage, commit, numstat) against git add -A && git commit alone. ${options.pairs} alternating pairs each; removal untimed.`,
  );
  const repo = cleanup.tempDir('subagentd-bench-wt-repo-');
  const state = cleanup.tempDir('subagentd-bench-wt-state-');
  const plain = cleanup.tempDir('subagentd-bench-wt-plain-');
  makeRepo(repo, options.files);
  cleanup.defer('prune the bench worktrees', () => git(repo, 'worktree', 'prune'));
  const manager = new WorktreeManager({ stateWorktrees: state });
  const create = { ours: [] as number[], git: [] as number[] };
  const finish = { ours: [] as number[], git: [] as number[] };
  for (let i = 0; i < options.pairs; i += 1) {
    const runId = `run_bench${String(i).padStart(4, '0')}xxxxxxxxxxxxxx`;
    let record: Awaited<ReturnType<WorktreeManager['create']>> | undefined;
    const path = join(plain, `plain-${i}`);
    const oursFirst = i % 2 === 0;
    const ours = async (): Promise<void> => {
      create.ours.push(await timed(async () => (record = await manager.create({ runId, provider: 'spawn', label: `bench ${i}`, parentCwd: repo }))));
    };
    const alone = async (): Promise<void> => {
      create.git.push(await timed(() => git(repo, 'worktree', 'add', '--quiet', '-b', `plain/${i}`, path, 'HEAD')));
    };
    if (oursFirst) {
      await ours();
      await alone();
    } else {
      await alone();
      await ours();
    }
    writeFileSync(join(record!.path, 'd0', 'f0.txt'), `changed by ${i}\n`);
    writeFileSync(join(path, 'd0', 'f0.txt'), `changed by ${i}\n`);
    finish.ours.push(await timed(() => manager.finishTurn(record!.name, runId, `bench ${i}`)));
    finish.git.push(await timed(() => (git(path, 'add', '-A'), git(path, 'commit', '-q', '-m', 'bench'))));
    await manager.discard(record!);
    git(repo, 'worktree', 'remove', '--force', path);
    git(repo, 'branch', '-D', `plain/${i}`);
  }
  const table = new Table(`Per worktree, ${options.files.toLocaleString('en')} files, ${options.pairs} pairs`, ['step', 'subagentd p50', 'git alone p50', 'ratio (median of pairs)']);
  for (const [step, samples] of [
    ['create the worktree', create],
    ['finish a turn (1 file changed)', finish],
  ] as const) {
    const spread = spreadOf(ratios(samples.ours, samples.git));
    table.row(step, ms(summarize(samples.ours).p50), ms(summarize(samples.git).p50), spreadText(spread, ratio));
  }
  table.note('The daemon adds a few git processes (rev-parse, check-ref-format, status) to git worktree add; git worktree add itself checks out every file.');
  report.table(table);
}
