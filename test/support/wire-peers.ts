/**
 * Raw peers over both of the daemon's transports (unix socket and loopback TCP), and what the
 * network fault and fuzz tests check on a daemon afterwards: it is alive and it logged no
 * unhandled rejection or uncaught exception (those go to stderr at error level).
 */
import { writeFileSync } from 'node:fs';
import { createConnection, createServer, type Socket } from 'node:net';
import { join } from 'node:path';
import { UNCAUGHT_EXCEPTION, UNHANDLED_REJECTION } from '../../daemon/ops/process-guards.js';
import { PROTOCOL_VERSION } from '../../protocol/index.js';
import { RawPeer } from './raw-peer.js';

export type Transport = 'unix' | 'tcp';

export const TCP_TOKEN = 'a-long-random-bearer-token-for-wire-tests';

export function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/** A `tcp` config section on a free port, with the token file written in `dir` (0600). */
export async function tcpConfig(dir: string, extra: Record<string, unknown> = {}): Promise<{ port: number; tokenFile: string } & Record<string, unknown>> {
  const tokenFile = join(dir, 'tcp.token');
  writeFileSync(tokenFile, `${TCP_TOKEN}\n`, { mode: 0o600 });
  return { port: await freePort(), tokenFile, ...extra };
}

export interface WireTarget {
  readonly socket: string;
  readonly port: number;
}

export function openSocket(target: WireTarget, transport: Transport): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = transport === 'unix' ? createConnection(target.socket) : createConnection(target.port, '127.0.0.1');
    socket.once('connect', () => resolve(socket));
    socket.once('error', reject);
  });
}

export async function rawPeer(target: WireTarget, transport: Transport): Promise<RawPeer> {
  return RawPeer.fromSocket(await openSocket(target, transport));
}

/** A raw peer that has completed `initialize` with the transport's token. */
export async function initializedPeer(target: WireTarget, transport: Transport, name = 'raw'): Promise<RawPeer> {
  if (transport === 'unix') return RawPeer.initialized(target.socket, name);
  const peer = await rawPeer(target, transport);
  const reply = await peer.request('initialize', { protocolVersion: PROTOCOL_VERSION, clientInfo: { name, version: '0' }, token: TCP_TOKEN });
  if (reply.error) throw new Error(`initialize over tcp failed: ${reply.error.message}`);
  return peer;
}

/** Lines of the daemon's stderr that report a process-level fault. */
export function processFaults(stderr: string): string[] {
  return stderr.split('\n').filter((line) => line.includes(UNHANDLED_REJECTION) || line.includes(UNCAUGHT_EXCEPTION));
}
