/**
 * The editor's side of `subagentd connect`: LSP-style `Content-Length` frames of JSON-RPC written
 * to a process's stdin and parsed from its stdout, byte-exact, with bounded waits. Any byte on
 * stdout that is not part of a well-formed frame is recorded as a protocol violation.
 */
import type { Readable, Writable } from 'node:stream';

export interface JsonRpcMessage {
  jsonrpc: '2.0';
  id?: number | string | null;
  method?: string;
  params?: unknown;
  result?: unknown;
  error?: { code: number; message: string; data?: Record<string, unknown> & { code?: string } };
}

export class StdioLspPeer {
  readonly received: JsonRpcMessage[] = [];
  readonly violations: string[] = [];
  private pending = Buffer.alloc(0);
  private ended = false;
  private lastId = 0;
  private listeners = new Set<() => void>();

  constructor(
    private readonly input: Writable,
    output: Readable,
  ) {
    output.on('data', (chunk: Buffer) => this.take(chunk));
    output.on('end', () => {
      this.ended = true;
      if (this.pending.length > 0) this.violations.push(`trailing bytes: ${this.pending.toString('utf8').slice(0, 120)}`);
      this.notify();
    });
  }

  send(message: Record<string, unknown>): void {
    const body = Buffer.from(JSON.stringify({ jsonrpc: '2.0', ...message }), 'utf8');
    this.input.write(Buffer.concat([Buffer.from(`Content-Length: ${body.length}\r\n\r\n`, 'ascii'), body]));
  }

  async request(method: string, params: unknown, timeoutMs = 10_000): Promise<JsonRpcMessage> {
    const id = ++this.lastId;
    this.send({ id, method, params });
    return this.next((m) => m.id === id && m.method === undefined, timeoutMs, `the reply to ${method} (id ${id})`);
  }

  notifications(method: string): JsonRpcMessage[] {
    return this.received.filter((m) => m.method === method && m.id === undefined);
  }

  /** The first received message matching `match`, waiting up to `timeoutMs` for it. */
  next(match: (m: JsonRpcMessage) => boolean, timeoutMs: number, what: string): Promise<JsonRpcMessage> {
    return new Promise((resolve, reject) => {
      const check = (): boolean => {
        const found = this.received.find(match);
        if (found) finish(() => resolve(found));
        else if (this.ended) finish(() => reject(new Error(`stdout ended before ${what}`)));
        return found !== undefined || this.ended;
      };
      const timer = setTimeout(() => finish(() => reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}`))), timeoutMs);
      const finish = (settle: () => void): void => {
        clearTimeout(timer);
        this.listeners.delete(listener);
        settle();
      };
      const listener = (): void => void check();
      this.listeners.add(listener);
      check();
    });
  }

  private notify(): void {
    for (const listener of this.listeners) listener(); // a listener may remove itself: Set iteration allows it
  }

  private take(chunk: Buffer): void {
    this.pending = Buffer.concat([this.pending, chunk]);
    for (;;) {
      const headerEnd = this.pending.indexOf('\r\n\r\n');
      if (headerEnd < 0) break;
      const header = this.pending.subarray(0, headerEnd).toString('ascii');
      const length = /^Content-Length: (\d+)$/im.exec(header);
      if (!length) {
        this.violations.push(`not a frame header: ${header.slice(0, 120)}`);
        this.pending = this.pending.subarray(headerEnd + 4);
        continue;
      }
      const end = headerEnd + 4 + Number(length[1]);
      if (this.pending.length < end) break;
      const body = this.pending.subarray(headerEnd + 4, end).toString('utf8');
      this.pending = this.pending.subarray(end);
      try {
        this.received.push(JSON.parse(body) as JsonRpcMessage);
      } catch {
        this.violations.push(`frame body is not JSON: ${body.slice(0, 120)}`);
      }
    }
    this.notify();
  }
}
