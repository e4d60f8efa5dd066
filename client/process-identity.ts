/**
 * A process named by pid plus its start time (field 22 of /proc/<pid>/stat, in clock ticks since
 * boot), so a pid the kernel has since reused is never mistaken for the process we watched. Where
 * /proc cannot show the process (another pid namespace, not Linux), liveness is unknown.
 */
import { readFileSync } from 'node:fs';

export interface ProcessIdentity {
  readonly pid: number;
  /** undefined when /proc did not show the process. */
  readonly startTicks: string | undefined;
}

function readStartTicks(pid: number): { ticks: string; zombie: boolean } | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so count from the last ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ticks = fields[19];
    return ticks === undefined ? undefined : { ticks, zombie: fields[0] === 'Z' };
  } catch {
    return undefined;
  }
}

export function identifyProcess(pid: number): ProcessIdentity {
  return { pid, startTicks: readStartTicks(pid)?.ticks };
}

/** Has this very process exited (a zombie counts as exited)? undefined when it cannot be told. */
export function processExited(process: ProcessIdentity): boolean | undefined {
  if (process.startTicks === undefined) return undefined;
  const now = readStartTicks(process.pid);
  return now === undefined || now.zombie || now.ticks !== process.startTicks;
}
