/** Where the daemon keeps its socket and its state, from flags, then env, then XDG defaults. */
import { homedir, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

export function defaultSocketPath(env: NodeJS.ProcessEnv = process.env): string {
  if (env['SUBAGENTD_SOCKET']) return resolve(env['SUBAGENTD_SOCKET']);
  const runtime = env['XDG_RUNTIME_DIR'];
  const uid = typeof process.getuid === 'function' ? process.getuid() : 0;
  return runtime ? join(runtime, 'subagentd', 'daemon.sock') : join(tmpdir(), `subagentd-${uid}`, 'daemon.sock');
}

export function defaultStateDir(env: NodeJS.ProcessEnv = process.env): string {
  if (env['SUBAGENTD_HOME']) return resolve(env['SUBAGENTD_HOME']);
  const state = env['XDG_STATE_HOME'] || join(homedir(), '.local', 'state');
  return join(state, 'subagentd');
}

export const stateFiles = (stateDir: string) => ({
  log: join(stateDir, 'daemon.log'),
  lock: join(stateDir, 'daemon.lock'),
  runIndex: join(stateDir, 'runs.jsonl'),
  sessions: join(stateDir, 'sessions'),
});
