/** How the CLI reaches the daemon: the shared socket, started on demand for commands that need it. */
import { connect, SubagentError, type RemoteSubagentService } from '../client/index.js';
import { ensureDaemon } from '../client/auto-start.js';
import type { CommonSettings } from './options.js';
import { ConfigError } from '../daemon/config.js';

/** Ops requests must not hang on a hung daemon. */
const OPS_TIMEOUT_MS = 10_000;

export async function openClient(settings: CommonSettings, options: { autoStart: boolean; ownerKey?: string }): Promise<RemoteSubagentService> {
  const client = await dial(settings, options);
  if (settings.configPath !== undefined) {
    try {
      await checkSameConfig(client, settings);
    } catch (error) {
      await client.close();
      throw error;
    }
  }
  return client;
}

/**
 * A --config (or SUBAGENTD_CONFIG) names the config this command expects the daemon to run with;
 * a daemon already running with another one would silently ignore it, so that is an error.
 */
async function checkSameConfig(client: RemoteSubagentService, settings: CommonSettings): Promise<void> {
  const running = (await client.ops.status()).config;
  if (running === undefined || running.path === settings.configPath) return;
  throw new ConfigError(
    `the daemon at ${settings.socket} (pid ${client.daemon.pid}) runs with ${running.path ? `config ${running.path}` : 'no config file'}, not ${settings.configPath}; ` +
      'a running daemon does not switch configs: `subagentd restart --config FILE` to switch, or drop --config',
  );
}

async function dial(settings: CommonSettings, options: { autoStart: boolean; ownerKey?: string }): Promise<RemoteSubagentService> {
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
