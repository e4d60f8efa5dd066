/**
 * The unix-socket listener: a private directory (0700, ours), a 0600 socket, a stale socket
 * removed only when nothing answers on it, and on close the socket removed only if it is still
 * ours (a displaced daemon never deletes its successor's).
 */
import { chmodSync, lstatSync, mkdirSync, statSync, unlinkSync, createServer } from '../../common/node-builtins.js';
import type { Server, Socket } from 'node:net';
import { dirname } from 'node:path';
import { StartupError } from '../ops/startup-error.js';
import { socketAccepts } from '../../common/socket-probe.js';

export class SocketInUseError extends StartupError {
  override readonly name = 'SocketInUseError';
}

/** Creates or checks the socket's directory: it must be ours and closed to group and others. */
export function securePrivateDir(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const stat = lstatSync(dir);
  if (!stat.isDirectory()) throw new StartupError(`${dir} is not a directory`);
  const uid = process.getuid?.();
  if (uid !== undefined && stat.uid !== uid) {
    throw new StartupError(`refusing socket directory ${dir}: owned by uid ${stat.uid}, not by this user (uid ${uid})`);
  }
  if ((stat.mode & 0o077) !== 0) {
    throw new StartupError(`refusing socket directory ${dir}: mode ${(stat.mode & 0o777).toString(8)} lets others in; run \`chmod 700 ${dir}\``);
  }
}


export async function listenUnix(
  path: string,
  onSocket: (socket: Socket) => void,
  /** Runs once the path is known to be free, before anyone can connect (e.g. writing the token). */
  beforeListen: () => void = () => undefined,
): Promise<{ server: Server; close(): Promise<void> }> {
  securePrivateDir(dirname(path));
  const existing = statOrUndefined(path);
  if (existing) {
    if (!existing.isSocket()) throw new SocketInUseError(`${path} exists and is not a socket; remove it or choose another --socket`);
    // Accepted but silent still means in use: a live rival's socket is never deleted.
    if (await socketAccepts(path, { whenSilent: true })) throw new SocketInUseError(`a daemon is already listening on ${path}`);
    unlinkSync(path);
  }
  beforeListen();
  const server = createServer({ allowHalfOpen: false }, onSocket);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(path, () => {
      server.off('error', reject);
      resolve();
    });
  });
  chmodSync(path, 0o600);
  const ours = statSync(path).ino;
  return {
    server,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        if (statOrUndefined(path)?.ino === ours) unlinkSync(path);
      }),
  };
}

function statOrUndefined(path: string): ReturnType<typeof statSync> | undefined {
  try {
    return lstatSync(path);
  } catch {
    return undefined;
  }
}
