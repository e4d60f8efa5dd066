/**
 * One daemon per state dir: a lock file created exclusively, naming its owner by pid and process
 * start time (see process-identity.ts). A lock whose owner is no longer running — the pid is gone,
 * or now belongs to a process with another start time — is taken over; a live owner refuses the
 * second daemon with its pid named. An old lock without a start time is judged by its pid alone.
 */
import { readFileSync, unlinkSync, writeFileSync } from '../../common/node-builtins.js';
import { selfIdentity, stillRunning, type ProcessIdentity } from '../../common/process-identity.js';
import { isoTime } from '../../common/iso-time.js';
import { StartupError, startupFailure } from './startup-error.js';

export class StateDirLockedError extends StartupError {
  override readonly name = 'StateDirLockedError';
}

export function acquireStateLock(path: string): () => void {
  const self = selfIdentity();
  const body = JSON.stringify({ ...self, startedAt: isoTime() });
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      writeFileSync(path, body, { flag: 'wx', mode: 0o600 });
      return () => {
        if (readOwner(path)?.pid === process.pid) unlinkSync(path);
      };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') {
        // A full disk creates the file and then fails the write: leave no empty lock behind.
        if ((error as NodeJS.ErrnoException).syscall === 'write') unlinkQuietly(path);
        throw startupFailure(error, path);
      }
      const owner = readOwner(path);
      if (owner !== undefined && owner.pid !== process.pid && stillRunning(owner)) {
        throw new StateDirLockedError(`state dir is in use by daemon pid ${owner.pid} (lock ${path})`);
      }
      try {
        unlinkSync(path); // stale: its daemon is gone
      } catch {
        // another starter removed it first; retry
      }
    }
  }
  throw new StateDirLockedError(`could not take the state-dir lock ${path}: another daemon is starting`);
}

/** The lock's owner; undefined for an unreadable lock (a crash mid-write), which counts as stale. */
export function readOwner(path: string): ProcessIdentity | undefined {
  try {
    const { pid, startTime } = JSON.parse(readFileSync(path, 'utf8')) as { pid?: unknown; startTime?: unknown };
    if (typeof pid !== 'number') return undefined;
    return typeof startTime === 'string' ? { pid, startTime } : { pid };
  } catch {
    return undefined;
  }
}

function unlinkQuietly(path: string): void {
  try {
    unlinkSync(path);
  } catch {
    // nothing was created
  }
}
