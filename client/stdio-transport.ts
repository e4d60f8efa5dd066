/**
 * A private daemon on stdio: the client spawns it, speaks JSON-RPC over its stdin/stdout, and
 * owns its lifetime. The daemon's stderr is kept (last few KiB) so that a crash can say why.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { FrameMessageReader } from '../common/frame-reader.js';
import { FrameWriter } from '../common/frame-writer.js';
import { SubagentError } from '../protocol/index.js';
import { within } from '../common/bounded-wait.js';
import { climbKillLadder } from '../common/kill-ladder.js';
import { ClosedSignal, type Transport } from './transport.js';

export interface StdioSpawnOptions {
  readonly command: string;
  readonly args: readonly string[];
  readonly env?: NodeJS.ProcessEnv;
  readonly cwd?: string;
  /** `pipe` (default) keeps a tail for error messages; `inherit` shows the daemon's log. */
  readonly stderr?: 'pipe' | 'inherit' | 'ignore';
  /** How long `close` waits after ending stdin before SIGTERM, then before SIGKILL. */
  readonly exitGraceMs?: number;
}

const STDERR_TAIL_BYTES = 4096;
/** How long after `exit` (or stdout closing) to wait for the rest before declaring the daemon gone. */
const PIPE_DRAIN_MS = 200;

export async function spawnStdioTransport(options: StdioSpawnOptions): Promise<Transport> {
  const commandLine = [options.command, ...options.args].join(' ');
  const child = spawn(options.command, [...options.args], {
    stdio: ['pipe', 'pipe', options.stderr ?? 'pipe'],
    env: options.env ?? process.env,
    ...(options.cwd !== undefined ? { cwd: options.cwd } : {}),
  });
  await new Promise<void>((resolve, reject) => {
    child.once('spawn', resolve);
    child.once('error', (error) =>
      reject(new SubagentError('DAEMON_UNAVAILABLE', `cannot start a private subagentd daemon (\`${commandLine}\`): ${error.message}`)),
    );
  });

  let stderrTail = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    stderrTail = (stderrTail + chunk.toString('utf8')).slice(-STDERR_TAIL_BYTES);
  });
  // EPIPE on a dead daemon's stdin surfaces as its exit, not as an uncaught error.
  child.stdin?.on('error', () => undefined);

  const closed = new ClosedSignal();
  const exitText = (): string => {
    if (child.exitCode === null && child.signalCode === null) return 'closed its stdout';
    const how = child.signalCode !== null ? `was killed by ${child.signalCode}` : `exited with code ${child.exitCode}`;
    const tail = stderrTail.trim();
    return tail ? `${how}; its stderr ended with: ${tail}` : how;
  };
  // `close` (exited, every pipe drained) gives the fullest reason. The fallbacks bound the wait:
  // a grandchild may hold the pipes open, or the daemon may close stdout and linger.
  child.once('close', () => closed.fire(exitText()));
  child.once('exit', () => setTimeout(() => closed.fire(exitText()), PIPE_DRAIN_MS).unref());
  child.stdout?.once('close', () => setTimeout(() => closed.fire(exitText()), PIPE_DRAIN_MS).unref());

  const stdout = child.stdout;
  const stdin = child.stdin;
  if (!stdout || !stdin) throw new SubagentError('DAEMON_UNAVAILABLE', `\`${commandLine}\` has no stdio pipes`);
  let closing: Promise<void> | undefined;
  return {
    reader: new FrameMessageReader(stdout, (problem) => {
      closed.fire(`unreadable framing from the daemon: ${problem}`);
      void (closing ??= stopChild(child, options.exitGraceMs ?? 2000));
    }),
    writer: new FrameWriter(stdin),
    describe: () => `the private subagentd daemon (pid ${child.pid ?? '?'}, \`${commandLine}\`)`,
    onClosed: (listener) => closed.subscribe(listener),
    close: () => (closing ??= stopChild(child, options.exitGraceMs ?? 2000)),
  };
}

/** End stdin (the daemon's cue to exit), then escalate: SIGTERM, SIGKILL. */
async function stopChild(child: ChildProcess, graceMs: number): Promise<void> {
  const exited = new Promise<void>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve();
    else child.once('exit', () => resolve());
  });
  await climbKillLadder(
    [
      { step: 'stdin', act: () => child.stdin?.end(), waitMs: graceMs },
      { step: 'SIGTERM', act: () => child.kill('SIGTERM'), waitMs: graceMs },
      { step: 'SIGKILL', act: () => child.kill('SIGKILL'), waitMs: Infinity },
    ],
    (ms) => within(exited, ms),
  );
}
