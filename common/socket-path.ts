/**
 * Where the shared daemon's socket is by default: `$SUBAGENTD_SOCKET`, else
 * `$XDG_RUNTIME_DIR/subagentd/daemon.sock`, else `<tmpdir>/subagentd-<uid>/daemon.sock`.
 * One home for the rule, so the daemon, the client and the CLI never disagree.
 */
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

export function defaultSocketPath(env: NodeJS.ProcessEnv = process.env): string {
  if (env['SUBAGENTD_SOCKET']) return resolve(env['SUBAGENTD_SOCKET']);
  const runtime = env['XDG_RUNTIME_DIR'];
  const uid = typeof process.getuid === 'function' ? process.getuid() : 0;
  return runtime ? join(runtime, 'subagentd', 'daemon.sock') : join(tmpdir(), `subagentd-${uid}`, 'daemon.sock');
}
