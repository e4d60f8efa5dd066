/**
 * The optional TCP listener, for clients that cannot reach the unix socket (containers on one
 * host). Loopback only, and every connection must present a bearer token kept in a file that
 * only this user can read: the port alone grants nothing.
 */
import { readFileSync, statSync, createServer } from '../../common/node-builtins.js';
import type { Socket } from 'node:net';
import { StartupError } from '../ops/startup-error.js';
import { isLoopback, listenOn } from './listen-on.js';

export function readPrivateToken(path: string): string {
  const stat = statSync(path);
  const uid = process.getuid?.();
  if (uid !== undefined && stat.uid !== uid) throw new StartupError(`refusing token file ${path}: owned by uid ${stat.uid}, not by this user`);
  if ((stat.mode & 0o077) !== 0) {
    throw new StartupError(`refusing token file ${path}: mode ${(stat.mode & 0o777).toString(8)} lets others read it; run \`chmod 600 ${path}\``);
  }
  const token = readFileSync(path, 'utf8').trim();
  if (token.length < 16) throw new StartupError(`token file ${path} holds fewer than 16 characters: use a long random token`);
  return token;
}

export async function listenLoopbackTcp(host: string, port: number, onSocket: (socket: Socket) => void): Promise<{ port: number; close(): Promise<void> }> {
  if (!isLoopback(host)) throw new StartupError(`refusing to listen on ${host}: the TCP listener binds loopback addresses only`);
  const server = createServer(onSocket);
  return {
    port: await listenOn(server, port, host),
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
