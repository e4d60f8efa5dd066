/**
 * A stand-in for the daemon's side of protocol/messages.ts, on a real unix socket in a temp dir,
 * for client tests. It answers with defaults that tests override per method, records every
 * request it handled (and which ones were cancelled), and keeps the raw inbound bytes so a test
 * can count what actually crossed the wire.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  ResponseError,
  SocketMessageReader,
  SocketMessageWriter,
  createMessageConnection,
  type CancellationToken,
  type MessageConnection,
} from 'vscode-jsonrpc/node';
import {
  PROTOCOL_VERSION,
  SUBAGENT_ERROR_CODES,
  type DaemonIdentity,
  type EndParams,
  type ProviderDescriptor,
  type SubagentErrorCode,
  type SubagentResult,
} from '../../protocol/index.js';

export const IDENTITY: DaemonIdentity = {
  name: 'subagentd',
  version: '0.1.0',
  pid: 4242,
  startedAt: '2026-12-02T00:00:00.000Z',
  epoch: 'epoch-test-1',
};

export function descriptor(
  name: string,
  overrides: { inheritsParentContext?: boolean; sendMessage?: boolean; resume?: boolean; caps?: Partial<ProviderDescriptor['capabilities']> } = {},
): ProviderDescriptor {
  return {
    name,
    capabilities: { outputSchema: false, depthLimit: false, toolFilter: false, persona: false, ...overrides.caps },
    inheritsParentContext: overrides.inheritsParentContext ?? false,
    runtime: { sendMessage: overrides.sendMessage ?? false, resume: overrides.resume ?? false },
  };
}

export const COMPLETED: SubagentResult = { output: [{ type: 'text', text: 'done' }], stopReason: 'completed' };

/** A JSON-RPC error shaped like the daemon's: numeric code per name, seam code in `data.code`. */
export function daemonError(code: SubagentErrorCode, message: string, extra: Record<string, unknown> = {}): ResponseError<unknown> {
  return new ResponseError(SUBAGENT_ERROR_CODES[code], message, { code, ...extra });
}

export interface HandlerContext {
  readonly token: CancellationToken;
  readonly peer: PeerConnection;
}
// Params arrive untyped off the wire; handlers pick what they need.
export type PeerHandler = (params: any, context: HandlerContext) => unknown;

export interface FakeDaemonOptions {
  readonly providers?: ProviderDescriptor[];
  readonly handlers?: Record<string, PeerHandler>;
}

export class PeerConnection {
  readonly requests: Array<{ readonly method: string; readonly params: unknown }> = [];
  /** Methods of requests whose cancellation (`$/cancelRequest`) reached this peer. */
  readonly cancelled: string[] = [];
  private raw = '';
  private runCounter = 0;

  constructor(
    readonly socket: Socket,
    readonly connection: MessageConnection,
    handlers: Record<string, PeerHandler>,
  ) {
    socket.on('data', (chunk: Buffer) => {
      this.raw += chunk.toString('utf8');
    });
    connection.onRequest(async (method, params, token) => {
      this.requests.push({ method, params });
      token.onCancellationRequested(() => this.cancelled.push(method));
      const handler = handlers[method];
      if (!handler) throw new ResponseError(-32601, `fake daemon: no handler for ${method}`);
      return handler(params, { token, peer: this });
    });
    connection.listen();
  }

  nextRunId(): string {
    this.runCounter += 1;
    return `run-${this.runCounter}`;
  }

  /** Params of the handled requests of one method, in arrival order. */
  paramsOf(method: string): unknown[] {
    return this.requests.filter((request) => request.method === method).map((request) => request.params);
  }

  /** Everything the client wrote, as text. */
  rawText(): string {
    return this.raw;
  }

  /** How many requests of `method` crossed the wire (counted on the raw bytes). */
  wireCount(method: string): number {
    return this.raw.split(`"method":"${method}"`).length - 1;
  }

  notify(method: string, params: unknown): Promise<void> {
    return this.connection.sendNotification(method, params);
  }

  request(method: string, params: unknown): Promise<unknown> {
    return this.connection.sendRequest(method, params);
  }

  /** The daemon's end of a run it answered the start of (a 1.3 daemon's start notice is that reply). */
  async finishRun(
    runId: string,
    result: SubagentResult = COMPLETED,
    identity: { provider?: string; id?: string } = {},
  ): Promise<void> {
    const base = { runId, provider: identity.provider ?? 'spawn', id: identity.id ?? `child-${runId}`, local: false };
    const end: EndParams = { ...base, stopReason: result.stopReason, result };
    await this.notify('subagent/end', end);
  }

  /** Write notifications as raw frames and close the socket in the same write: data, then FIN. */
  endWith(notifications: Array<{ method: string; params: unknown }>): void {
    const frames = notifications.map(({ method, params }) => {
      const body = Buffer.from(JSON.stringify({ jsonrpc: '2.0', method, params }), 'utf8');
      return Buffer.concat([Buffer.from(`Content-Length: ${body.length}\r\n\r\n`, 'ascii'), body]);
    });
    this.socket.end(Buffer.concat(frames));
  }

  destroy(): void {
    this.connection.dispose();
    this.socket.destroy();
  }
}

export class FakeDaemon {
  readonly connections: PeerConnection[] = [];
  private readonly waiters: Array<() => void> = [];

  private constructor(
    readonly dir: string,
    readonly socketPath: string,
    private readonly server: Server,
  ) {}

  static async start(options: FakeDaemonOptions = {}): Promise<FakeDaemon> {
    const dir = await mkdtemp(join(tmpdir(), 'subagentd-client-'));
    const socketPath = join(dir, 'daemon.sock');
    const providers = options.providers ?? [descriptor('spawn')];
    const handlers: Record<string, PeerHandler> = { ...defaultHandlers(providers), ...options.handlers };
    const server = createServer();
    const daemon = new FakeDaemon(dir, socketPath, server);
    server.on('connection', (socket) => {
      const connection = createMessageConnection(new SocketMessageReader(socket), new SocketMessageWriter(socket));
      socket.on('error', () => undefined);
      daemon.connections.push(new PeerConnection(socket, connection, handlers));
      for (const wake of daemon.waiters.splice(0)) wake();
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(socketPath, resolve);
    });
    return daemon;
  }

  /** The `index`th accepted connection, once it exists. */
  async connection(index = 0): Promise<PeerConnection> {
    while (!this.connections[index]) await new Promise<void>((resolve) => this.waiters.push(resolve));
    return this.connections[index] as PeerConnection;
  }

  async close(): Promise<void> {
    for (const peer of this.connections) peer.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
    await rm(this.dir, { recursive: true, force: true });
  }
}

function defaultHandlers(providers: ProviderDescriptor[]): Record<string, PeerHandler> {
  return {
    initialize: () => ({ protocolVersion: PROTOCOL_VERSION, daemon: IDENTITY, providers }),
    'providers/list': () => ({ providers }),
    'subagent/start': (params: { provider: string }, { peer }) => {
      const runId = peer.nextRunId();
      return { runId, provider: params.provider, id: `child-${runId}`, local: false, runToken: `token-${runId}` };
    },
    'run/resume': (_params: unknown, { peer }) => {
      const runId = peer.nextRunId();
      return { runId, provider: 'spawn', id: `child-${runId}`, local: false, runToken: `token-${runId}` };
    },
    'run/cancel': () => ({}),
    'run/dispose': () => ({}),
    'run/sendMessage': () => ({}),
    'run/wait': () => COMPLETED,
  };
}

/** A logger that keeps what the client reports, for assertions. */
export function captureLogger(): { lines: string[]; error(message: string, error?: unknown): void; warn(message: string, error?: unknown): void } {
  const lines: string[] = [];
  const keep = (message: string, error?: unknown): void => {
    lines.push(error === undefined ? message : `${message}: ${error instanceof Error ? error.message : String(error)}`);
  };
  return { lines, error: keep, warn: keep };
}

/** Resolves after `ms`; for bounded waits in tests. */
export function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Poll `condition` until it holds, failing after `timeoutMs`. */
export async function until(condition: () => boolean, timeoutMs = 2000, what = 'condition'): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await delay(5);
  }
}
