/**
 * daemon/cluster/git-head.ts against a real git repository: HEAD's commit from the files as git
 * itself names it, through a new commit (the ref file replaced), `git pack-refs` (no loose ref
 * left), a detached HEAD, a linked worktree (its own HEAD, the refs in the common dir) and an
 * unborn branch; within one turn of the event loop the answer read first is kept.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { headFromFiles } from '../daemon/cluster/git-head.js';

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function repo(): { dir: string; git: (...args: string[]) => string } {
  const dir = mkdtempSync(join(tmpdir(), 'subagentd-git-head-'));
  dirs.push(dir);
  const git = (...args: string[]): string =>
    execFileSync('git', ['-C', dir, '-c', 'user.name=t', '-c', 'user.email=t@t', '-c', 'commit.gpgsign=false', ...args], { encoding: 'utf8' }).trim();
  git('init', '-q', '-b', 'main');
  return { dir, git };
}

const dirsOf = (dir: string) => ({ gitDir: join(dir, '.git'), commonDir: join(dir, '.git') });

/** HEAD from the files in a later turn of the event loop (within one turn the answer is kept). */
async function headOf(dirs: { gitDir: string; commonDir: string }): Promise<string | undefined | null> {
  await new Promise((resolve) => setImmediate(resolve));
  return headFromFiles(dirs);
}

describe('HEAD from the files', () => {
  it('follows new commits, packed refs and a detached HEAD as git names them', async () => {
    const { dir, git } = repo();
    expect(await headOf(dirsOf(dir))).toBeUndefined(); // unborn: no commit yet
    git('commit', '-q', '--allow-empty', '-m', 'one');
    expect(await headOf(dirsOf(dir))).toBe(git('rev-parse', 'HEAD'));
    const one = git('rev-parse', 'HEAD');
    git('commit', '-q', '--allow-empty', '-m', 'two');
    const two = git('rev-parse', 'HEAD');
    expect(two).not.toBe(one);
    expect(headFromFiles(dirsOf(dir))).toBe(one); // the same turn as the read before: kept
    expect(await headOf(dirsOf(dir))).toBe(two); // the ref file was replaced: read again
    git('pack-refs', '--all', '--prune');
    expect(await headOf(dirsOf(dir))).toBe(two); // no loose ref: packed-refs
    git('commit', '-q', '--allow-empty', '-m', 'three');
    expect(await headOf(dirsOf(dir))).toBe(git('rev-parse', 'HEAD')); // a loose ref again, over the packed one
    git('checkout', '-q', '--detach', one);
    expect(await headOf(dirsOf(dir))).toBe(one);
  });

  it('reads a linked worktree: its own HEAD, its branch in the common dir', async () => {
    const { dir, git } = repo();
    git('commit', '-q', '--allow-empty', '-m', 'one');
    const tree = join(dir, '..', `${dir.split('/').pop()}-tree`);
    dirs.push(tree);
    git('worktree', 'add', '-q', '-b', 'side', tree);
    execFileSync('git', ['-C', tree, '-c', 'user.name=t', '-c', 'user.email=t@t', '-c', 'commit.gpgsign=false', 'commit', '-q', '--allow-empty', '-m', 'side']);
    const side = git('rev-parse', 'side');
    const gitDir = git('-C', tree, 'rev-parse', '--absolute-git-dir');
    expect(await headOf({ gitDir, commonDir: join(dir, '.git') })).toBe(side);
    expect(await headOf(dirsOf(dir))).toBe(git('rev-parse', 'main'));
  });
});
