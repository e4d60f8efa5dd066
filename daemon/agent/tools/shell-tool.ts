/**
 * `run_shell`, offered only when the policy enables it. The command runs in the workspace root
 * with an environment built from the start request's `env` alone (plus a minimal PATH): the
 * daemon's own environment, which may hold credentials, never reaches it. The command runs in
 * the bubblewrap sandbox (daemon/sandbox/: an allowlisted view with only the workspace writable and
 * nothing of the daemon visible, no network unless the policy allows it), unless the operator chose
 * `tools.shellUnsandboxed`. The whole process group is killed on timeout or cancellation.
 */
import { spawn } from 'node:child_process';
import type { Workspace } from '../../workspace/workspace.js';
import { lazySandbox, type ShellLauncher, type ShellLaunch } from '../../sandbox/shell-launcher.js';
import { textOutcome, type AgentTool, type ToolOutcome } from './tool.js';

export const DEFAULT_SHELL_TIMEOUT_MS = 60_000;
const MINIMAL_PATH = '/usr/local/bin:/usr/bin:/bin';
const MAX_STREAM_BYTES = 64 * 1024;

/** For tools made without a launcher (an embedded daemon): one lazily probed sandbox per network setting. */
const lazyLaunchers = new Map<boolean, ShellLauncher>();

export function runShellTool(
  root: Workspace,
  env: Readonly<Record<string, string>>,
  maxTimeoutMs = DEFAULT_SHELL_TIMEOUT_MS,
  network = false,
  launcher?: ShellLauncher,
): AgentTool {
  const shell = launcher ?? lazyLaunchers.get(network) ?? lazyLaunchers.set(network, lazySandbox(network)).get(network)!;
  return {
    name: 'run_shell',
    description: `Run a command with /bin/sh in the workspace root. Output is capped at ${MAX_STREAM_BYTES / 1024} KiB per stream; the command is killed after timeoutMs (at most ${maxTimeoutMs} ms).`,
    parameters: {
      type: 'object',
      properties: {
        command: { type: 'string', minLength: 1 },
        timeoutMs: { type: 'integer', minimum: 1 },
      },
      required: ['command'],
      additionalProperties: false,
    },
    async execute(args, ctx) {
      const { command, timeoutMs } = args as { command: string; timeoutMs?: number };
      const limit = Math.min(timeoutMs ?? maxTimeoutMs, maxTimeoutMs);
      let launch: ShellLaunch;
      try {
        launch = await shell.launch(command, root.real);
      } catch (error) {
        return textOutcome(`run_shell refused: ${error instanceof Error ? error.message : String(error)}`, true);
      }
      return runCommand(launch, root.real, { PATH: MINIMAL_PATH, ...env }, limit, ctx.signal);
    },
  };
}

function runCommand(
  launch: ShellLaunch,
  cwd: string,
  env: Record<string, string>,
  timeoutMs: number,
  signal: AbortSignal,
): Promise<ToolOutcome> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve(textOutcome('cancelled before the command started', true));
    const child = spawn(launch.file, launch.args, { cwd, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    const stdout = new CappedText();
    const stderr = new CappedText();
    child.stdout.on('data', (chunk: Buffer) => stdout.add(chunk));
    child.stderr.on('data', (chunk: Buffer) => stderr.add(chunk));
    let stopped: string | undefined;
    const kill = (why: string): void => {
      stopped ??= why;
      try {
        if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
      } catch {
        // Already gone.
      }
    };
    const timer = setTimeout(() => kill(`timed out after ${timeoutMs} ms`), timeoutMs);
    const onAbort = (): void => kill('cancelled');
    signal.addEventListener('abort', onAbort, { once: true });
    const finish = (headline: string, isError: boolean): void => {
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
      const where = launch.sandboxed ? 'sandboxed: only the workspace is writable' : 'not sandboxed: tools.shellUnsandboxed';
      const text = `${headline} (${where})\n--- stdout ---\n${stdout.text()}\n--- stderr ---\n${stderr.text()}`;
      resolve(textOutcome(text, isError));
    };
    child.on('error', (error) => finish(`failed to start: ${error.message}`, true));
    child.on('close', (code, sig) => {
      if (stopped !== undefined) finish(`command ${stopped}`, true);
      else if (code === 0) finish('exit code 0', false);
      else finish(code === null ? `killed by ${sig ?? 'a signal'}` : `exit code ${code}`, true);
    });
  });
}

class CappedText {
  private readonly chunks: Buffer[] = [];
  private size = 0;
  private dropped = 0;

  add(chunk: Buffer): void {
    const room = MAX_STREAM_BYTES - this.size;
    if (room > 0) {
      const kept = chunk.subarray(0, room);
      this.chunks.push(kept);
      this.size += kept.length;
    }
    this.dropped += Math.max(0, chunk.length - Math.max(room, 0));
  }

  text(): string {
    const body = Buffer.concat(this.chunks).toString('utf8');
    return this.dropped > 0 ? `${body}\n[${this.dropped} more bytes not shown]` : body;
  }
}
