/** What the figures were measured on. */
import { execFileSync } from 'node:child_process';
import { availableParallelism, cpus, loadavg, totalmem } from 'node:os';

export interface Machine {
  readonly nproc: number;
  readonly cpu: string;
  readonly node: string;
  readonly memory: string;
  readonly date: string;
  /** The checked-out commit (with "+ uncommitted changes" when the tree differs), or "unknown". */
  readonly commit: string;
  readonly loadStart: string;
}

export const formatLoad = (): string => loadavg().map((x) => x.toFixed(2)).join(' / ');

export function machine(): Machine {
  return {
    nproc: availableParallelism(),
    cpu: cpus()[0]?.model.trim() ?? 'unknown',
    node: process.version,
    memory: `${(totalmem() / 1024 ** 3).toFixed(1)} GiB`,
    date: new Date().toISOString(),
    commit: checkedOutCommit(),
    loadStart: formatLoad(),
  };
}

function checkedOutCommit(): string {
  try {
    const git = (...args: string[]): string => execFileSync('git', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    const dirty = git('status', '--porcelain', '--untracked-files=no') !== '';
    return `${git('rev-parse', '--short=12', 'HEAD')}${dirty ? ' + uncommitted changes' : ''}`;
  } catch {
    return 'unknown';
  }
}
