/**
 * The daemon connection behind `subagentd mcp` and `subagentd acp`. Faces live as long as their
 * host, so they start the daemon when none answers and reconnect (re-attaching their runs) when
 * it restarts. stdout belongs to the face's protocol: every diagnostic goes to stderr.
 */
import { connect, ensureDaemon, type PermissionHandler, type RemoteSubagentService } from '../client/index.js';
import type { CommonSettings } from './options.js';
import { packageVersion } from '../common/package-info.js';

export async function openFaceClient(
  settings: CommonSettings,
  face: 'mcp' | 'acp',
  onPermission?: PermissionHandler,
): Promise<RemoteSubagentService> {
  const say = (message: string, error?: unknown): void =>
    void process.stderr.write(`subagentd ${face}: ${message}${error === undefined ? '' : `: ${error instanceof Error ? error.message : String(error)}`}\n`);
  return connect({
    socket: settings.socket,
    clientInfo: { name: `subagentd-${face}`, version: packageVersion() },
    reconnect: true,
    logger: { error: say, warn: say },
    ...(onPermission !== undefined && { onPermission }),
    autoStart: async () => {
      await ensureDaemon({
        socket: settings.socket,
        stateDir: settings.stateDir,
        ...(settings.configPath !== undefined && { config: settings.configPath }),
      });
    },
  });
}

/** Resolves when stdin ends (the host closed us) or the process is asked to stop. */
export function untilHostLeaves(): Promise<void> {
  return new Promise((resolve) => {
    process.stdin.once('end', resolve);
    process.stdin.once('close', resolve);
    process.once('SIGTERM', resolve);
    process.once('SIGINT', resolve);
  });
}
