/** Where the daemon keeps its socket and its state, from flags, then env, then XDG defaults. */
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';

export { defaultSocketPath } from '../../common/socket-path.js';

export function defaultStateDir(env: NodeJS.ProcessEnv = process.env): string {
  if (env['SUBAGENTD_HOME']) return resolve(env['SUBAGENTD_HOME']);
  const state = env['XDG_STATE_HOME'] || join(homedir(), '.local', 'state');
  return join(state, 'subagentd');
}

export const stateFiles = (stateDir: string) => ({
  log: join(stateDir, 'daemon.log'),
  lock: join(stateDir, 'daemon.lock'),
  runIndex: join(stateDir, 'runs.jsonl'),
  children: join(stateDir, 'children.jsonl'),
  sessions: join(stateDir, 'sessions'),
  /** Worktree isolation: its records (`records/`), and the worktrees themselves unless configured elsewhere. */
  worktrees: join(stateDir, 'worktrees'),
});

/** One child's session log in the sessions folder: `<sessions>/<sessionId>.jsonl`. */
export function sessionFilePath(sessionsDir: string, sessionId: string): string {
  return join(sessionsDir, `${sessionId}.jsonl`);
}
