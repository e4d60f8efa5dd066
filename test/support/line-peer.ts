/**
 * A host speaking newline-delimited JSON-RPC to a face process by hand: every line it writes is
 * exactly what the test says (malformed, oversize, …), and every line the face answers is kept.
 */
import type { CliProcess } from './cli-harness.js';
import { waitUntil } from './cli-harness.js';

export interface LineMessage {
  jsonrpc: '2.0';
  id?: number | string | null;
  method?: string;
  params?: any;
  result?: any;
  error?: { code: number; message: string; data?: unknown };
}

export class LinePeer {
  readonly received: LineMessage[] = [];
  /** Lines of stdout that were not JSON (there must be none). */
  readonly garbage: string[] = [];
  private pending = '';
  private nextId = 1;

  constructor(readonly face: CliProcess) {
    face.child.stdout.on('data', (chunk: Buffer) => {
      this.pending += chunk.toString('utf8');
      const lines = this.pending.split('\n');
      this.pending = lines.pop() ?? '';
      for (const line of lines) {
        if (!line.trim()) continue;
        try {
          this.received.push(JSON.parse(line) as LineMessage);
        } catch {
          this.garbage.push(line);
        }
      }
    });
  }

  id(): number {
    return this.nextId++;
  }

  write(line: string | Buffer): void {
    this.face.child.stdin.write(line);
  }

  send(message: Record<string, unknown>): void {
    this.write(`${JSON.stringify({ jsonrpc: '2.0', ...message })}\n`);
  }

  /** Sends a request and resolves with its answer. */
  async request(method: string, params: unknown, timeoutMs = 20_000): Promise<LineMessage> {
    const id = this.id();
    this.send({ method, params, id });
    return this.answer(id, timeoutMs, method);
  }

  /** The answer to request `id` (a message with that id and no method). */
  async answer(id: number | string | null, timeoutMs = 20_000, what = `request ${String(id)}`): Promise<LineMessage> {
    let reply: LineMessage | undefined;
    await waitUntil(
      () => {
        reply = this.received.find((m) => m.id === id && m.method === undefined);
        return reply !== undefined;
      },
      timeoutMs,
      `the answer to ${what}; stderr: ${this.face.stderr()}`,
    );
    return reply as LineMessage;
  }

  /** The next answer with id null after `from` answers of that kind were already seen. */
  async nullAnswer(from: number, timeoutMs = 20_000): Promise<LineMessage> {
    let reply: LineMessage | undefined;
    await waitUntil(
      () => {
        reply = this.received.filter((m) => m.id === null && m.method === undefined)[from];
        return reply !== undefined;
      },
      timeoutMs,
      `answer #${from + 1} with id null; stderr: ${this.face.stderr()}`,
    );
    return reply as LineMessage;
  }
}
