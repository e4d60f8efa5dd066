/**
 * Running the git CLI: the system's own git (Debian's), never a library binding, so the
 * repository is read and written by the same program that made it (its config, its hooks
 * policy, its on-disk formats, `git worktree`'s own bookkeeping) and `git worktree list` in the
 * user's shell always agrees with what the daemon did.
 *
 * - git is looked for in fixed system folders first, then on the daemon's PATH.
 * - Arguments go to execFile, never through a shell. A ref or path from a request is always
 *   placed after `--` or validated first by the caller.
 * - The environment is the daemon's minus every GIT_* variable (a GIT_DIR or GIT_INDEX_FILE of
 *   the daemon's own environment must not redirect a child's repository), with prompts off.
 * - Output is bounded; a failure is a GitError carrying git's own stderr (trimmed).
 */
import { execFile } from 'node:child_process';
import { existsSync } from '../../common/node-builtins.js';

const GIT_LOCATIONS = ['/usr/bin/git', '/usr/local/bin/git', '/bin/git'];
/** The most a git command may print before it is refused: a diffstat of a huge tree still fits. */
const MAX_GIT_OUTPUT = 64 * 1024 * 1024;

export class GitError extends Error {
  override readonly name = 'GitError';
  constructor(
    readonly args: readonly string[],
    readonly exitCode: number | null,
    readonly stderr: string,
    readonly stdout: string,
  ) {
    super(`git ${args[0] ?? ''} failed${exitCode === null ? '' : ` (exit ${exitCode})`}: ${stderr.trim().split('\n').slice(-3).join(' ') || 'no message'}`);
  }
}

let gitPath: string | undefined;
function gitBinary(): string {
  gitPath ??= GIT_LOCATIONS.find((path) => existsSync(path)) ?? 'git';
  return gitPath;
}

function gitEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) if (!key.startsWith('GIT_')) env[key] = value;
  return { ...env, GIT_TERMINAL_PROMPT: '0', LC_ALL: 'C' };
}

/** Runs `git args` in `cwd` and resolves its stdout; rejects GitError on a non-zero exit. */
export function git(cwd: string, args: readonly string[], options: { env?: Readonly<Record<string, string>> } = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(
      gitBinary(),
      args,
      { cwd, env: { ...gitEnv(), ...options.env }, maxBuffer: MAX_GIT_OUTPUT, encoding: 'utf8', windowsHide: true },
      (error, stdout, stderr) => {
        if (!error) return resolve(stdout);
        const code = typeof error.code === 'number' ? error.code : null;
        reject(code === null && (error as NodeJS.ErrnoException).code === 'ENOENT' ? new Error('git is not installed: worktree isolation needs the git CLI') : new GitError(args, code, stderr, stdout));
      },
    );
  });
}

/** As `git`, but a non-zero exit resolves `undefined` instead of rejecting (a probe). */
export async function gitProbe(cwd: string, args: readonly string[]): Promise<string | undefined> {
  try {
    return await git(cwd, args);
  } catch (error) {
    if (error instanceof GitError) return undefined;
    throw error;
  }
}
