/**
 * Starts the real daemon (the built CLI) as a separate process on a unix socket in a fresh temp
 * dir, with the fixture providers loaded, and stops it. Every helper bounds its waits.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { socketAccepts } from '../../common/socket-probe.js';
import { basename, dirname, join, resolve } from 'node:path';

// Two levels up from test/support/, or three from the built dist/test/support/ (bench/fuzz.ts uses it).
const up = resolve(import.meta.dirname, '..', '..');
export const REPO = basename(up) === 'dist' ? dirname(up) : up;
export const CLI = join(REPO, 'dist', 'cli', 'main.js');
export const FIXTURE_PROVIDERS = join(REPO, 'dist', 'test', 'fixtures', 'test-providers.js');

export interface DaemonProcess {
  readonly dir: string;
  readonly socket: string;
  readonly stateDir: string;
  readonly configPath: string;
  readonly proc: ChildProcess;
  stderr(): string;
  /** What it wrote on stdout (nothing, unless a node flag such as --trace-opt prints there). */
  stdout(): string;
  /** SIGTERM, wait for exit (SIGKILL after 5 s), remove the temp dir. */
  stop(): Promise<void>;
}


export function makeTempDir(prefix = 'subagentd-test-'): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

export interface StartOptions {
  /** Added to the daemon's environment, which otherwise holds only what node needs. */
  readonly env?: Readonly<Record<string, string>>;
  /** Load the fixture providers (test/fixtures/test-providers.ts). Default true. */
  readonly fixtures?: boolean;
  /** Flags for node itself, before the CLI. */
  readonly nodeArgs?: readonly string[];
  /** The daemon's launch directory. Default: the test runner's. */
  readonly cwd?: string;
  /**
   * A command the daemon runs under, e.g. bwrap with its own view of the filesystem: `proc` is
   * then that command's process, which must end the daemon when it ends (bwrap --die-with-parent).
   */
  readonly wrap?: readonly string[];
}

/**
 * What a bare node process needs. Nothing else of the runner's environment reaches a test
 * daemon, so a developer's OPENAI_* / DEEPSEEK_* / SUBAGENTD_* settings never change a test.
 */
const PASSED_THROUGH = ['PATH', 'HOME', 'LANG', 'TMPDIR'] as const;

function daemonEnv(extra: Readonly<Record<string, string>> = {}): Record<string, string> {
  const env: Record<string, string> = {};
  for (const key of PASSED_THROUGH) if (process.env[key] !== undefined) env[key] = process.env[key];
  return { ...env, ...extra };
}

export async function startDaemon(config: Record<string, unknown> = {}, extraArgs: string[] = [], options: StartOptions = {}): Promise<DaemonProcess> {
  if (!existsSync(CLI)) throw new Error(`build first: ${CLI} is missing (npm run build)`);
  const dir = makeTempDir();
  const configPath = join(dir, 'config.json');
  writeFileSync(configPath, JSON.stringify(options.fixtures === false ? config : { providerModules: [FIXTURE_PROVIDERS], ...config }));
  return launch({ dir, socket: join(dir, 'run', 'daemon.sock'), stateDir: join(dir, 'state'), configPath }, extraArgs, options);
}

/** A new daemon on a stopped (or killed) one's socket, state dir and config: a restart. */
export function restartDaemon(old: DaemonProcess, options: StartOptions = {}): Promise<DaemonProcess> {
  return launch(old, [], options);
}

async function launch(
  paths: Pick<DaemonProcess, 'dir' | 'socket' | 'stateDir' | 'configPath'>,
  extraArgs: string[],
  options: StartOptions,
): Promise<DaemonProcess> {
  const { dir, socket, stateDir, configPath } = paths;
  const env = daemonEnv(options.env);
  const spawnedAt = Date.now();
  const command = [process.execPath, ...(options.nodeArgs ?? []), CLI, 'daemon', '--socket', socket, '--state-dir', stateDir, '--config', configPath, ...extraArgs];
  const [file, ...args] = [...(options.wrap ?? []), ...command];
  const proc = spawn(file!, args, {
    stdio: ['ignore', 'pipe', 'pipe'],
    env,
    ...(options.cwd !== undefined && { cwd: options.cwd }),
  });
  let err = '';
  let out = '';
  proc.stderr?.on('data', (d: Buffer) => (err += d.toString()));
  proc.stdout?.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<void>((res) => proc.once('exit', () => res()));
  // A killed predecessor leaves its socket and token behind: wait for this daemon's own token,
  // then for a connect to be accepted (the token is written before the socket listens).
  const fresh = (): boolean => existsSync(socket) && existsSync(`${socket}.token`) && statSync(`${socket}.token`).mtimeMs >= spawnedAt - 5;
  try {
    await waitFor(() => fresh() || proc.exitCode !== null, 10_000, () => `daemon did not listen: ${err}`);
    while (proc.exitCode === null && !(await socketAccepts(socket))) await new Promise((resolve) => setTimeout(resolve, 10));
    if (proc.exitCode !== null) throw new Error(`daemon exited ${proc.exitCode}: ${err}`);
  } catch (error) {
    proc.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
  return {
    ...paths,
    proc,
    stderr: () => err,
    stdout: () => out,
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

/** SIGKILL, as a crash would, and wait until the process is gone. */
export async function killAndWait(daemon: DaemonProcess): Promise<void> {
  const exited = new Promise((resolve) => daemon.proc.once('exit', resolve));
  daemon.proc.kill('SIGKILL');
  await exited;
}

export async function waitFor(check: () => boolean, timeoutMs: number, what: () => string = () => 'condition'): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what()}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
