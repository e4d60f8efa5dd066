/**
 * One daemon per state dir: a lock file created exclusively, holding the owner's pid. A lock whose
 * pid is gone is taken over; a live one refuses the second daemon with its pid named.
 */
import { readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import { StartupError } from './startup-error.js';

export class StateDirLockedError extends StartupError {
  override readonly name = 'StateDirLockedError';
}

export function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

export function acquireStateLock(path: string): () => void {
  const body = JSON.stringify({ pid: process.pid, startedAt: new Date().toISOString() });
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      writeFileSync(path, body, { flag: 'wx', mode: 0o600 });
      return () => {
        if (readOwner(path) === process.pid) unlinkSync(path);
      };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      const owner = readOwner(path);
      if (owner !== undefined && owner !== process.pid && pidAlive(owner)) {
        throw new StateDirLockedError(`state dir is in use by daemon pid ${owner} (lock ${path})`);
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

function readOwner(path: string): number | undefined {
  try {
    const pid = (JSON.parse(readFileSync(path, 'utf8')) as { pid?: unknown }).pid;
    return typeof pid === 'number' ? pid : undefined;
  } catch {
    return undefined;
  }
}
