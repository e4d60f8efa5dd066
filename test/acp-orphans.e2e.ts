/**
 * ACP agents cannot outlive the daemon: after kill -9 of the daemon, the next daemon reaps the
 * agent process groups its predecessor recorded — agents that ignore EOF and SIGTERM and their
 * grandchildren included — and never signals a recycled pid (agent-groups.ts).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pino } from 'pino';
import { afterEach, expect, it } from 'vitest';
import { groupMembers, processStartTime } from '../common/process-identity.js';
import { agentGroupsDir, reapAgentGroups } from '../daemon/providers/acp/agent-groups.js';
import { makeTempDir, REPO, restartDaemon, startDaemon, waitFor, type DaemonProcess } from './support/daemon-process.js';
import { RawPeer } from './support/raw-peer.js';

const RAW_AGENT = resolve(REPO, 'test', 'fixtures', 'acp-raw-agent.mjs');
const daemons: DaemonProcess[] = [];
const strays: number[] = [];
const procs: ChildProcess[] = [];
const dirs: string[] = [];
const tempDir = (): string => {
  const dir = makeTempDir('subagentd-orphans-');
  dirs.push(dir);
  return dir;
};
afterEach(async () => {
  for (const pid of strays.splice(0)) {
    try {
      process.kill(pid, 'SIGKILL'); // only if the test failed and left them
    } catch {
      // gone, as it should be
    }
  }
  for (const proc of procs.splice(0)) proc.kill('SIGKILL');
  await Promise.all(daemons.splice(0).map((d) => d.stop()));
  dirs.splice(0).forEach((dir) => rmSync(dir, { recursive: true, force: true }));
});

/** Alive and not a zombie (orphans are reaped by init, which may lag). */
function running(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return !['Z', 'X'].includes(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[0] ?? 'X');
  } catch {
    return false;
  }
}

/** A daemon serving two stubborn agents; resolves their pids and their grandchildren's. */
async function daemonWithStubbornAgents(): Promise<{ daemon: DaemonProcess; pids: number[]; peer: RawPeer }> {
  const dir = tempDir();
  const record = join(dir, 'agent-record.jsonl');
  const daemon = await startDaemon({
    providers: [{ name: 'stubborn', type: 'acp', command: process.execPath, args: [RAW_AGENT], env: { RAW_STUBBORN: '1', ACP_FIXTURE_RECORD: record } }],
  });
  daemons.push(daemon);
  const peer = await RawPeer.initialized(daemon.socket);
  for (let i = 0; i < 2; i++) {
    const started = await peer.request('subagent/start', { provider: 'stubborn', prompt: [{ type: 'text', text: 'hang' }], parent: { sessionId: 'p', cwd: dir } }, 10_000);
    expect(started.error).toBeUndefined();
  }
  const pids = (): number[] =>
    readFileSync(record, 'utf8')
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as { event: string; pid?: number })
      .filter((e) => e.event === 'start' || e.event === 'grandchild')
      .map((e) => e.pid!);
  await waitFor(() => existsSync(record) && pids().length === 4, 5000, () => 'two agents and two grandchildren');
  strays.push(...pids());
  expect(readdirSync(agentGroupsDir(daemon.stateDir))).toHaveLength(2);
  return { daemon, pids: pids(), peer };
}

async function kill9(daemon: DaemonProcess): Promise<void> {
  daemon.proc.kill('SIGKILL');
  await new Promise((r) => (daemon.proc.exitCode !== null || daemon.proc.signalCode !== null ? r(undefined) : daemon.proc.once('exit', r)));
}

/** The daemon's agent sentinel, found by its command line. */
function sentinelOf(daemonPid: number): number[] {
  return readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry))
    .filter((entry) => {
      try {
        const argv = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
        return argv.some((a) => a.endsWith('agent-sentinel.js')) && argv.includes(String(daemonPid));
      } catch {
        return false;
      }
    })
    .map(Number);
}

it('after kill -9 of the daemon, its sentinel reaps stubborn agents and their grandchildren with no new daemon', async () => {
  const { daemon, pids, peer } = await daemonWithStubbornAgents();
  expect(sentinelOf(daemon.proc.pid!)).toHaveLength(1);
  await kill9(daemon);
  peer.close();
  // SIGTERM is ignored, so this is the SIGKILL step: within the reaper's 2 s grace, well under 5 s.
  await waitFor(() => pids.filter(running).length === 0, 5000, () => `reaped; still running: ${pids.filter(running).join(', ')}`);
  await waitFor(() => sentinelOf(daemon.proc.pid!).length === 0, 5000, () => 'the sentinel to exit');
});

it('with the sentinel killed too, the next daemon reaps what the dead one left', async () => {
  const { daemon, pids, peer } = await daemonWithStubbornAgents();
  const sentinel = sentinelOf(daemon.proc.pid!);
  expect(sentinel).toHaveLength(1);
  strays.push(...sentinel);
  process.kill(sentinel[0]!, 'SIGKILL');
  await waitFor(() => !running(sentinel[0]!), 5000, () => 'the sentinel killed');
  await kill9(daemon);
  peer.close();
  expect(pids.filter(running)).toHaveLength(4); // orphaned: nothing killed them with the daemon

  const next = await restartDaemon(daemon);
  daemons.splice(0, 1, next);
  await waitFor(() => pids.filter(running).length === 0, 5000, () => `reaped; still running: ${pids.filter(running).join(', ')}`);
  expect(readdirSync(agentGroupsDir(daemon.stateDir))).toEqual([]);
  expect(next.proc.exitCode).toBeNull();
});

it('a record whose pid now belongs to an unrelated process (another start time) is never signalled', async () => {
  const dir = join(tempDir(), 'agents');
  mkdirSync(dir);
  const bystander = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore', detached: true });
  procs.push(bystander);
  const pid = bystander.pid!;
  await waitFor(() => processStartTime(pid) !== undefined && groupMembers(pid).length === 1, 5000, () => 'bystander running');
  writeFileSync(join(dir, `${pid}.json`), JSON.stringify({ pid, startTime: String(Number(processStartTime(pid)) - 1) }));
  expect(await reapAgentGroups(dir, pino({ level: 'silent' }), { term: 100, kill: 100 })).toBe(0);
  expect(running(pid)).toBe(true);
  expect(readdirSync(dir)).toEqual([]); // the stale record is dropped
});
