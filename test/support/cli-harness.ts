/**
 * Runs the built `subagentd` command (dist/cli/main.js) as real child processes against a private
 * sandbox: a 0700 temp dir holding the socket's directory, the state dir and a working dir, and an
 * environment stripped of everything that could select a daemon or a model from the machine.
 * Every wait is bounded; `cleanup()` ends every daemon started for the sandbox's socket (found in
 * /proc by its own command line, so daemons started by concurrent `run`s are found too).
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join, resolve } from 'node:path';
import type { StatusResult } from '../../protocol/index.js';

// Two levels up from test/support/, or three from the built dist/test/support/ (bench/fuzz.ts uses it).
const up = resolve(import.meta.dirname, '..', '..');
export const REPO = basename(up) === 'dist' ? dirname(up) : up;
export const MAIN = join(REPO, 'dist', 'cli', 'main.js');
export const DAEMON_CLI = join(REPO, 'dist', 'cli', 'main.js');
export const EXAMPLES = join(REPO, 'examples');
export const FIXTURE_PROVIDERS = join(REPO, 'dist', 'test', 'fixtures', 'test-providers.js');

/**
 * Bound for a test that runs several CLI processes and daemons one after another. Each takes
 * about a second of CPU to start, and the machine is shared: the default 30 s would be tight.
 */
export const HEAVY_TEST_MS = 60_000;

/** The machine's env without anything that picks a socket, state dir, config or model. */
export function cleanEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (key.startsWith('SUBAGENTD_') || key.startsWith('OPENAI_') || key === 'DEEPSEEK_API_KEY') continue;
    env[key] = value;
  }
  return { ...env, ...extra };
}

export interface CliResult {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
  readonly ms: number;
}

export interface CliOptions {
  readonly cwd?: string;
  readonly timeoutMs?: number;
  readonly env?: Record<string, string>;
}

/** A CLI process still running: its output so far and its exit. */
export interface CliProcess {
  readonly child: ChildProcessWithoutNullStreams;
  stdout(): string;
  stderr(): string;
  readonly exited: Promise<CliResult>;
  /** Resolves once `check(stdout, stderr)` holds; rejects on timeout or if the process exits first. */
  waitForOutput(check: (stdout: string, stderr: string) => boolean, timeoutMs: number, what: string): Promise<void>;
}

export function pidAlive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // "pid (comm) S ...": a zombie has exited even though kill(pid, 0) still succeeds.
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}

/** Every live `daemon` process whose command line names this socket. */
export function daemonPidsFor(socket: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let argv: string[];
    try {
      argv = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
    } catch {
      continue;
    }
    const script = argv.findIndex((a) => a.endsWith(join('daemon', 'cli.js')) || a.endsWith(join('cli', 'main.js')));
    if (script < 0 || argv[script + 1] !== 'daemon') continue;
    const at = argv.indexOf('--socket');
    if (at >= 0 && argv[at + 1] === socket && pidAlive(Number(entry))) pids.push(Number(entry));
  }
  return pids;
}

export async function waitUntil(check: () => boolean | Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

export class CliSandbox {
  readonly root: string;
  readonly socket: string;
  readonly stateDir: string;
  /** The working directory of every command (and so of the daemons they start). */
  readonly work: string;
  private readonly running = new Set<ChildProcessWithoutNullStreams>();

  constructor(prefix = 'subagentd-cli-') {
    if (!existsSync(MAIN)) throw new Error(`build first: ${MAIN} is missing (npx tsc -p .)`);
    this.root = mkdtempSync(join(tmpdir(), prefix));
    chmodSync(this.root, 0o700);
    mkdirSync(join(this.root, 'run'), { mode: 0o700 });
    this.socket = join(this.root, 'run', 'daemon.sock');
    this.stateDir = join(this.root, 'state');
    this.work = join(this.root, 'work');
    mkdirSync(this.work, { mode: 0o700 });
    writeFileSync(join(this.work, 'README.md'), '# sandbox\n\nA working directory for CLI end-to-end tests.\n');
  }

  /** The flags that point a command at this sandbox. */
  get flags(): string[] {
    return ['--socket', this.socket, '--state-dir', this.stateDir];
  }

  /** Writes a file in the sandbox and returns its absolute path. */
  file(name: string, content: unknown): string {
    const path = join(this.root, name);
    writeFileSync(path, typeof content === 'string' ? content : JSON.stringify(content, null, 2));
    return path;
  }

  /** Starts `subagentd COMMAND --socket S --state-dir D ...rest` without waiting for it. */
  spawn(argv: readonly string[], options: CliOptions = {}): CliProcess {
    const [command, ...rest] = argv;
    const started = Date.now();
    const child = spawn(process.execPath, [MAIN, ...(command ? [command] : []), ...this.flags, ...rest], {
      cwd: options.cwd ?? this.work,
      env: cleanEnv(options.env),
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    this.running.add(child);
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    const exited = new Promise<CliResult>((resolveExit) =>
      child.once('close', (code, signal) => {
        this.running.delete(child);
        resolveExit({ code, signal, stdout: out, stderr: err, ms: Date.now() - started });
      }),
    );
    const timeoutMs = options.timeoutMs ?? 25_000;
    const killer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    void exited.then(() => clearTimeout(killer));
    return {
      child,
      stdout: () => out,
      stderr: () => err,
      exited,
      async waitForOutput(check, waitMs, what) {
        let done = false;
        void exited.then(() => (done = true));
        await waitUntil(
          () => {
            if (check(out, err)) return true;
            if (done) throw new Error(`subagentd ${argv.join(' ')} exited before ${what}\nstdout: ${out}\nstderr: ${err}`);
            return false;
          },
          waitMs,
          `${what} from subagentd ${argv.join(' ')}\nstdout: ${out}\nstderr: ${err}`,
        );
      },
    };
  }

  /** Runs `subagentd COMMAND --socket S --state-dir D ...rest` to its end. */
  run(argv: readonly string[], options: CliOptions = {}): Promise<CliResult> {
    return this.spawn(argv, options).exited;
  }

  /** `status --json`, or undefined when no daemon answers (exit 1). */
  async status(): Promise<StatusResult | undefined> {
    const result = await this.run(['status', '--json']);
    if (result.code !== 0) return undefined;
    return JSON.parse(result.stdout) as StatusResult;
  }

  readFile(path: string): string {
    return existsSync(path) ? readFileSync(path, 'utf8') : '';
  }

  /** Ends every command still running and every daemon on this socket, then removes the sandbox. */
  async cleanup(): Promise<void> {
    for (const child of this.running) child.kill('SIGKILL');
    const pids = daemonPidsFor(this.socket);
    for (const pid of pids) process.kill(pid, 'SIGTERM');
    try {
      await waitUntil(() => pids.every((pid) => !pidAlive(pid)), 5000, 'daemons to exit after SIGTERM');
    } catch {
      for (const pid of pids) if (pidAlive(pid)) process.kill(pid, 'SIGKILL');
    }
    rmSync(this.root, { recursive: true, force: true });
  }
}
