/**
 * How an isolated child's worktree outcome reads to a model or a person: one line with the
 * diffstat and the branch, appended to the tool's text, the settlement notice, the CLI's report
 * and the harness's output. One home, so every surface words it alike.
 */
import type { SubagentResult } from './seam.js';

/** A worktree child's branch and diffstat, for the model to review and merge. */
export function worktreeNote(result: SubagentResult): string {
  const w = result.worktree;
  if (w === undefined) return '';
  const { files, insertions, deletions } = w.changed;
  const stat = files === 0 ? 'no changes' : `${files} file${files === 1 ? '' : 's'} changed, ${insertions} insertion${insertions === 1 ? '' : 's'}(+), ${deletions} deletion${deletions === 1 ? '' : 's'}(-)`;
  const where = w.committed ? `committed on branch ${w.branch}` : `left uncommitted in ${w.path} (branch ${w.branch})`;
  const parent = w.parentUncommitted === 'left' ? " Your uncommitted changes were not in its worktree." : w.parentUncommitted === 'carried' ? ' Your uncommitted changes were carried into its worktree.' : '';
  return `\n\n[worktree] ${stat}; ${files === 0 ? `branch ${w.branch}` : where}, based on ${w.baseRef} (${w.baseCommit.slice(0, 12)}).${parent}`;
}

