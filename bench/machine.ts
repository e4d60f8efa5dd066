/** What the figures were measured on. */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { availableParallelism, cpus, loadavg, totalmem } from 'node:os';

export interface Machine {
  readonly nproc: number;
  readonly cpu: string;
  readonly node: string;
  readonly memory: string;
  readonly date: string;
  /** The checked-out commit (with "+ uncommitted changes" when the tree differs), or "unknown". */
  readonly commit: string;
  readonly loadStart: string;
  /** The CPU counters at the start, for `stealSince`. */
  readonly ticksStart: CpuTicks | undefined;
}

/** All CPUs' time since boot in clock ticks: the whole, and what the hypervisor gave to other guests while this one wanted it. */
export interface CpuTicks {
  readonly total: number;
  readonly steal: number;
}

/** From /proc/stat's "cpu" line; undefined where there is none (not Linux). */
export function cpuTicks(): CpuTicks | undefined {
  try {
    const fields = /^cpu +(.*)$/m.exec(readFileSync('/proc/stat', 'utf8'))![1]!.split(/ +/).map(Number);
    // user nice system idle iowait irq softirq steal (guest time is already inside user and nice)
    return { total: fields.slice(0, 8).reduce((a, b) => a + b, 0), steal: fields[7] ?? 0 };
  } catch {
    return undefined;
  }
}

/**
 * The share of CPU time stolen since `start` ("steal": on a VM, time a vCPU was ready but the
 * host ran something else). Beside the load average it tells a slow spell of the host from a busy
 * guest: load counts this machine's own work, steal what the host's other tenants took.
 */
export function stealSince(start: CpuTicks | undefined): string {
  const now = cpuTicks();
  if (!start || !now || now.total <= start.total) return 'unknown';
  return `${(((now.steal - start.steal) / (now.total - start.total)) * 100).toFixed(1)} %`;
}

export const formatLoad = (): string => loadavg().map((x) => x.toFixed(2)).join(' / ');

export function machine(): Machine {
  return {
    nproc: availableParallelism(),
    cpu: cpus()[0]?.model.trim() ?? 'unknown',
    node: process.version,
    memory: `${(totalmem() / 1024 ** 3).toFixed(1)} GiB`,
    date: new Date().toISOString(),
    commit: checkedOutCommit(),
    loadStart: formatLoad(),
    ticksStart: cpuTicks(),
  };
}

function checkedOutCommit(): string {
  try {
    const git = (...args: string[]): string => execFileSync('git', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    const dirty = git('status', '--porcelain', '--untracked-files=no') !== '';
    return `${git('rev-parse', '--short=12', 'HEAD')}${dirty ? ' + uncommitted changes' : ''}`;
  } catch {
    return 'unknown';
  }
}
