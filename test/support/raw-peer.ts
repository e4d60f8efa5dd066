/**
 * A raw JSON-RPC peer on a unix socket: writes exact bytes and parses what comes back, so tests
 * assert the bytes on the wire rather than the library's view of them.
 */
import { readFileSync } from 'node:fs';
import { createConnection, type Socket } from 'node:net';
import { PROTOCOL_VERSION } from '../../protocol/index.js';

export interface RpcMessage {
  jsonrpc: '2.0';
  id?: string | number | null;
  method?: string;
  params?: unknown;
  result?: unknown;
  error?: { code: number; message: string; data?: { code?: string; field?: string } & Record<string, unknown> };
}

/** One run event as a client sees it, whichever message carried it. */
export interface ReceivedRunEvent {
  readonly runId: string;
  readonly event: { readonly kind: string; readonly text?: string } & Record<string, unknown>;
  /** The `run/event` or `run/events` message it came in. */
  readonly message: RpcMessage;
}

export class RawPeer {
  readonly messages: RpcMessage[] = [];
  private buffer = Buffer.alloc(0);
  private waiters: Array<() => void> = [];
  private nextId = 1;
  closed = false;
  readonly whenClosed: Promise<void>;

  private constructor(readonly socket: Socket) {
    socket.on('data', (chunk: Buffer) => this.onData(chunk));
    this.whenClosed = new Promise((resolve) => socket.on('close', () => {
      this.closed = true;
      this.wake();
      resolve();
    }));
    socket.on('error', () => undefined);
  }

  /** Any connected socket (TCP, for instance). */
  static fromSocket(socket: Socket): RawPeer {
    return new RawPeer(socket);
  }

  static connect(path: string): Promise<RawPeer> {
    return new Promise((resolve, reject) => {
      const socket = createConnection(path);
      socket.once('connect', () => resolve(new RawPeer(socket)));
      socket.once('error', reject);
    });
  }

  /** Connects and completes `initialize` with the daemon's token, speaking `protocolVersion` (default ours). */
  static async initialized(path: string, name = 'raw', protocolVersion = PROTOCOL_VERSION): Promise<RawPeer> {
    const peer = await RawPeer.connect(path);
    const token = readFileSync(`${path}.token`, 'utf8').trim();
    const reply = await peer.request('initialize', { protocolVersion, clientInfo: { name, version: '0' }, token });
    if (reply.error) throw new Error(`initialize failed: ${reply.error.message}`);
    return peer;
  }

  writeRaw(bytes: string | Buffer): void {
    this.socket.write(bytes);
  }

  send(message: unknown): void {
    const body = Buffer.from(JSON.stringify(message));
    this.socket.write(Buffer.concat([Buffer.from(`Content-Length: ${body.length}\r\n\r\n`), body]));
  }

  async request(method: string, params?: unknown, timeoutMs = 5000): Promise<RpcMessage> {
    const id = this.nextId++;
    this.send({ jsonrpc: '2.0', id, method, ...(params !== undefined && { params }) });
    return this.waitFor((m) => m.id === id && m.method === undefined, timeoutMs, `reply to ${method}#${id}`);
  }

  notifications(method: string): RpcMessage[] {
    return this.messages.filter((m) => m.method === method && m.id === undefined);
  }

  /** Every run event received so far, in order: one per `run/event`, many per `run/events` (1.3). */
  runEvents(): ReceivedRunEvent[] {
    return this.messages.flatMap((message) => runEventsIn(message));
  }

  async waitFor(match: (m: RpcMessage) => boolean, timeoutMs = 5000, what = 'message'): Promise<RpcMessage> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = this.messages.find(match);
      if (found) return found;
      if (this.closed) throw new Error(`connection closed while waiting for ${what}`);
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`timed out waiting for ${what}`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  close(): void {
    this.socket.destroy();
  }

  private wake(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w();
  }

  private onData(chunk: Buffer): void {
    this.buffer = Buffer.concat([this.buffer, chunk]);
    for (;;) {
      const end = this.buffer.indexOf('\r\n\r\n');
      if (end < 0) break;
      const match = /Content-Length: (\d+)/i.exec(this.buffer.subarray(0, end).toString('ascii'));
      if (!match) throw new Error('daemon sent a frame without Content-Length');
      const length = Number(match[1]);
      if (this.buffer.length < end + 4 + length) break;
      const body = this.buffer.subarray(end + 4, end + 4 + length).toString('utf8');
      this.buffer = this.buffer.subarray(end + 4 + length);
      this.messages.push(JSON.parse(body) as RpcMessage);
    }
    this.wake();
  }
}

/** The run events a message carries: none, one (`run/event`) or a batch's (`run/events`), in order. */
export function runEventsIn(message: RpcMessage): ReceivedRunEvent[] {
  if (message.id !== undefined) return [];
  if (message.method === 'run/event') {
    const { runId, event } = message.params as Pick<ReceivedRunEvent, 'runId' | 'event'>;
    return [{ runId, event, message }];
  }
  if (message.method !== 'run/events') return [];
  const { runs } = message.params as { runs: Array<{ runId: string; events: Array<ReceivedRunEvent['event']> }> };
  return runs.flatMap(({ runId, events }) => events.map((event) => ({ runId, event, message })));
}
