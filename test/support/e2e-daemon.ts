/**
 * For the client-level e2e suites: a real daemon process (the built CLI) whose environment the
 * test chooses, plus small helpers around it. Unlike `startDaemon`, the daemon does NOT inherit
 * model credentials from the test runner's environment: only the variables a node process needs
 * and the ones the test passes, so a developer's OPENAI_* / DEEPSEEK_* settings can never leak
 * into (or change) a test.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect, type RemoteSubagentService } from '../../client/index.js';
import { CLI, waitFor, type DaemonProcess } from './daemon-process.js';

/** What a bare node process needs; everything else the daemon sees comes from the test. */
const PASSED_THROUGH = ['PATH', 'HOME', 'LANG', 'TMPDIR', 'SYSTEMROOT'] as const;

export async function startE2eDaemon(config: Record<string, unknown>, env: Record<string, string> = {}): Promise<DaemonProcess> {
  if (!existsSync(CLI)) throw new Error(`build first: ${CLI} is missing (npx tsc -p .)`);
  const dir = mkdtempSync(join(tmpdir(), 'subagentd-e2e-'));
  const socket = join(dir, 'run', 'daemon.sock');
  const stateDir = join(dir, 'state');
  const configPath = join(dir, 'config.json');
  writeFileSync(configPath, JSON.stringify(config));
  const base: Record<string, string> = {};
  for (const key of PASSED_THROUGH) {
    const value = process.env[key];
    if (value !== undefined) base[key] = value;
  }
  const proc = spawn(process.execPath, [CLI, 'daemon', '--socket', socket, '--state-dir', stateDir, '--config', configPath], {
    stdio: ['ignore', 'ignore', 'pipe'],
    env: { ...base, ...env },
  });
  let err = '';
  proc.stderr?.on('data', (d: Buffer) => (err += d.toString()));
  const exited = new Promise<void>((res) => proc.once('exit', () => res()));
  try {
    await waitFor(() => (existsSync(socket) && existsSync(`${socket}.token`)) || proc.exitCode !== null, 10_000, () => `daemon did not listen: ${err}`);
  } catch (error) {
    proc.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
  if (proc.exitCode !== null) {
    rmSync(dir, { recursive: true, force: true });
    throw new Error(`daemon exited ${proc.exitCode}: ${err}`);
  }
  return {
    dir,
    socket,
    stateDir,
    configPath,
    proc,
    stderr: () => err,
    async stop() {
      if (proc.exitCode === null && proc.signalCode === null) {
        proc.kill('SIGTERM');
        const killer = setTimeout(() => proc.kill('SIGKILL'), 5000);
        await exited;
        clearTimeout(killer);
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * Clients opened during a test, closed afterwards. A client that the test closed itself is
 * closed again harmlessly. What the clients report to their logger is kept in `logged` (for
 * the current test) instead of cluttering the output.
 */
export class ClientPool {
  private readonly open: RemoteSubagentService[] = [];
  readonly logged: string[] = [];

  async connect(socket: string, options: Omit<Parameters<typeof connect>[0], 'socket'> = {}): Promise<RemoteSubagentService> {
    const service = await connect({
      socket,
      requestTimeoutMs: 10_000,
      logger: {
        error: (message, error) => this.logged.push(`error: ${message} ${error instanceof Error ? error.message : ''}`),
        warn: (message) => this.logged.push(`warn: ${message}`),
      },
      ...options,
    } as Parameters<typeof connect>[0]);
    this.open.push(service);
    return service;
  }

  async closeAll(): Promise<void> {
    await Promise.all(this.open.splice(0).map((service) => service.close().catch(() => undefined)));
    this.logged.splice(0);
  }
}

/** Runs handed out during a test, disposed afterwards (the seam's "dispose on every path"). */
export class RunPool {
  private readonly runs: Array<{ dispose(): Promise<void> }> = [];

  track<R extends { dispose(): Promise<void> }>(run: R): R {
    this.runs.push(run);
    return run;
  }

  async disposeAll(): Promise<void> {
    await Promise.all(this.runs.splice(0).map((run) => run.dispose().catch(() => undefined)));
  }
}

/** Milliseconds since `t0`. */
export const since = (t0: number): number => Math.round(performance.now() - t0);

/** Direct children of `pid`, from /proc (Linux). */
export function childPids(pid: number): number[] {
  const out: number[] = [];
  const path = `/proc/${pid}/task/${pid}/children`;
  if (!existsSync(path)) return out;
  for (const item of readFileSync(path, 'utf8').trim().split(/\s+/)) {
    if (item !== '') out.push(Number(item));
  }
  return out;
}
