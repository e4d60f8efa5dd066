/**
 * `connect`: reach a daemon (shared unix socket, private stdio daemon, or caller streams),
 * handshake, and return the remote `SubagentService`.
 */
import { existsSync } from 'node:fs';
import type { Readable, Writable } from 'node:stream';
import { SubagentError, type InitializeParams } from '../protocol/index.js';
import { readTokenFile, tokenPathFor } from '../common/daemon-token.js';
import { defaultDaemonCliPath } from './package-paths.js';
import { packageVersion } from '../common/package-info.js';
import { reconnectPolicy, type ReconnectOptions } from './reconnect.js';
import { RemoteSubagentService, type ReconnectSetup } from './remote-service.js';
import { RpcChannel } from './rpc-channel.js';
import { isDaemonNotRunning, openSocketTransport } from './socket-transport.js';
import { spawnStdioTransport, type StdioSpawnOptions } from './stdio-transport.js';
import { streamTransport, type Transport } from './transport.js';
import type { ClientLogger, PermissionHandler } from './types.js';

export interface CommonConnectOptions {
  /** The daemon's token. For a socket it defaults to the contents of `<socket>.token`, if readable. */
  readonly token?: string;
  /** Defaults to `{ name: 'subagentd-client', version: <this package's version> }`. */
  readonly clientInfo?: NonNullable<InitializeParams['clientInfo']>;
  /** Deadline for control requests; past it they reject with DAEMON_UNRESPONSIVE. None by default. */
  readonly requestTimeoutMs?: number;
  /** Deadline for a start (or resume) to become ready. None by default: children may take long. */
  readonly startTimeoutMs?: number;
  /** Answers children's permission prompts; without it every prompt is answered `cancelled`. */
  readonly onPermission?: PermissionHandler;
  /** Where contained failures go; defaults to console.error. */
  readonly logger?: ClientLogger;
  /** The secret that owns this client's continuable children; random per connection by default. */
  readonly ownerKey?: string;
}

export interface SocketConnectOptions extends CommonConnectOptions {
  /** Path of the shared daemon's unix socket. */
  readonly socket: string;
  /**
   * Hook for auto-start: called once when nothing listens at `socket`; the connect is then
   * retried once. Without it, that case rejects with DAEMON_UNAVAILABLE.
   */
  readonly autoStart?: (socket: string) => Promise<void>;
  /**
   * Opt-in: when the connection is lost (not by `close()`), re-dial with bounded exponential
   * backoff plus jitter (`true` = defaults: 10 attempts, 100 ms doubling up to 5 s), present the
   * token again (`token`, else `<socket>.token` re-read: a restarted daemon writes a new one), and
   * re-attach every unsettled run with its token. A re-dial never calls `autoStart`: a daemon
   * that was stopped stays stopped (auto-start belongs to a fresh connect, not to a reconnect).
   * Meanwhile runs' `result`s stay pending; requests that were in flight reject with
   * DAEMON_UNAVAILABLE (they may not have reached the daemon), and so do new calls until the
   * `reconnected` event. After `maxAttempts` failed re-dials everything rejects as without it.
   */
  readonly reconnect?: ReconnectOptions | boolean;
}

export interface SpawnConnectOptions extends CommonConnectOptions {
  /** Spawn a private daemon on stdio; it lives as long as this connection. */
  readonly spawn: 'stdio';
  /** Defaults to this Node binary running `<package>/dist/cli/main.js daemon --stdio`. */
  readonly command?: string;
  /** Defaults to the CLI's `daemon --stdio` when `command` is not given, else to no arguments. */
  readonly args?: readonly string[];
  readonly env?: NodeJS.ProcessEnv;
  readonly cwd?: string;
  readonly stderr?: StdioSpawnOptions['stderr'];
  readonly exitGraceMs?: number;
}

export interface StreamConnectOptions extends CommonConnectOptions {
  /** Any byte channel to a daemon (a duplex, a pair of pipes): for embedding and tests. */
  readonly stream: { readonly reader: Readable; readonly writer: Writable };
}

export type ConnectOptions = SocketConnectOptions | SpawnConnectOptions | StreamConnectOptions;

const defaultLogger: ClientLogger = {
  error: (message, error) => console.error(`[subagentd client] ${message}`, ...(error === undefined ? [] : [error])),
  warn: (message, error) => console.warn(`[subagentd client] ${message}`, ...(error === undefined ? [] : [error])),
};

export async function connect(options: ConnectOptions): Promise<RemoteSubagentService> {
  const logger = options.logger ?? defaultLogger;
  // Checked before dialling: a bad policy is the caller's mistake, not the daemon's.
  const reconnect = 'socket' in options ? reconnectSetup(options, logger) : undefined;
  const transport = await openTransport(options);
  // Read after connecting: an auto-started daemon writes its token file before it listens.
  const token = options.token ?? ('socket' in options ? readTokenBeside(options.socket) : undefined);
  const channel = new RpcChannel(transport, logger);
  try {
    return await RemoteSubagentService.open(channel, {
      clientInfo: options.clientInfo ?? { name: 'subagentd-client', version: packageVersion() },
      logger,
      ...(token !== undefined ? { token } : {}),
      ...(options.requestTimeoutMs !== undefined ? { requestTimeoutMs: options.requestTimeoutMs } : {}),
      ...(options.startTimeoutMs !== undefined ? { startTimeoutMs: options.startTimeoutMs } : {}),
      ...(options.onPermission !== undefined ? { onPermission: options.onPermission } : {}),
      ...(options.ownerKey !== undefined ? { ownerKey: options.ownerKey } : {}),
      ...(reconnect !== undefined ? { reconnect } : {}),
    });
  } catch (error) {
    await channel.close();
    throw error;
  }
}

function reconnectSetup(options: SocketConnectOptions, logger: ClientLogger): ReconnectSetup | undefined {
  const policy = reconnectPolicy(options.reconnect);
  if (!policy) return undefined;
  return {
    policy,
    dial: async () => {
      // Not openSocket: `subagentd stop` must not be undone by a client that was connected.
      const transport = await openSocketTransport(options.socket);
      // Re-read each time, after connecting: a restarted daemon wrote a new token before it listened.
      const token = options.token ?? readTokenBeside(options.socket);
      return { channel: new RpcChannel(transport, logger), ...(token !== undefined ? { token } : {}) };
    },
  };
}

/** The shared daemon writes its token 0600 beside its socket; only this user can read it. */
function readTokenBeside(socket: string): string | undefined {
  return readTokenFile(tokenPathFor(socket));
}

async function openTransport(options: ConnectOptions): Promise<Transport> {
  if ('socket' in options) return openSocket(options);
  if ('spawn' in options) return spawnDaemon(options);
  return streamTransport(options.stream);
}

async function openSocket(options: SocketConnectOptions): Promise<Transport> {
  try {
    return await openSocketTransport(options.socket);
  } catch (error) {
    if (!options.autoStart || !isDaemonNotRunning(error)) throw error;
  }
  await options.autoStart(options.socket);
  return openSocketTransport(options.socket);
}

function spawnDaemon(options: SpawnConnectOptions): Promise<Transport> {
  let command = options.command;
  let args = options.args ?? [];
  if (command === undefined) {
    const cli = defaultDaemonCliPath();
    if (!existsSync(cli)) {
      throw new SubagentError('DAEMON_UNAVAILABLE', `the daemon CLI is not built (${cli} is missing); run \`npm run build\``);
    }
    command = process.execPath;
    args = options.args ?? [cli, 'daemon', '--stdio'];
  }
  return spawnStdioTransport({
    command,
    args,
    ...(options.env !== undefined ? { env: options.env } : {}),
    ...(options.cwd !== undefined ? { cwd: options.cwd } : {}),
    ...(options.stderr !== undefined ? { stderr: options.stderr } : {}),
    ...(options.exitGraceMs !== undefined ? { exitGraceMs: options.exitGraceMs } : {}),
  });
}
