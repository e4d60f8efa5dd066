/**
 * The daemon process's last line of defence: handlers for `unhandledRejection` and
 * `uncaughtException`. Every path that peer input can reach handles its own errors; these exist
 * so that a bug nobody has found yet costs a log line, not every client's work.
 *
 * The choice, kept simple:
 *  - an unhandled rejection is logged with its stack and the daemon keeps serving: a promise that
 *    nobody awaited unwound no synchronous code, so no state was left half-changed;
 *  - an uncaught exception that is a socket's own error (EPIPE, ECONNRESET, a write after end)
 *    concerns one connection, which its close handler removes: logged, and the daemon serves on;
 *  - any other uncaught exception unwound a stack midway through unknown work: the daemon logs the
 *    cause, closes in order (children cancelled, socket and lock released) and exits 70
 *    (EX_SOFTWARE), within `exitDeadlineMs` even if closing hangs.
 * Tests grep the log for the two messages below: the fuzzers assert neither ever appears.
 */
import type { Logger } from 'pino';

export const UNHANDLED_REJECTION = 'unhandled rejection (daemon keeps serving)';
export const UNCAUGHT_EXCEPTION = 'uncaught exception';

/** Errors that belong to one peer's socket, never to the daemon's own state. */
const PEER_SOCKET_ERRORS = new Set(['EPIPE', 'ECONNRESET', 'ECONNABORTED', 'ERR_STREAM_DESTROYED', 'ERR_STREAM_WRITE_AFTER_END']);

export interface ProcessGuardOptions {
  readonly log: Logger;
  /** Orderly shutdown for a fatal exception. */
  readonly close: () => Promise<void>;
  readonly exitDeadlineMs?: number;
}

/** Installs both handlers; returns a function that removes them. */
export function installProcessGuards({ log, close, exitDeadlineMs = 5000 }: ProcessGuardOptions): () => void {
  let exiting = false;
  const onRejection = (reason: unknown): void => {
    log.error({ err: reason }, UNHANDLED_REJECTION);
  };
  const onException = (error: Error): void => {
    const code = (error as NodeJS.ErrnoException).code;
    if (code !== undefined && PEER_SOCKET_ERRORS.has(code)) {
      log.error({ err: error, fatal: false }, `${UNCAUGHT_EXCEPTION} from a peer socket (daemon keeps serving)`);
      return;
    }
    log.fatal({ err: error, fatal: true }, `${UNCAUGHT_EXCEPTION}: closing the daemon`);
    if (exiting) return;
    exiting = true;
    process.exitCode = 70;
    setTimeout(() => process.exit(70), exitDeadlineMs).unref();
    void close().finally(() => {
      log.flush?.();
      process.exit(70);
    });
  };
  process.on('unhandledRejection', onRejection);
  process.on('uncaughtException', onException);
  return () => {
    process.off('unhandledRejection', onRejection);
    process.off('uncaughtException', onException);
  };
}
