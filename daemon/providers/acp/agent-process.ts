/**
 * One external agent process: spawn, stderr capture, exit tracking and the kill ladder. Every
 * path ends in a reaped process: `terminate` resolves only after Node has seen it exit.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { once } from 'node:events';
import type { Logger } from 'pino';
import { identify } from '../../../common/process-identity.js';
import type { AgentGroups } from './agent-groups.js';
import { ByteRing } from './byte-ring.js';
import { STDERR_TAIL_BYTES } from './diagnostic.js';
import { within } from '../../../common/bounded-wait.js';
import { climbKillLadder } from '../../../common/kill-ladder.js';

export interface ExitStatus {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
}

export interface SpawnOptions {
  readonly command: string;
  readonly args: readonly string[];
  readonly cwd: string;
  readonly env: Record<string, string>;
  readonly log: Logger;
  /** Where the agent's process group is recorded until it is reaped (see agent-groups.ts). */
  readonly groups?: AgentGroups;
}

export interface KillLadder {
  /** Wait after closing stdin before SIGTERM. */
  readonly stdin: number;
  /** Wait after SIGTERM before SIGKILL. */
  readonly term: number;
}

/** How much stderr is kept per process. */
const STDERR_RING_BYTES = 8 * 1024;
/** After exit, how long a failure report waits for the rest of stderr to be read. */
const STDERR_DRAIN_MS = 500;
/** After SIGKILL the kernel reaps promptly; this bound only guards against a wedged (D-state) process. */
const SIGKILL_WAIT_MS = 10_000;

export class AgentProcess {
  readonly pid: number;
  readonly exited: Promise<ExitStatus>;
  /** Resolves when the agent's stdout is closed (all of its output has been read or dropped). */
  readonly stdoutClosed: Promise<void>;
  private readonly stderrClosed: Promise<void>;
  private status: ExitStatus | undefined;
  private readonly stderr = new ByteRing(STDERR_RING_BYTES);
  private termination: Promise<void> | undefined;

  private constructor(
    private readonly child: ChildProcessWithoutNullStreams,
    private readonly log: Logger,
    private readonly groups: AgentGroups | undefined,
  ) {
    if (child.pid === undefined) throw new Error('spawned process has no pid');
    this.pid = child.pid;
    this.exited = new Promise((resolve) => {
      child.once('exit', (code, signal) => {
        this.status = { code, signal };
        resolve(this.status);
      });
    });
    this.stdoutClosed = once(child.stdout, 'close').then(
      () => undefined,
      () => undefined,
    );
    this.stderrClosed = once(child.stderr, 'close').then(
      () => undefined,
      () => undefined,
    );
    child.stderr.on('data', (chunk: Buffer) => this.stderr.push(chunk));
    // A dead agent makes pipe writes fail with EPIPE; the ACP connection reports that itself.
    for (const stream of [child.stdin, child.stdout, child.stderr]) stream.on('error', () => {});
    child.on('error', (error) => log.warn({ err: error }, 'agent process error'));
  }

  /** Resolves once the process is running; rejects (with nothing left to clean) if it cannot start. */
  static async spawn(options: SpawnOptions): Promise<AgentProcess> {
    const child = spawn(options.command, [...options.args], {
      cwd: options.cwd,
      env: options.env,
      stdio: ['pipe', 'pipe', 'pipe'],
      // Its own process group, so the ladder's signals also reach the agent's tool subprocesses.
      detached: true,
      windowsHide: true,
    });
    await new Promise<void>((resolve, reject) => {
      const onError = (error: Error): void => {
        child.off('spawn', onSpawn);
        reject(error);
      };
      const onSpawn = (): void => {
        child.off('error', onError);
        resolve();
      };
      child.once('error', onError);
      child.once('spawn', onSpawn);
    });
    // Recorded before anyone can use it: a daemon killed from here on leaves a record to reap.
    if (child.pid !== undefined) options.groups?.record(identify(child.pid));
    return new AgentProcess(child, options.log, options.groups);
  }

  get stdin(): ChildProcessWithoutNullStreams['stdin'] {
    return this.child.stdin;
  }

  get stdout(): ChildProcessWithoutNullStreams['stdout'] {
    return this.child.stdout;
  }

  get exitStatus(): ExitStatus | undefined {
    return this.status;
  }

  /** "agent exited with code 3" / "agent was killed by SIGKILL" / undefined while running. */
  describeExit(): string | undefined {
    const status = this.status;
    if (!status) return undefined;
    return status.signal ? `agent (pid ${this.pid}) was killed by ${status.signal}` : `agent (pid ${this.pid}) exited with code ${status.code}`;
  }

  /**
   * The stderr tail for a failure report. 'exit' can precede the last stderr bytes, and the
   * agent's dying words are the useful part, so an exited process's stderr is drained first.
   */
  async finalStderrTail(maxBytes: number = STDERR_TAIL_BYTES): Promise<string> {
    if (this.status) await within(this.stderrClosed, STDERR_DRAIN_MS);
    return this.stderr.tail(maxBytes);
  }

  /**
   * Close stdin, wait `ladder.stdin`, SIGTERM, wait `ladder.term`, SIGKILL, and wait for the
   * exit. Idempotent: later calls share the first call's ladder.
   */
  terminate(ladder: KillLadder): Promise<void> {
    this.termination ??= this.runLadder(ladder);
    return this.termination;
  }

  private async runLadder(ladder: KillLadder): Promise<void> {
    if (!this.status) {
      const endedBy = await climbKillLadder(
        [
          { step: 'stdin', act: () => this.child.stdin.end(), waitMs: ladder.stdin },
          { step: 'SIGTERM', act: () => this.signal('SIGTERM'), waitMs: ladder.term },
          { step: 'SIGKILL', act: () => this.signal('SIGKILL'), waitMs: SIGKILL_WAIT_MS },
        ],
        (ms) => within(this.exited, ms),
      );
      if (endedBy === undefined) {
        this.log.error({ pid: this.pid }, 'agent process did not exit after SIGKILL');
        return;
      }
    }
    await this.exited;
    // Tool subprocesses the agent left in its group would otherwise outlive it.
    this.signal('SIGKILL');
    this.groups?.forget(this.pid);
    this.child.stdin.destroy();
    // Read what the agent wrote before dying (its last words on stderr), then let go of the
    // pipes even if a stray process still holds their other ends.
    await within(Promise.all([this.stdoutClosed, this.stderrClosed]), STDERR_DRAIN_MS);
    this.child.stdout.destroy();
    this.child.stderr.destroy();
  }

  private signal(signal: NodeJS.Signals): void {
    try {
      process.kill(-this.pid, signal);
    } catch {
      // The group is gone (ESRCH) or unreachable: fall back to the leader alone.
      if (!this.status) this.child.kill(signal);
    }
  }
}
