/**
 * Binding a TCP server (net or http) to one address: the one home for the TCP listener, the web
 * view and the metrics endpoint, so they agree on what loopback means and on how a bind fails.
 */
import { isIP } from '../../common/node-builtins.js';
import type { Server } from 'node:net';

/** localhost, ::1 and 127.0.0.0/8: the addresses no other machine can reach. */
export function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || (isIP(host) === 4 && host.startsWith('127.'));
}

/**
 * Listens on `host:port` and resolves with the bound port (the kernel's choice when `port` is 0),
 * or rejects with the bind's error (EADDRINUSE, EACCES) instead of leaving it unhandled.
 */
export async function listenOn(server: Server, port: number, host: string): Promise<number> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address();
  return typeof address === 'object' && address ? address.port : port;
}
