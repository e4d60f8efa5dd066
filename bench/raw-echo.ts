/**
 * The transport floor: JSON-RPC echo with no library at all. Both ends frame Content-Length by
 * hand, parse each body once and answer in the same turn, one socket write per message. What
 * vscode-jsonrpc adds on top of this (its reader's queue, one dispatch per event-loop turn, its
 * promises) is the difference between this floor and the library's echo.
 */
import { createConnection, type Socket } from 'node:net';
import { frameOf } from '../protocol/framing.js';
import { listenUnix, type ClosableServer } from './unix-server.js';

/** Calls `onMessage` with each whole frame's parsed body, in order. */
export function onFrames(socket: Socket, onMessage: (message: { id?: number; method?: string; params?: unknown; result?: unknown }) => void): void {
  let buffer: Buffer = Buffer.alloc(0);
  socket.on('data', (chunk: Buffer) => {
    buffer = buffer.length === 0 ? chunk : Buffer.concat([buffer, chunk]);
    for (;;) {
      const end = buffer.indexOf('\r\n\r\n');
      if (end < 0) return;
      const match = /Content-Length: (\d+)/i.exec(buffer.toString('ascii', 0, end));
      if (!match) throw new Error('raw echo: a frame without Content-Length');
      const start = end + 4;
      const length = Number(match[1]);
      if (buffer.length < start + length) return;
      onMessage(JSON.parse(buffer.toString('utf8', start, start + length)) as never);
      buffer = buffer.subarray(start + length);
    }
  });
}

/** Listens on `path`; every request is answered with its params as the result. */
export function listenRawEcho(path: string): Promise<ClosableServer> {
  return listenUnix(path, (socket) =>
    onFrames(socket, (message) => {
      if (message.id !== undefined) socket.write(frameOf({ jsonrpc: '2.0', id: message.id, result: message.params ?? null }).text);
    }),
  );
}

export interface RawEchoClient {
  echo(params: unknown): Promise<unknown>;
  close(): void;
}

export async function rawEchoClient(path: string): Promise<RawEchoClient> {
  const socket = await new Promise<Socket>((resolve, reject) => {
    const s = createConnection(path);
    s.once('connect', () => resolve(s));
    s.once('error', reject);
  });
  socket.on('error', () => undefined);
  const waiting = new Map<number, (result: unknown) => void>();
  let nextId = 1;
  onFrames(socket, (message) => {
    if (message.id === undefined) return;
    waiting.get(message.id)?.(message.result);
    waiting.delete(message.id);
  });
  return {
    echo: (params) =>
      new Promise((resolve) => {
        const id = nextId++;
        waiting.set(id, resolve);
        socket.write(frameOf({ jsonrpc: '2.0', id, method: 'bench/echo', params }).text);
      }),
    close: () => socket.destroy(),
  };
}
