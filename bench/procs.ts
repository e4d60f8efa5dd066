/**
 * Reading another process's memory and CPU from /proc (Linux), a sampler for peak RSS, and the
 * cleanup stack every benchmark registers its processes, sockets and temp dirs with.
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** Resident set size of a process in bytes (VmRSS), or NaN when it cannot be read. */
export function rssOf(pid: number): number {
  try {
    const match = /^VmRSS:\s+(\d+)\s+kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return match ? Number(match[1]) * 1024 : Number.NaN;
  } catch {
    return Number.NaN;
  }
}

/**
 * The anonymous part of a process's RSS in bytes (RssAnon: its heap, stacks and malloc), or NaN.
 * The rest is file-backed (RssFile: the node binary's and libraries' pages it has touched), which
 * every node process on the machine shares but each one's RSS counts in full.
 */
export function anonRssOf(pid: number): number {
  try {
    const match = /^RssAnon:\s+(\d+)\s+kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return match ? Number(match[1]) * 1024 : Number.NaN;
  } catch {
    return Number.NaN;
  }
}

/** Clock ticks per second for /proc/PID/stat times; 100 on every mainstream Linux build. */
const CLK_TCK = 100;

/** User + system CPU seconds a process has used so far. */
export function cpuSecondsOf(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name (which may contain spaces) start after the last ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // utime and stime are fields 14 and 15 of the whole line: 12 and 13 after the state field.
    return (Number(fields[11]) + Number(fields[12])) / CLK_TCK;
  } catch {
    return Number.NaN;
  }
}

/** This process's CPU seconds (user + system). */
export function ownCpuSeconds(): number {
  const usage = process.cpuUsage();
  return (usage.user + usage.system) / 1e6;
}

/** Samples a process's RSS every `intervalMs` and keeps the maximum. */
export class RssSampler {
  private timer: NodeJS.Timeout | undefined;
  peak: number;

  constructor(
    private readonly pid: number,
    intervalMs = 20,
  ) {
    this.peak = rssOf(pid);
    this.timer = setInterval(() => this.sample(), intervalMs);
  }

  sample(): number {
    const now = rssOf(this.pid);
    if (Number.isFinite(now) && !(now <= this.peak)) this.peak = now;
    return now;
  }

  stop(): number {
    clearInterval(this.timer);
    this.timer = undefined;
    this.sample();
    return this.peak;
  }
}

/** LIFO cleanup: each benchmark defers the teardown of what it created, in creation order. */
export class Cleanup {
  private readonly steps: Array<{ what: string; run: () => unknown }> = [];

  defer(what: string, run: () => unknown): void {
    this.steps.push({ what, run });
  }

  tempDir(prefix = 'subagentd-bench-'): string {
    const dir = mkdtempSync(join(tmpdir(), prefix));
    this.defer(`remove ${dir}`, () => rmSync(dir, { recursive: true, force: true }));
    return dir;
  }

  async runAll(): Promise<void> {
    while (this.steps.length > 0) {
      const step = this.steps.pop()!;
      try {
        await withTimeout(Promise.resolve().then(step.run), 15_000, step.what);
      } catch (error) {
        console.error(`cleanup: ${step.what} failed: ${(error as Error).message}`);
      }
    }
  }
}

export function withTimeout<T>(promise: Promise<T>, timeoutMs: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: timed out after ${timeoutMs} ms`)), timeoutMs);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/**
 * A floor's server as its own Node process (`node SCRIPT ARGS…`, which prints "listening" once it
 * serves); resolves with its pid then. Stopped with SIGTERM at cleanup.
 */
export async function floorServerProcess(cleanup: Cleanup, script: string, args: readonly string[], what: string): Promise<number> {
  const child = spawn(process.execPath, [script, ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  cleanup.defer(`stop ${what} pid ${child.pid}`, async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    await exited;
  });
  await withTimeout(
    new Promise<void>((resolve, reject) => {
      child.stdout.on('data', (chunk: Buffer) => {
        if (chunk.toString().includes('listening')) resolve();
      });
      child.once('exit', (code) => reject(new Error(`${what} exited with ${code}`)));
    }),
    10_000,
    `${what} start`,
  );
  return child.pid!;
}

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Resolves at the next turn of the event loop after I/O (lets queued work drain). */
export const tick = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));
