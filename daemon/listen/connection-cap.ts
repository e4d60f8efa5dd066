/**
 * Each listener's connection cap (the unix socket's and the loopback TCP listener's are separate,
 * so TCP clients can never take the unix socket's room): a new connection at the cap displaces
 * the oldest one that has not initialized, else it is refused with a closing frame saying why.
 */
import type { Socket } from 'node:net';
import type { Logger } from 'pino';
import { CLOSING_MESSAGE_PREFIX, encodeFrame, SUBAGENT_ERROR_CODES } from '../../protocol/index.js';
import type { ClientConnection } from '../connection/client-connection.js';

export type ListenerKind = 'unix' | 'tcp';

/**
 * Whether a listener at `cap` has room for one more: connections being closed do not count,
 * and at the cap the oldest one not yet initialized is closed to make room, so peers that never
 * say who they are cannot keep an owner with the token out. Full of initialized clients: no.
 */
export function makeRoom(ours: Set<ClientConnection>, cap: number, kind: ListenerKind, log: Logger): boolean {
  let live = 0;
  for (const connection of ours) if (connection.open) live += 1;
  if (live < cap) return true;
  for (const connection of ours) {
    if (!connection.open || connection.authenticated) continue;
    log.warn({ maxConnections: cap, listener: kind, conn: connection.id }, 'at the connection cap: closing the oldest connection not yet initialized');
    connection.evict(`displaced by a newer connection: the daemon serves at most ${cap} ${kind} connections, and this one had not initialized`);
    ours.delete(connection);
    return true;
  }
  return false;
}

/** Refuses a connection over its listener's cap, saying why, without reading from it. */
export function refuseOverCap(socket: Socket, kind: ListenerKind, cap: number, log: Logger): void {
  const reason = `the daemon serves its maximum of ${cap} ${kind} connections`;
  log.warn({ maxConnections: cap, listener: kind }, `connection refused: ${reason}`);
  const farewell = { jsonrpc: '2.0', id: null, error: { code: SUBAGENT_ERROR_CODES.OVERLOADED, message: `${CLOSING_MESSAGE_PREFIX}${reason}`, data: { code: 'OVERLOADED' } } };
  socket.end(encodeFrame(farewell));
  setTimeout(() => socket.destroy(), 1000).unref();
}
