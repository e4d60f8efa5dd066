/**
 * The floors: a bare vscode-jsonrpc echo on a unix socket (no validation, no service), served in
 * this process or by a separate process (bench/echo-server.ts), and a client for it. `writer`
 * picks the MessageWriter on both ends: `library` (vscode-jsonrpc's own, the floor as the issue
 * states it) or `frames` (the shared frame writer the client and daemon use), so the bench can
 * say what the library's writer costs. The raw echo (no library) is in raw-echo.ts.
 */
import { createConnection, type Socket } from 'node:net';
import { fileURLToPath } from 'node:url';
import { createMessageConnection, SocketMessageReader, SocketMessageWriter, type MessageConnection, type MessageWriter } from 'vscode-jsonrpc/node';
import { FrameWriter } from '../common/frame-writer.js';
import { floorServerProcess, type Cleanup } from './procs.js';
import { listenUnix, type ClosableServer } from './unix-server.js';

export const ECHO_METHOD = 'bench/echo';
/** Echo that first sends one small notification, like `subagent/start` goes out before its answer. */
export const ECHO_NOTIFY_METHOD = 'bench/echoAfterNote';
export const NOTE_METHOD = 'bench/note';

/** The echo's writers: vscode-jsonrpc's own, or the shared frame writer; `raw` has no library. */
export type EchoKind = 'library' | 'frames' | 'raw';

function writerFor(socket: Socket, kind: EchoKind): MessageWriter {
  return kind === 'frames' ? new FrameWriter(socket) : new SocketMessageWriter(socket);
}

/** Listens on `path`; every connection answers `bench/echo` with its params. */
export function listenEcho(path: string, kind: EchoKind = 'library'): Promise<ClosableServer> {
  return listenUnix(path, (socket) => {
    const connection = createMessageConnection(new SocketMessageReader(socket), writerFor(socket, kind));
    connection.onRequest(ECHO_METHOD, (params: unknown) => params);
    connection.onRequest(ECHO_NOTIFY_METHOD, (params: unknown) => {
      void connection.sendNotification(NOTE_METHOD, { runId: 'run_0123456789abcdef01234567', provider: 'echo', id: 'child', local: false });
      return params;
    });
    socket.on('close', () => connection.dispose());
    connection.listen();
  });
}

/** The echo server as its own Node process; resolves once it listens. */
export function echoServerProcess(cleanup: Cleanup, path: string, kind: EchoKind = 'library'): Promise<number> {
  return floorServerProcess(cleanup, fileURLToPath(new URL('./echo-server.js', import.meta.url)), [path, kind], 'echo server');
}

export interface EchoClient {
  readonly connection: MessageConnection;
  echo(params: unknown): Promise<unknown>;
  /** The server sends a notification, then answers. */
  echoAfterNote(params: unknown): Promise<unknown>;
  close(): void;
}

export async function echoClient(cleanup: Cleanup, path: string, kind: Exclude<EchoKind, 'raw'> = 'library'): Promise<EchoClient> {
  const socket = await new Promise<Socket>((resolve, reject) => {
    const s = createConnection(path);
    s.once('connect', () => resolve(s));
    s.once('error', reject);
  });
  socket.on('error', () => undefined);
  const connection = createMessageConnection(new SocketMessageReader(socket), writerFor(socket, kind));
  connection.onNotification(NOTE_METHOD, () => undefined);
  connection.listen();
  const close = (): void => {
    connection.dispose();
    socket.destroy();
  };
  cleanup.defer('close echo client', close);
  return {
    connection,
    echo: (params) => connection.sendRequest(ECHO_METHOD, params),
    echoAfterNote: (params) => connection.sendRequest(ECHO_NOTIFY_METHOD, params),
    close,
  };
}
