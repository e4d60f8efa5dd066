/**
 * The git recipes of worktree isolation, each one or a few git commands (git.ts runs them).
 * Operations the daemon runs on a child's behalf pass `core.hooksPath=/dev/null`: no hook of the
 * repository runs with the daemon's rights because a child started, edited or finished.
 */
import { copyFile, lstat, mkdir, readlink, symlink } from 'node:fs/promises';
import { dirname, isAbsolute, join, resolve } from 'node:path';
import { git, GitError, gitProbe } from './git.js';

const NO_HOOKS = ['-c', 'core.hooksPath=/dev/null'];
const DAEMON_IDENTITY = {
  GIT_AUTHOR_NAME: 'subagentd',
  GIT_AUTHOR_EMAIL: 'subagentd@localhost',
  GIT_COMMITTER_NAME: 'subagentd',
  GIT_COMMITTER_EMAIL: 'subagentd@localhost',
};

export interface RepoLocation {
  /** The checkout's top folder, symlinks resolved. */
  readonly root: string;
  /** Where `cwd` is inside it ('' at the top, else ending in '/'). */
  readonly prefix: string;
  /** The repository's shared git dir: worktrees of one repository share it (and its locks). */
  readonly commonDir: string;
}

export interface ChangeCount {
  readonly files: number;
  readonly insertions: number;
  readonly deletions: number;
}

/** The checkout holding `cwd`, or undefined when `cwd` is in none (or git cannot read it). */
export async function locateRepo(cwd: string): Promise<RepoLocation | undefined> {
  const out = await gitProbe(cwd, ['rev-parse', '--show-toplevel', '--show-prefix', '--git-common-dir']);
  if (out === undefined) return undefined;
  const [root, prefix, common] = out.split('\n');
  if (!root || common === undefined || common === '') return undefined;
  return { root, prefix: prefix ?? '', commonDir: isAbsolute(common) ? common : resolve(cwd, common) };
}

/** The commit `ref` names, or undefined. `--end-of-options`: a ref is never read as an option. */
export async function resolveCommit(root: string, ref: string): Promise<string | undefined> {
  const out = await gitProbe(root, ['rev-parse', '--verify', '--quiet', '--end-of-options', `${ref}^{commit}`]);
  return out?.trim() || undefined;
}

/** Whether the checkout has changes not in HEAD: staged, unstaged, or untracked (not ignored). */
export async function hasUncommitted(root: string): Promise<boolean> {
  return (await git(root, ['status', '--porcelain', '-z', '--untracked-files=normal'])).length > 0;
}

export async function isValidBranchName(root: string, branch: string): Promise<boolean> {
  return (await gitProbe(root, ['check-ref-format', '--branch', branch])) !== undefined;
}

/** `git worktree add -b BRANCH PATH COMMIT`. */
export async function addWorktree(root: string, path: string, branch: string, commit: string): Promise<void> {
  await git(root, [...NO_HOOKS, 'worktree', 'add', '--quiet', '-b', branch, path, commit]);
}

/**
 * Brings the parent's uncommitted changes into a worktree made at its HEAD: tracked changes as a
 * stash commit (made without touching the parent's tree or stash list), untracked files copied.
 * Nothing of the parent's checkout changes.
 */
export async function carryUncommitted(root: string, worktree: string): Promise<void> {
  const stash = (await git(root, ['stash', 'create'])).trim();
  if (stash !== '') await git(worktree, [...NO_HOOKS, 'stash', 'apply', '--quiet', stash]);
  const untracked = (await git(root, ['ls-files', '-z', '--others', '--exclude-standard'])).split('\0').filter((path) => path !== '');
  for (const path of untracked) {
    const from = join(root, path);
    const to = join(worktree, path);
    const info = await lstat(from).catch(() => undefined);
    if (!info) continue; // gone since it was listed
    await mkdir(dirname(to), { recursive: true });
    if (info.isSymbolicLink()) await symlink(await readlink(from), to);
    else if (info.isFile()) await copyFile(from, to);
  }
}

/** Stages everything in the worktree; commits it when asked and there is anything. Returns whether a commit was made. */
export async function stageAll(worktree: string, commitMessage: string | undefined): Promise<boolean> {
  await git(worktree, ['add', '-A']);
  if (commitMessage === undefined) return false;
  // `diff --cached --quiet` exits 1 when something is staged.
  if ((await gitProbe(worktree, ['diff', '--cached', '--quiet'])) !== undefined) return false;
  await git(worktree, [...NO_HOOKS, '-c', 'commit.gpgsign=false', 'commit', '--quiet', '--no-verify', '-m', commitMessage], { env: DAEMON_IDENTITY });
  return true;
}

/** What the index holds against `from` (after stageAll: the child's whole change), as numstat counts it. */
export async function stagedChanges(worktree: string, from: string): Promise<{ count: ChangeCount; files: string[] }> {
  const out = await git(worktree, ['diff', '--cached', '--numstat', '--no-renames', '-z', from]);
  let insertions = 0;
  let deletions = 0;
  const files: string[] = [];
  for (const entry of out.split('\0')) {
    const [added, removed, path] = entry.split('\t');
    if (path === undefined) continue;
    files.push(path);
    // Binary files count `-`: a changed file with no line counts.
    insertions += Number(added) || 0;
    deletions += Number(removed) || 0;
  }
  return { count: { files: files.length, insertions, deletions }, files };
}

export async function headOf(worktree: string): Promise<string> {
  return (await git(worktree, ['rev-parse', 'HEAD'])).trim();
}

/** Removes a worktree (with whatever is in it); a folder already gone is pruned from git's list instead. */
export async function removeWorktree(root: string, path: string): Promise<void> {
  try {
    await git(root, ['worktree', 'remove', '--force', '--force', path]);
  } catch (error) {
    if (!(error instanceof GitError)) throw error;
    await git(root, ['worktree', 'prune']);
    const listed = await listWorktreePaths(root);
    if (listed.includes(path)) throw error;
  }
}

export async function deleteBranch(root: string, branch: string): Promise<void> {
  await gitProbe(root, ['branch', '-D', branch]);
}

export async function branchCommit(root: string, branch: string): Promise<string | undefined> {
  return resolveCommit(root, `refs/heads/${branch}`);
}

/** The paths `git worktree list` shows for the repository of `root`. */
export async function listWorktreePaths(root: string): Promise<string[]> {
  const out = await git(root, ['worktree', 'list', '--porcelain', '-z']);
  return out
    .split('\0')
    .filter((line) => line.startsWith('worktree '))
    .map((line) => line.slice('worktree '.length));
}

export type MergeOutcome = { readonly merged: true; readonly commit: string } | { readonly merged: false; readonly conflicts: string[] };

/**
 * Merges `branch` into the checkout's current branch. The merge is first made in memory
 * (`git merge-tree --write-tree`, which touches no work tree); on a conflict nothing else runs
 * and the conflicting files are returned. A clean one is then merged for real (`git merge`,
 * which itself refuses, untouched, when local changes stand in its way).
 */
export async function mergeBranch(root: string, branch: string, message: string): Promise<MergeOutcome> {
  try {
    await git(root, ['merge-tree', '--write-tree', '--name-only', '--no-messages', 'HEAD', `refs/heads/${branch}`]);
  } catch (error) {
    if (!(error instanceof GitError) || error.exitCode !== 1) throw error;
    // Exit 1 is a conflict: the first line is the tree, the rest the conflicting files.
    const conflicts = error.stdout.split('\n').slice(1).filter((line) => line !== '');
    return { merged: false, conflicts: [...new Set(conflicts)] };
  }
  await git(root, ['merge', '--no-edit', '-m', message, `refs/heads/${branch}`]);
  return { merged: true, commit: await headOf(root) };
}
