/** How the CLI reaches the daemon: the shared socket, started on demand for commands that need it. */
import { connect, SubagentError, type RemoteSubagentService } from '../client/index.js';
import { ensureDaemon } from '../client/auto-start.js';
import type { CommonSettings } from '../daemon/cli/options.js';

/** Ops requests must not hang on a hung daemon. */
const OPS_TIMEOUT_MS = 10_000;

export async function openClient(settings: CommonSettings, options: { autoStart: boolean; ownerKey?: string }): Promise<RemoteSubagentService> {
  try {
    return await connect({
      socket: settings.socket,
      clientInfo: { name: 'subagentd-cli', version: '1' },
      requestTimeoutMs: OPS_TIMEOUT_MS,
      logger: { error: () => undefined, warn: () => undefined },
      ...(options.ownerKey !== undefined && { ownerKey: options.ownerKey }),
      ...(options.autoStart && {
        autoStart: async () => {
          await ensureDaemon({
            socket: settings.socket,
            stateDir: settings.stateDir,
            ...(settings.configPath !== undefined && { config: settings.configPath }),
          });
        },
      }),
    });
  } catch (error) {
    if (error instanceof SubagentError && error.code === 'DAEMON_UNAVAILABLE' && !options.autoStart) {
      throw new SubagentError('DAEMON_UNAVAILABLE', `no daemon at ${settings.socket}: run \`subagentd start\``);
    }
    throw error;
  }
}
