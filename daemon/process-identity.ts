/**
 * A process named by pid PLUS its start time, so a recycled pid is never mistaken for the
 * process we recorded. The start time is field 22 of `/proc/<pid>/stat` (clock ticks since
 * boot): it never changes for a process and two processes with the same pid cannot share it.
 *
 * Without /proc (not Linux) the start time is unknown and identity falls back to "pid alive".
 */
import { readFileSync } from 'node:fs';

export interface ProcessIdentity {
  readonly pid: number;
  /** Field 22 of /proc/<pid>/stat; absent when it could not be read (or an old record). */
  readonly startTime?: string;
}

/** The start time of `pid`, or undefined when the process does not exist (or /proc is absent). */
export function processStartTime(pid: number): string | undefined {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
  // The command name (field 2) is in parentheses and may hold spaces or ')': split after the last one.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return fields[22 - 3];
}

export function identify(pid: number): ProcessIdentity {
  const startTime = processStartTime(pid);
  return startTime === undefined ? { pid } : { pid, startTime };
}

/** The identity of this process. */
export function selfIdentity(): ProcessIdentity {
  return identify(process.pid);
}

export function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Is the recorded process still the one running under its pid? With a start time on record,
 * only a process with that same start time counts; without one (an old record, or no /proc),
 * any live process with the pid does.
 */
export function stillRunning(recorded: ProcessIdentity): boolean {
  if (!Number.isSafeInteger(recorded.pid) || recorded.pid <= 0) return false;
  if (recorded.startTime === undefined) return pidAlive(recorded.pid);
  const now = processStartTime(recorded.pid);
  if (now === undefined) return existsProc() ? false : pidAlive(recorded.pid);
  return now === recorded.startTime;
}

let procMounted: boolean | undefined;
function existsProc(): boolean {
  procMounted ??= processStartTime(process.pid) !== undefined;
  return procMounted;
}
