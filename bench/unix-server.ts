/** A unix-socket server for the floors: listens, hands each connection over, and closes them all. */
import { createServer, type Socket } from 'node:net';

export interface ClosableServer {
  close(): Promise<void>;
}

/** Listens on `path`; `close` destroys every open connection, then stops listening. */
export async function listenUnix(path: string, onSocket: (socket: Socket) => void): Promise<ClosableServer> {
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => undefined);
    socket.on('close', () => sockets.delete(socket));
    onSocket(socket);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(path, () => resolve());
  });
  return {
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}
