/**
 * A raw JSON-RPC client on a unix socket that can stop reading: for the slow-consumer test. It
 * counts what arrives (it keeps no messages) and frames Content-Length itself.
 */
import { readFileSync } from 'node:fs';
import { createConnection, type Socket } from 'node:net';
import { PROTOCOL_VERSION } from '../protocol/index.js';

export class RawClient {
  private buffer: Buffer = Buffer.alloc(0);
  private nextId = 1;
  private waiters = new Map<number, (message: { error?: { message: string } }) => void>();
  readonly counts = new Map<string, number>();
  /** Run events received, whether one per `run/event` or many per `run/events` (1.3). */
  runEvents = 0;
  responses = 0;
  bytesIn = 0;
  /** Set when the socket closed (e.g. the daemon cut this client off). */
  closed = false;
  private changed: Array<() => void> = [];

  private constructor(readonly socket: Socket) {
    socket.on('data', (chunk: Buffer) => this.onData(chunk));
    socket.on('error', () => undefined);
    socket.on('close', () => {
      this.closed = true;
      for (const wake of this.changed.splice(0)) wake();
    });
  }

  static async initialized(path: string): Promise<RawClient> {
    const socket = await new Promise<Socket>((resolve, reject) => {
      const s = createConnection(path);
      s.once('connect', () => resolve(s));
      s.once('error', reject);
    });
    const peer = new RawClient(socket);
    const token = readFileSync(`${path}.token`, 'utf8').trim();
    const reply = await peer.request('initialize', { protocolVersion: PROTOCOL_VERSION, clientInfo: { name: 'bench-raw', version: '0' }, token });
    if (reply.error) throw new Error(`initialize failed: ${reply.error.message}`);
    return peer;
  }

  send(method: string, params: unknown): number {
    const id = this.nextId++;
    const body = Buffer.from(JSON.stringify({ jsonrpc: '2.0', id, method, params }));
    this.socket.write(Buffer.concat([Buffer.from(`Content-Length: ${body.length}\r\n\r\n`), body]));
    return id;
  }

  request(method: string, params: unknown): Promise<{ error?: { message: string } }> {
    const id = this.send(method, params);
    return new Promise((resolve) => this.waiters.set(id, resolve));
  }

  /** Stop reading: the kernel buffer fills, then the daemon has to hold what it sends. */
  pause(): void {
    this.socket.pause();
  }

  resume(): void {
    this.socket.resume();
  }

  count(method: string): number {
    return this.counts.get(method) ?? 0;
  }

  /**
   * Resolves when `check` holds (re-checked whenever something arrives) or the socket closed;
   * rejects after `timeoutMs`.
   */
  async until(check: () => boolean, timeoutMs: number, what: string): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!check() && !this.closed) {
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`raw client: timed out waiting for ${what}`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.min(left, 100));
        this.changed.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  close(): void {
    this.socket.destroy();
  }

  private onData(chunk: Buffer): void {
    this.bytesIn += chunk.length;
    this.buffer = this.buffer.length === 0 ? chunk : Buffer.concat([this.buffer, chunk]);
    for (;;) {
      const end = this.buffer.indexOf('\r\n\r\n');
      if (end < 0) break;
      const length = Number(/content-length:\s*(\d+)/i.exec(this.buffer.subarray(0, end).toString('ascii'))?.[1] ?? NaN);
      if (!Number.isFinite(length)) throw new Error('raw client: a frame without Content-Length');
      if (this.buffer.length < end + 4 + length) break;
      const message = JSON.parse(this.buffer.subarray(end + 4, end + 4 + length).toString('utf8')) as {
        id?: number;
        method?: string;
        error?: { message: string };
        params?: { runs?: Array<{ events: unknown[] }> };
      };
      this.buffer = this.buffer.subarray(end + 4 + length);
      if (message.method !== undefined) {
        this.counts.set(message.method, this.count(message.method) + 1);
        if (message.method === 'run/event') this.runEvents += 1;
        else if (message.method === 'run/events') for (const stretch of message.params?.runs ?? []) this.runEvents += stretch.events.length;
      } else if (typeof message.id === 'number') {
        this.responses++;
        const waiter = this.waiters.get(message.id);
        this.waiters.delete(message.id);
        waiter?.(message);
      }
    }
    for (const wake of this.changed.splice(0)) wake();
  }
}
