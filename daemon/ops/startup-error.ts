/** A reason the daemon will not start that the person starting it can fix (the message says how). */
import { describeWriteFault } from '../store/state-faults.js';

export class StartupError extends Error {
  override readonly name: string = 'StartupError';
}

/**
 * A file-system failure while preparing the state dir (read-only, full, not ours) as ONE line
 * naming the path and the errno; the start-up printers show a StartupError without a stack.
 * `where` names the file when the error does not (a failed write(2) carries no path).
 */
export function startupFailure(error: unknown, where: string): unknown {
  if (error instanceof StartupError) return error;
  const errno = error as NodeJS.ErrnoException | undefined;
  if (typeof errno?.code !== 'string' || typeof errno.syscall !== 'string') return error;
  return new StartupError(`the daemon cannot use its state dir: ${describeWriteFault(errno.path ?? where, error)}`);
}
