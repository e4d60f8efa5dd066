/**
 * A process named by pid PLUS its start time, so a recycled pid is never mistaken for the process
 * we recorded. The start time is field 22 of `/proc/<pid>/stat` (clock ticks since boot): it never
 * changes for a process and two processes with the same pid cannot share it. A zombie has exited:
 * it holds nothing and does nothing. Without /proc (not Linux, another pid namespace) the start
 * time is unknown and identity falls back to "pid alive". One home for reading /proc/<pid>/stat:
 * the daemon's lock and agent records, the agent-group reaper and the client's wait for a
 * stopped daemon.
 */
import { readdirSync, readFileSync } from './node-builtins.js';

export interface ProcessIdentity {
  readonly pid: number;
  /** Field 22 of /proc/<pid>/stat; absent when it could not be read (or an old record). */
  readonly startTime?: string;
}

interface Stat {
  readonly startTime: string;
  /** Exited, waiting to be reaped ('Z'), or dead ('X'): it holds nothing and does nothing. */
  readonly zombie: boolean;
  /** Its process group. */
  readonly pgrp: number;
}

function readStat(pid: number | string): Stat | undefined {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
  // "pid (comm) state ppid pgrp …": comm may hold spaces or ')', so count from the last ')'.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const startTime = fields[22 - 3];
  if (startTime === undefined) return undefined;
  return { startTime, zombie: fields[0] === 'Z' || fields[0] === 'X', pgrp: Number(fields[5 - 3]) };
}

/** Live (not zombie) processes whose process group is `pgid`, from /proc; none without /proc. */
export function groupMembers(pgid: number): number[] {
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return [];
  }
  return entries.filter((entry) => /^\d+$/.test(entry)).filter((entry) => {
    const stat = readStat(entry); // undefined: exited meanwhile
    return stat !== undefined && stat.pgrp === pgid && !stat.zombie;
  }).map(Number);
}

/** The start time of `pid` (a zombie's too: its process group may outlive it), or undefined when there is no such process or no /proc. */
export function processStartTime(pid: number): string | undefined {
  return readStat(pid)?.startTime;
}

export function identify(pid: number): ProcessIdentity {
  const startTime = readStat(pid)?.startTime;
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
  const now = readStat(recorded.pid);
  if (now === undefined) return procMounted() ? false : pidAlive(recorded.pid);
  return !now.zombie && now.startTime === recorded.startTime;
}

/** Has this very process exited? undefined when that cannot be told (no start time on record). */
export function processExited(recorded: ProcessIdentity): boolean | undefined {
  return recorded.startTime === undefined ? undefined : !stillRunning(recorded);
}

let mounted: boolean | undefined;
function procMounted(): boolean {
  mounted ??= readStat(process.pid) !== undefined;
  return mounted;
}
