/**
 * Helpers for the load, fault and wire-fuzz tests: a real daemon whose state dir sits on tmpfs
 * when the machine has one (so per-turn fsyncs measure the daemon, not the disk), process
 * figures read from /proc, raw frames, scripted-model files, and small statistics.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startDaemon, type DaemonProcess } from './daemon-process.js';

/** Clock ticks per second for /proc/<pid>/stat (sysconf(_SC_CLK_TCK) is 100 on Linux). */
const CLK_TCK = 100;

export interface LoadDaemon extends DaemonProcess {
  readonly pid: number;
  /** Where the state dir lives (tmpfs when available). */
  readonly fastDir: string;
}

/** A real daemon (dist/cli/main.js daemon) with the fixture providers; state on /dev/shm if possible. */
export async function startLoadDaemon(config: Record<string, unknown> = {}): Promise<LoadDaemon> {
  // A configured real model must never be reached from these tests.
  for (const key of ['DEEPSEEK_API_KEY', 'OPENAI_API_KEY', 'OPENAI_BASE_URL', 'SUBAGENTD_MODEL']) delete process.env[key];
  const fastRoot = existsSync('/dev/shm') ? '/dev/shm' : undefined;
  const fastDir = fastRoot ? mkdtempSync(join(fastRoot, 'subagentd-load-')) : '';
  let daemon: DaemonProcess;
  try {
    // The last --state-dir wins (node:util parseArgs), so this overrides the helper's own.
    daemon = await startDaemon(config, fastRoot ? ['--state-dir', join(fastDir, 'state')] : []);
  } catch (error) {
    if (fastDir) rmSync(fastDir, { recursive: true, force: true });
    throw error;
  }
  const pid = daemon.proc.pid;
  if (pid === undefined) throw new Error('the daemon has no pid');
  return {
    ...daemon,
    pid,
    fastDir,
    async stop() {
      try {
        if (daemon.proc.signalCode === null && daemon.proc.exitCode === null) daemon.proc.kill('SIGCONT');
      } catch {
        // already gone
      }
      await daemon.stop();
      if (fastDir) rmSync(fastDir, { recursive: true, force: true });
    },
  };
}

/** User + system CPU time of a process, in milliseconds. */
export function cpuTimeMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command name (which may contain spaces) start at state (field 3).
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const utime = Number(fields[11]);
  const stime = Number(fields[12]);
  return ((utime + stime) * 1000) / CLK_TCK;
}

/**
 * The kernel's own peak RSS (VmHWM) of a process from now on: `5 > clear_refs` resets it to the
 * current RSS, so no short peak between two samples is missed. `stop()` reads it, in MiB.
 */
export function peakRssFrom(pid: number): { stop(): number } {
  writeFileSync(`/proc/${pid}/clear_refs`, '5');
  return {
    stop() {
      const match = /VmHWM:\s+(\d+)\s+kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
      if (!match) throw new Error(`no VmHWM for ${pid}`);
      return Number(match[1]) / 1024;
    },
  };
}

/** Resident set size of a process, in MiB. */
export function rssMiB(pid: number): number {
  const match = /VmRSS:\s+(\d+)\s+kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (!match) throw new Error(`no VmRSS for ${pid}`);
  return Number(match[1]) / 1024;
}

export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return !/^State:\s+Z/m.test(readFileSync(`/proc/${pid}/status`, 'utf8'));
  } catch {
    return false;
  }
}

/** One LSP-style frame around a message (or around raw body bytes). */
export function frame(message: unknown): Buffer {
  const body = Buffer.isBuffer(message) ? message : Buffer.from(typeof message === 'string' ? message : JSON.stringify(message));
  return Buffer.concat([Buffer.from(`Content-Length: ${body.length}\r\n\r\n`, 'ascii'), body]);
}

/** Writes a scripted-model file (format in daemon/agent/model/scripted.ts); returns its absolute path. */
export function writeScript(dir: string, name: string, script: { steps: unknown[] }): string {
  const path = join(dir, `${name}.json`);
  writeFileSync(path, JSON.stringify(script));
  return path;
}

export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[rank]!;
}

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Polls `probe` until it returns a value that passes `done`, or throws after `timeoutMs`. */
export async function pollUntil<T>(probe: () => Promise<T> | T, done: (value: T) => boolean, timeoutMs: number, what: string): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: T | undefined;
  for (let attempt = 0; attempt < 10_000; attempt++) {
    last = await probe();
    if (done(last)) return last;
    if (Date.now() > deadline) break;
    await sleep(25);
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}; last: ${JSON.stringify(last)?.slice(0, 500)}`);
}

/** Waits until the process has used ≤ `quietMs` of CPU over two 250 ms windows in a row (bounded). */
export async function waitCpuQuiet(pid: number, maxMs: number, quietMs = 10): Promise<boolean> {
  const deadline = Date.now() + maxMs;
  let calm = 0;
  let last = cpuTimeMs(pid);
  while (Date.now() < deadline) {
    await sleep(250);
    const now = cpuTimeMs(pid);
    calm = now - last <= quietMs ? calm + 1 : 0;
    last = now;
    if (calm >= 2) return true;
  }
  return false;
}

/** Runs clean-ups last first; one that fails is reported and does not stop the rest. */
export async function runCleanups(cleanups: Array<() => unknown>): Promise<void> {
  for (const cleanup of cleanups.reverse()) {
    try {
      await cleanup();
    } catch (error) {
      console.error('cleanup failed', error);
    }
  }
}
