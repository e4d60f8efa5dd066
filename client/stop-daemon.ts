/**
 * Stopping the shared daemon so that the next one can start at once: ask it to shut down (drain or
 * not), then wait until the process itself has exited, which is when its socket and state-dir lock
 * are free. A daemon that outlives its drain timeout plus a grace is sent SIGTERM, then SIGKILL,
 * the way service managers do; the outcome says so. A daemon in another pid namespace (not visible
 * in /proc) is waited on until its socket stops answering.
 */
import { SubagentError } from '../protocol/index.js';
import { socketAccepts } from '../common/socket-probe.js';
import { connect } from './connect.js';
import { identify, processExited, type ProcessIdentity } from '../common/process-identity.js';
import { pollWithin } from '../common/bounded-wait.js';
import { climbKillLadder } from '../common/kill-ladder.js';

export interface StopDaemonOptions {
  readonly socket: string;
  /** Let running children finish (or hand them to the next daemon) before stopping. */
  readonly drain?: boolean;
  /** How long the daemon may drain. Default 30 s. */
  readonly timeoutMs?: number;
  /** Past the drain timeout, how long to wait before SIGTERM, and again before SIGKILL. Default 10 s. */
  readonly graceMs?: number;
  /** Called once the daemon accepted the shutdown, with its pid. */
  readonly onShutdownAccepted?: (pid: number) => void;
}

export interface StopOutcome {
  readonly pid: number;
  /** Set when the daemon did not exit by itself and a signal ended it. */
  readonly forced?: 'SIGTERM' | 'SIGKILL';
}

/** Resolves undefined when no daemon answers on the socket. */
export async function stopDaemon(options: StopDaemonOptions): Promise<StopOutcome | undefined> {
  if (!(await socketAccepts(options.socket))) return undefined;
  const timeoutMs = options.timeoutMs ?? 30_000;
  const graceMs = options.graceMs ?? 10_000;
  let client;
  try {
    client = await connect({ socket: options.socket, clientInfo: { name: 'subagentd-stop', version: '1' }, requestTimeoutMs: 10_000, logger: quiet });
  } catch (error) {
    // Gone between the probe and the connect: nothing left to stop.
    if (error instanceof SubagentError && error.code === 'DAEMON_UNAVAILABLE') return undefined;
    throw error;
  }
  const target = identify(client.daemon.pid);
  try {
    await client.ops.shutdown({ drain: options.drain === true, timeoutMs });
  } catch (error) {
    // The daemon may close our connection as it goes down before the answer is written.
    if (!(error instanceof SubagentError && error.code === 'DAEMON_UNAVAILABLE')) throw error;
  } finally {
    await client.close().catch(() => undefined);
  }
  options.onShutdownAccepted?.(target.pid);
  const goneWithin = (ms: number): Promise<boolean> => pollWithin(() => exited(target, options.socket), ms);
  if (await goneWithin(timeoutMs + graceMs)) return { pid: target.pid };
  // Not ours to signal when we cannot tell it is still the same process.
  if (processExited(target) !== undefined) {
    let vanished = false;
    const send = (signal: NodeJS.Signals) => () => {
      try {
        process.kill(target.pid, signal);
      } catch {
        vanished = true; // exited on its own just before the signal
      }
    };
    const forced = await climbKillLadder(
      [
        { step: 'SIGTERM', act: send('SIGTERM'), waitMs: graceMs },
        { step: 'SIGKILL', act: send('SIGKILL'), waitMs: graceMs },
      ],
      goneWithin,
    );
    if (vanished) return { pid: target.pid };
    if (forced !== undefined) return { pid: target.pid, forced };
  }
  throw new SubagentError('DAEMON_UNRESPONSIVE', `daemon pid ${target.pid} did not exit; check \`subagentd logs\``);
}

/** Its process is gone, or, in another pid namespace, its socket no longer answers. */
async function exited(target: ProcessIdentity, socket: string): Promise<boolean> {
  return processExited(target) ?? !(await socketAccepts(socket));
}

const quiet = { error: () => undefined, warn: () => undefined };
