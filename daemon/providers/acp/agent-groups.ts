/**
 * ACP agents cannot outlive the daemon. Each agent runs as the leader of its own process group;
 * while it lives, a record of the group (leader pid + start time) sits in `<state dir>/agents/`.
 * A daemon that dies without running the kill ladder (kill -9, OOM) leaves the records behind,
 * and the next daemon to take the state dir reaps those groups at start: SIGTERM to the group,
 * then SIGKILL to what is left, and the records go.
 *
 * While a daemon runs, a sentinel process (agent-sentinel.ts) waits on a pipe from it and reaps
 * its groups the moment it dies, so agents die even when no next daemon is started.
 *
 * A group is ours only while its leader still has the recorded start time, or, with the leader
 * gone, while members remain (Linux does not reuse a pid still naming a process group). A pid
 * recycled by an unrelated process is never signalled.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from '../../../common/node-builtins.js';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Logger } from 'pino';
import { groupMembers, processStartTime, type ProcessIdentity } from '../../../common/process-identity.js';
import { pollWithin } from '../../../common/bounded-wait.js';
import { climbKillLadder } from '../../../common/kill-ladder.js';

export function agentGroupsDir(stateDir: string): string {
  return join(stateDir, 'agents');
}

/** How long the reaper waits for a group after SIGTERM, then after SIGKILL. */
export const REAP_GRACE_MS = { term: 2000, kill: 2000 } as const;

export class AgentGroups {
  private sentinel: ChildProcess | undefined;

  constructor(
    private readonly dir: string,
    private readonly log: Logger,
  ) {}

  /** Written before the agent is handed out: a daemon killed a moment later still leaves it. */
  record(leader: ProcessIdentity): void {
    this.sentinel ??= this.startSentinel();
    try {
      mkdirSync(this.dir, { recursive: true, mode: 0o700 });
      writeFileSync(this.file(leader.pid), JSON.stringify({ ...leader, daemonPid: process.pid }), { mode: 0o600 });
    } catch (error) {
      this.log.warn({ err: error, pid: leader.pid }, 'could not record the agent process group: a daemon crash would leave it running');
    }
  }

  /** The group has been killed and its leader reaped. */
  forget(pid: number): void {
    rmSync(this.file(pid), { force: true });
  }

  private startSentinel(): ChildProcess | undefined {
    const script = fileURLToPath(new URL('./agent-sentinel.js', import.meta.url));
    try {
      const sentinel = spawn(process.execPath, [script, this.dir, String(process.pid)], { stdio: ['pipe', 'ignore', 'ignore'], detached: true });
      sentinel.on('error', (error) => this.log.warn({ err: error }, 'agent sentinel failed: agents are reaped by the next daemon only'));
      sentinel.stdin.on('error', () => {});
      // Neither the sentinel nor its pipe keeps the daemon alive; the pipe closes when we exit.
      sentinel.unref();
      (sentinel.stdin as unknown as { unref?: () => void }).unref?.();
      return sentinel;
    } catch (error) {
      this.log.warn({ err: error }, 'agent sentinel failed to start: agents are reaped by the next daemon only');
      return undefined;
    }
  }

  private file(pid: number): string {
    return join(this.dir, `${pid}.json`);
  }
}

/**
 * Reaps the groups a previous daemon recorded. The records are read at once (before this daemon
 * spawns agents of its own), the signalling happens in the background of the returned promise.
 */
export function reapAgentGroups(
  dir: string,
  log: Logger,
  grace: { term: number; kill: number } = REAP_GRACE_MS,
  /** Only that daemon's records (the sentinel's case: a new daemon may already record its own). */
  ofDaemon?: number,
): Promise<number> {
  const groups: number[] = [];
  let names: string[] = [];
  try {
    names = readdirSync(dir).filter((name) => name.endsWith('.json'));
  } catch {
    return Promise.resolve(0); // no agents were ever recorded
  }
  for (const name of names) {
    const file = join(dir, name);
    const leader = readRecord(file);
    if (ofDaemon !== undefined && leader?.daemonPid !== ofDaemon) continue;
    rmSync(file, { force: true });
    if (leader && groupIsOurs(leader)) groups.push(leader.pid);
  }
  if (groups.length === 0) return Promise.resolve(0);
  log.warn({ groups }, "reaping ACP agent process groups left by a previous daemon's death");
  return (async () => {
    const endedBy = await climbKillLadder(
      [
        { step: 'SIGTERM', act: () => signalGroups(groups, 'SIGTERM'), waitMs: grace.term },
        { step: 'SIGKILL', act: () => signalGroups(groups, 'SIGKILL'), waitMs: grace.kill },
      ],
      // Not our children: nothing to wait on but /proc.
      (ms) => pollWithin(() => groups.every((g) => groupMembers(g).length === 0), ms),
    );
    if (endedBy === undefined) log.error({ groups: groups.filter((g) => groupMembers(g).length > 0) }, 'agent groups survived SIGKILL');
    return groups.length;
  })();
}

function readRecord(file: string): (ProcessIdentity & { daemonPid?: number }) | undefined {
  try {
    const { pid, startTime, daemonPid } = JSON.parse(readFileSync(file, 'utf8')) as { pid?: unknown; startTime?: unknown; daemonPid?: unknown };
    if (typeof pid !== 'number' || !Number.isSafeInteger(pid) || pid <= 1 || typeof startTime !== 'string') return undefined;
    return { pid, startTime, ...(typeof daemonPid === 'number' && { daemonPid }) };
  } catch {
    return undefined;
  }
}

function groupIsOurs(leader: ProcessIdentity): boolean {
  const started = processStartTime(leader.pid);
  if (started !== undefined) return started === leader.startTime && groupMembers(leader.pid).length > 0;
  return groupMembers(leader.pid).length > 0;
}


function signalGroups(groups: readonly number[], signal: NodeJS.Signals): void {
  for (const pgid of groups) {
    try {
      process.kill(-pgid, signal);
    } catch {
      // already gone
    }
  }
}
