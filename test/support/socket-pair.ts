/**
 * Two ends of a real unix socket for writer tests: `client` writes, `server` reads, in a temp dir
 * that the suite removes. Each pair is closed after its test.
 */
import { createConnection, createServer, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import { afterEach } from 'vitest';
import { SocketMessageReader, type Message } from 'vscode-jsonrpc/node';
import { useTempDirs } from './scripted-fixtures.js';

export function useSocketPairs(): () => Promise<{ client: Socket; server: Socket }> {
  const tempDir = useTempDirs();
  const open: Array<() => void> = [];
  afterEach(() => {
    for (const close of open.splice(0)) close();
  });
  return async () => {
    const path = join(await tempDir(), 's.sock');
    let listener!: Server;
    const accepted = new Promise<Socket>((resolve) => {
      listener = createServer(resolve);
    });
    await new Promise<void>((resolve) => listener.listen(path, resolve));
    const client = createConnection(path);
    const server = await accepted;
    open.push(() => {
      client.destroy();
      server.destroy();
      listener.close();
    });
    return { client, server };
  };
}

/** The first `count` JSON-RPC messages the server end reads, parsed by vscode-jsonrpc's own reader. */
export function received(server: Socket, count: number): Promise<Message[]> {
  const reader = new SocketMessageReader(server);
  const messages: Message[] = [];
  return new Promise((resolve) => {
    reader.listen((message) => {
      messages.push(message);
      if (messages.length === count) resolve(messages);
    });
  });
}
