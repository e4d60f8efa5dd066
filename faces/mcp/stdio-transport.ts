/**
 * The MCP face's stdio transport, in place of the SDK's: the SDK's buffers up to 10 MiB of one
 * line, then drops it and stops reading for good (every call in flight, and every later one,
 * hangs), and it answers nothing to a line that is not JSON or not a JSON-RPC object. Here a line
 * over `limits.faceLineBytes` gets a -32600 naming the limit (with its id when one can be read,
 * faces/stdio-lines.ts), malformed JSON -32700, a non-object or a bad envelope -32600, as JSON-RPC
 * 2.0 says and the ACP face does; the face keeps serving. The end of stdin closes the transport,
 * which aborts the calls in flight (the SDK's `onclose`), so their runs are cancelled.
 */
import type { Readable, Writable } from 'node:stream';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { JSONRPCMessageSchema, type JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { BoundedLines, oversizeError } from '../stdio-lines.js';

export class BoundedStdioTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;
  private readonly lines: BoundedLines;
  private closed = false;

  constructor(
    private readonly stdin: Readable,
    private readonly stdout: Writable,
    maxLineBytes: number,
  ) {
    this.lines = new BoundedLines(maxLineBytes, {
      line: (text) => this.receive(text),
      oversize: (id, bytes) => void this.write(oversizeError(id, bytes, maxLineBytes)),
    });
  }

  start(): Promise<void> {
    this.stdin.on('data', this.onData);
    this.stdin.once('end', this.onEnd);
    this.stdin.once('close', this.onEnd);
    this.stdin.on('error', this.onStdinError);
    return Promise.resolve();
  }

  send(message: JSONRPCMessage): Promise<void> {
    return this.write(message);
  }

  close(): Promise<void> {
    if (this.closed) return Promise.resolve();
    this.closed = true;
    this.stdin.off('data', this.onData);
    this.stdin.off('end', this.onEnd);
    this.stdin.off('close', this.onEnd);
    this.stdin.off('error', this.onStdinError);
    this.onclose?.();
    return Promise.resolve();
  }

  private readonly onData = (chunk: Buffer | string): void => {
    this.lines.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk);
  };

  private readonly onEnd = (): void => {
    this.lines.end();
    void this.close();
  };

  private readonly onStdinError = (error: Error): void => {
    this.onerror?.(error);
    void this.close();
  };

  private receive(text: string): void {
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch (error) {
      void this.write(errorReply(null, -32700, `parse error: ${(error as Error).message}`));
      return;
    }
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
      void this.write(errorReply(null, -32600, Array.isArray(parsed) ? 'batches are not supported: send one message per line' : 'a message must be a JSON object'));
      return;
    }
    const checked = JSONRPCMessageSchema.safeParse(parsed);
    if (!checked.success) {
      const id = (parsed as { id?: unknown }).id;
      // Only a request is answered: a bad notification or response has no one waiting on it.
      if ('method' in parsed && (typeof id === 'string' || typeof id === 'number')) {
        void this.write(errorReply(id, -32600, `not a JSON-RPC 2.0 request: ${checked.error.issues[0]?.message ?? 'invalid envelope'}`));
      } else if (!('method' in parsed) && !('result' in parsed) && !('error' in parsed)) {
        void this.write(errorReply(null, -32600, 'a message must be a request, a notification or a response'));
      }
      return;
    }
    this.onmessage?.(checked.data);
  }

  private write(message: object): Promise<void> {
    if (this.stdout.destroyed || this.stdout.writableEnded) return Promise.resolve();
    return new Promise((resolve) => {
      if (this.stdout.write(`${JSON.stringify(message)}\n`)) return resolve();
      // A host that went away never drains: its close ends the wait too.
      const done = (): void => {
        this.stdout.off('drain', done);
        this.stdout.off('close', done);
        resolve();
      };
      this.stdout.once('drain', done);
      this.stdout.once('close', done);
    });
  }
}

function errorReply(id: string | number | null, code: number, message: string): object {
  return { jsonrpc: '2.0', id, error: { code, message } };
}
