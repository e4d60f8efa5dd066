/**
 * Does something accept a connection on this unix socket? One probe for the daemon, the client,
 * the CLI, the tests and the benchmarks. A connect that neither succeeds nor fails within
 * `timeoutMs` (a wedged listener, a full backlog) is answered by `whenSilent`: the daemon counts
 * such a socket as in use (it must never delete a live rival's socket), a client as not answering
 * (it goes on to start a daemon, whose own probe then refuses the path).
 */
import { createConnection } from './node-builtins.js';

export function socketAccepts(path: string, options: { readonly timeoutMs?: number; readonly whenSilent?: boolean } = {}): Promise<boolean> {
  const { timeoutMs = 1000, whenSilent = false } = options;
  return new Promise((resolve) => {
    const socket = createConnection(path);
    const done = (accepted: boolean): void => {
      clearTimeout(timer);
      socket.destroy();
      resolve(accepted);
    };
    const timer = setTimeout(() => done(whenSilent), timeoutMs);
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}
