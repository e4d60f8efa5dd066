/**
 * `subagentd worktrees list|prune|merge RUN`: the worktrees of isolated children, read from the
 * state dir's records (daemon/worktrees/) and the repositories' own git, with or without a
 * running daemon. `prune` touches only orphans (their run died with a daemon): a live daemon
 * never works in those. `merge` refuses a conflicting branch and names its files, the parent's
 * checkout untouched.
 */
import { SubagentError } from '../protocol/index.js';
import { stateFiles } from '../daemon/ops/paths.js';
import { WorktreeManager } from '../daemon/worktrees/worktree-manager.js';
import { table } from './format.js';
import type { CommonSettings } from './options.js';

export const WORKTREE_ACTIONS = ['list', 'prune', 'merge'] as const;

const print = (text: string): void => void process.stdout.write(`${text}\n`);

function manager(settings: CommonSettings): WorktreeManager {
  return new WorktreeManager({ stateWorktrees: stateFiles(settings.stateDir).worktrees, ...(settings.config.worktrees?.dir !== undefined && { dir: settings.config.worktrees.dir }) });
}

export async function worktreesCommand(settings: CommonSettings, action: string | undefined, runId: string | undefined): Promise<number> {
  const worktrees = manager(settings);
  switch (action ?? 'list') {
    case 'list': {
      const listed = await worktrees.list();
      if (settings.json) print(JSON.stringify(listed));
      else if (listed.length === 0) print('no worktrees');
      else {
        print(
          table(
            ['RUN', 'STATE', 'GIT', 'BRANCH', 'PATH'],
            listed.map((w) => [w.runIds.at(-1) ?? '-', w.state, w.present ? 'listed' : 'gone', `${w.branch}${w.branchExists ? '' : ' (deleted)'}`, w.path]),
          ),
        );
      }
      return 0;
    }
    case 'prune': {
      const pruned = await worktrees.prune();
      if (settings.json) print(JSON.stringify(pruned));
      else if (pruned.length === 0) print('no orphaned worktrees');
      else for (const p of pruned) print(`removed worktree ${p.name} of run ${p.runId}${p.branchKept ? `; branch subagentd/${p.name} kept` : ''}`);
      return 0;
    }
    case 'merge': {
      if (runId === undefined) throw new SubagentError('INVALID_REQUEST', 'worktrees merge needs a run id: subagentd worktrees merge RUN');
      const outcome = await worktrees.merge(runId);
      if (settings.json) print(JSON.stringify(outcome.merged ? { merged: true, commit: outcome.commit, branch: outcome.record.branch } : { merged: false, conflicts: outcome.conflicts, branch: outcome.record.branch }));
      else if (outcome.merged) print(`merged ${outcome.record.branch} into ${outcome.record.parentRoot} (${outcome.commit.slice(0, 12)})`);
      else process.stderr.write(`not merged: ${outcome.record.branch} conflicts with ${outcome.record.parentRoot} in:\n${outcome.conflicts.map((f) => `  ${f}`).join('\n')}\nnothing was changed\n`);
      return outcome.merged ? 0 : 1;
    }
    default:
      throw new SubagentError('INVALID_REQUEST', `unknown worktrees action "${action}": list, prune or merge RUN`);
  }
}
