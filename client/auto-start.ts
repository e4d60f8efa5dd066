/**
 * Starting the shared daemon when none answers (the gopls `-remote=auto` pattern), safely when
 * many clients try at once: one start lock beside the socket, judged by its holder's liveness
 * and age (never by a pid alone, which may be reused), a bounded wait for the socket, and a
 * bounded number of automatic restarts of a daemon that keeps dying (the crash-loop guard: for
 * auto-start only; an explicit `start` or `restart` always tries). A start that fails says why:
 * the daemon's exit code, the last lines it wrote to daemon.stderr.log, and what to do next.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, openSync, closeSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { SubagentError } from '../protocol/index.js';
import { defaultSocketPath } from '../common/socket-path.js';
import { selfIdentity, stillRunning } from '../common/process-identity.js';
import { socketAccepts } from '../common/socket-probe.js';
import { defaultDaemonCliPath } from './package-paths.js';

export interface AutoStartOptions {
  /** Default: `defaultSocketPath()`. */
  readonly socket?: string;
  readonly stateDir?: string;
  readonly config?: string;
  /** The daemon CLI to run (default: this package's). */
  readonly cliPath?: string;
  /** How long to wait for the new daemon to answer. Default 15 s. */
  readonly readyTimeoutMs?: number;
  /** Daemon starts allowed within `crashWindowMs` before giving up. Default 3 in 60 s. */
  readonly maxStarts?: number;
  readonly crashWindowMs?: number;
  readonly env?: NodeJS.ProcessEnv;
  /** A person asked for this start (`start`, `restart`): the crash-loop guard does not apply. */
  readonly explicit?: boolean;
}

/** Lines of daemon.stderr.log shown when a start fails. */
const LOG_TAIL_LINES = 10;

/** A daemon that could not be started: DAEMON_UNAVAILABLE, with its exit and its last words. */
export class DaemonStartError extends SubagentError {
  constructor(
    message: string,
    readonly logPath: string,
    readonly exit: string | undefined,
    readonly logTail: readonly string[],
  ) {
    super('DAEMON_UNAVAILABLE', message);
  }

  /** The fields `--json` adds to the error object. */
  report(): Record<string, unknown> {
    return { log: this.logPath, logTail: this.logTail, ...(this.exit !== undefined && { exit: this.exit }) };
  }
}

/** The last lines the daemon wrote to its stderr log, after `offset` (this start's own lines). */
function logTail(path: string, offset: number): string[] {
  try {
    const text = readFileSync(path).subarray(offset).toString('utf8');
    return text.split('\n').filter((line) => line.trim() !== '').slice(-LOG_TAIL_LINES);
  } catch {
    return [];
  }
}

function startFailure(what: string, logPath: string, offset: number, exit: string | undefined, next: string): DaemonStartError {
  const tail = logTail(logPath, offset);
  const shown = tail.length > 0 ? `\n${tail.map((line) => `  | ${line}`).join('\n')}` : ' (it wrote nothing)';
  return new DaemonStartError(`${what}; its last words, from ${logPath}:${shown}\n${next}`, logPath, exit, tail);
}

/** One line for a state or socket dir the daemon cannot write (read-only, full, not ours). */
function unwritable(path: string, error: unknown): SubagentError {
  const e = error as NodeJS.ErrnoException;
  return new SubagentError('DAEMON_UNAVAILABLE', `cannot start the daemon: ${path} is not writable (${e.code ?? 'error'}: ${e.message.replace(/^\w+: /, '')}); choose another --state-dir or free it`);
}

/** A start lock older than this is abandoned, whatever its pid says. */
const LOCK_STALE_MS = 30_000;


const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Takes the start lock, or returns false when a live, recent starter holds it. */
function tryLock(path: string): boolean {
  try {
    writeFileSync(path, JSON.stringify({ ...selfIdentity(), at: Date.now() }), { flag: 'wx', mode: 0o600 });
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
  }
  let holder: { pid?: number; startTime?: string; at?: number } = {};
  try {
    holder = JSON.parse(readFileSync(path, 'utf8')) as typeof holder;
  } catch {
    // unreadable: judge by the file's age alone
  }
  const age = Date.now() - (holder.at ?? statMtime(path));
  // Judged by pid and start time: a recycled pid is not the starter that wrote the lock.
  const live = typeof holder.pid === 'number' && stillRunning({ pid: holder.pid, ...(holder.startTime !== undefined && { startTime: holder.startTime }) });
  if (live && age < LOCK_STALE_MS) return false;
  rmSync(path, { force: true });
  return tryLock(path);
}

function statMtime(path: string): number {
  try {
    return statSync(path).mtimeMs;
  } catch {
    return 0;
  }
}

/**
 * Remembers recent daemon starts that did not come up, so a daemon that dies at once is not
 * restarted forever. A start that reaches listening is forgotten (see `forgetStart`).
 */
function recordStart(path: string, windowMs: number, max: number, logPath: string, explicit: boolean): number {
  let starts: number[] = [];
  try {
    starts = (JSON.parse(readFileSync(path, 'utf8')) as number[]).filter((t) => Date.now() - t < windowMs);
  } catch {
    // first start
  }
  if (starts.length >= max && !explicit) {
    throw startFailure(
      `the daemon was started ${starts.length} times in the last ${Math.round(windowMs / 1000)} s and did not stay up; not starting it again automatically`,
      logPath,
      0,
      undefined,
      'fix the cause above, then run `subagentd start` (an explicit start always tries)',
    );
  }
  const at = Date.now();
  writeFileSync(path, JSON.stringify([...starts, at]), { mode: 0o600 });
  return at;
}

function forgetStart(path: string, at: number): void {
  try {
    const starts = (JSON.parse(readFileSync(path, 'utf8')) as number[]).filter((t) => t !== at);
    writeFileSync(path, JSON.stringify(starts), { mode: 0o600 });
  } catch {
    // nothing recorded
  }
}

/**
 * Makes sure a daemon answers on `socket`, starting a detached one if none does. Resolves once
 * it accepts connections; rejects with DAEMON_UNAVAILABLE saying why and where the log is.
 */
export async function ensureDaemon(given: AutoStartOptions = {}): Promise<'running' | 'started'> {
  const options = { ...given, socket: given.socket ?? defaultSocketPath() };
  if (await socketAccepts(options.socket)) return 'running';
  const dir = dirname(options.socket);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const lockPath = join(dir, 'start.lock');
  const readyBy = Date.now() + (options.readyTimeoutMs ?? 15_000);
  // Another client may be starting it: wait for its daemon instead of racing it.
  while (!tryLock(lockPath)) {
    if (await socketAccepts(options.socket)) return 'running';
    if (Date.now() > readyBy) throw new SubagentError('DAEMON_UNAVAILABLE', `another client is starting the daemon at ${options.socket}, and it did not come up in time`);
    await sleep(100);
  }
  try {
    if (await socketAccepts(options.socket)) return 'running';
    const stateDir = options.stateDir;
    const logPath = join(stateDir ?? dir, 'daemon.stderr.log');
    let out: number;
    try {
      mkdirSync(dirname(logPath), { recursive: true, mode: 0o700 });
      out = openSync(logPath, 'a', 0o600);
    } catch (error) {
      throw unwritable(dirname(logPath), error);
    }
    const offset = statSync(logPath).size;
    const startsPath = join(dir, 'starts.json');
    let startedAt: number;
    try {
      startedAt = recordStart(startsPath, options.crashWindowMs ?? 60_000, options.maxStarts ?? 3, logPath, options.explicit === true);
    } catch (error) {
      closeSync(out);
      throw error;
    }
    const args = [
      options.cliPath ?? defaultDaemonCliPath(),
      'daemon',
      '--socket',
      options.socket,
      ...(stateDir ? ['--state-dir', stateDir] : []),
      ...(options.config ? ['--config', options.config] : []),
    ];
    const child = spawn(process.execPath, args, { detached: true, stdio: ['ignore', out, out], env: options.env ?? process.env });
    closeSync(out);
    let exit: string | undefined;
    child.once('exit', (code, signal) => (exit = signal ? `signal ${signal}` : `code ${code}`));
    child.unref();
    while (!(await socketAccepts(options.socket))) {
      if (exit !== undefined) {
        throw startFailure(`the daemon exited (${exit}) before it listened on ${options.socket}`, logPath, offset, exit, 'fix the cause above, then run `subagentd start`');
      }
      if (Date.now() > readyBy) {
        throw startFailure(
          `the daemon (pid ${child.pid}) did not listen on ${options.socket} within ${Math.round((options.readyTimeoutMs ?? 15_000) / 1000)} s`,
          logPath,
          offset,
          undefined,
          'it may still be starting on a busy machine: try `subagentd status` in a moment, or `subagentd logs`',
        );
      }
      await sleep(50);
    }
    forgetStart(startsPath, startedAt);
    return 'started';
  } finally {
    rmSync(lockPath, { force: true });
  }
}
