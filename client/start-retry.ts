/**
 * A start whose answer never came, sent again. Every `subagent/start` carries an idempotency
 * key (the caller's, or a fresh one); when the connection is lost before the answer and the
 * service reconnects, the same start, under the same key, goes out on the new connection: the
 * daemon answers the run the first one made, if it made one, instead of starting another.
 *
 * Rules: only a loss the service recovers from is retried (DAEMON_UNAVAILABLE with a reconnect
 * under way); an abort, a refusal or a reconnect that gives up ends the start with its error.
 */
import { randomUUID } from 'node:crypto';
import type { ReconnectingConnection } from './reconnecting-connection.js';

/** The key a start goes out with: the caller's, else a fresh one (122 random bits). */
export function idempotencyKeyFor(given: string | undefined): string {
  return given ?? randomUUID();
}

/** Sends `send()` until it is answered, again after each reconnect that follows a loss. */
export async function untilAnswered<T>(connection: ReconnectingConnection, signal: AbortSignal | undefined, send: () => Promise<T>): Promise<T> {
  for (;;) {
    try {
      return await send();
    } catch (error) {
      if (signal?.aborted || !connection.mayRecover(error)) throw error;
      await connection.recovered();
      const gone = connection.unavailable();
      if (gone) throw gone;
      signal?.throwIfAborted();
    }
  }
}
