/**
 * The warm ACP pool (issue 14 item 5) with the repo's SDK fixture agent as real child processes.
 * Which process served a start is read from the agent's own record (its pid on `initialize` and
 * `session/new`), never from timing: a warm start is the pre-initialized process, which sees one
 * `initialize` and then the start's `session/new`.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { DaemonProvider, DaemonRun } from '../daemon/provider.js';
import type { AcpProviderConfig } from '../daemon/providers/acp/index.js';
import type { AgentProcessesStatus } from '../protocol/index.js';
import { rejection } from './support/assertions.js';
import {
  fakeHost,
  processGone,
  provider,
  readRecord,
  recordedPids,
  request,
  sdkAgentConfig,
  textOf,
  waitFor,
  workspacePerTest,
} from './fixtures/acp-harness.js';

const ws = workspacePerTest();

/** Providers made by a test, closed after it (before the leftover-process check runs). */
const made: DaemonProvider[] = [];
afterEach(async () => {
  await Promise.all(made.splice(0).map((p) => p.close?.()));
});

function warmProvider(mode: string, extra: Partial<AcpProviderConfig>): DaemonProvider {
  const created = provider(sdkAgentConfig(ws, mode, extra));
  made.push(created);
  return created;
}

const status = (p: DaemonProvider): AgentProcessesStatus => p.processes!();
const pidsOf = (event: string): number[] => readRecord(ws.recordPath).filter((e) => e.event === event).map((e) => e['pid'] as number);
const count = (pids: number[], pid: number): number => pids.filter((p) => p === pid).length;

/** Waits until `n` warm processes are ready and returns the pids that answered `initialize`. */
async function readyPool(p: DaemonProvider, n: number): Promise<number[]> {
  await waitFor(() => status(p).ready === n, 10_000, `${n} warm agent(s) ready`);
  return pidsOf('initialize');
}

describe('warm ACP pool', { timeout: 30_000 }, () => {
  it('a start takes the pre-initialized process and a replacement is warmed in the background', async () => {
    const p = warmProvider('echo', { warm: 1 });
    const [warmPid] = await readyPool(p, 1);
    expect(status(p)).toMatchObject({ warm: 1, ready: 1, warming: 0, inUse: 0, warmStarts: 0, coldStarts: 0 });

    const run = (await p.start(request(ws, fakeHost()))) as DaemonRun & { pid: number };
    expect(run.pid).toBe(warmPid);
    expect(textOf((await run.result).output)).toBe('turn 1: hello');
    // The start cost session/new only: the process was initialized once, before the start.
    expect(count(pidsOf('initialize'), warmPid!)).toBe(1);
    expect(pidsOf('session/new')).toEqual([warmPid]);
    expect(status(p)).toMatchObject({ inUse: 1, warmStarts: 1, coldStarts: 0 });

    await waitFor(() => status(p).ready === 1, 10_000, 'the replacement to be ready');
    const replacement = pidsOf('initialize').find((pid) => pid !== warmPid);
    expect(replacement).toBeDefined();

    // Not reusable by default: the used process is disposed with its run.
    await run.dispose();
    expect(processGone(warmPid!)).toBe(true);
    expect(status(p)).toMatchObject({ inUse: 0, ready: 1, reused: 0 });
    await p.close!();
    expect(processGone(replacement!)).toBe(true);
    expect(status(p)).toMatchObject({ ready: 0, warming: 0 });
  });

  it('never gives a used process to another owner by default', async () => {
    const p = warmProvider('echo', { warm: 1 });
    await readyPool(p, 1);
    const first = (await p.start(request(ws, fakeHost()))) as DaemonRun & { pid: number };
    await first.result;
    await first.dispose();
    await waitFor(() => status(p).ready === 1, 10_000, 'the replacement to be ready');
    const secondHost = fakeHost();
    const second = (await p.start(request(ws, secondHost))) as DaemonRun & { pid: number };
    expect(textOf((await second.result).output)).toBe('turn 1: hello');
    expect(second.pid).not.toBe(first.pid);
    expect(processGone(first.pid)).toBe(true);
    // Each process served exactly one ACP session.
    const sessions = pidsOf('session/new');
    expect(sessions).toEqual([first.pid, second.pid]);
    await second.dispose();
  });

  it('reuseProcesses: a finished process goes back to the pool; maxProcesses bounds warm + in use', async () => {
    const p = warmProvider('echo', { warm: 1, maxProcesses: 1, reuseProcesses: true });
    const [pid] = await readyPool(p, 1);
    const hostA = fakeHost();
    const a = (await p.start(request(ws, hostA))) as DaemonRun & { pid: number };
    expect(a.pid).toBe(pid);
    await a.result;
    // At the cap: no replacement is warmed, and a second start is refused without spawning.
    expect(status(p)).toMatchObject({ inUse: 1, ready: 0, warming: 0, maxProcesses: 1 });
    const refused = await rejection(p.start(request(ws, fakeHost())));
    expect(refused.code).toBe('OVERLOADED');
    expect(refused.message).toContain('maxProcesses (1)');
    expect(recordedPids(ws.recordPath)).toEqual([pid]);

    await a.dispose();
    expect(processGone(pid!)).toBe(false);
    expect(status(p)).toMatchObject({ inUse: 0, ready: 1, reused: 1 });

    const hostB = fakeHost();
    const eventsOfA = hostA.events.length;
    const b = (await p.start(request(ws, hostB, { prompt: [{ type: 'text', text: 'second owner' }] }))) as DaemonRun & { pid: number };
    expect(b.pid).toBe(pid);
    // The agent's own turn counter shows the same process; the new session is a new ACP session.
    expect(textOf((await b.result).output)).toBe('turn 2: second owner');
    expect(pidsOf('session/new')).toEqual([pid, pid]);
    expect(count(pidsOf('initialize'), pid!)).toBe(1);
    expect(hostA.events.length).toBe(eventsOfA);
    expect(hostB.events.length).toBeGreaterThan(0);
    await b.dispose();
  });

  it("a warm process answers the agent's requests for the run that took it: its workspace and its client", async () => {
    const reader = warmProvider('read', { warm: 1 });
    const [readerPid] = await readyPool(reader, 1);
    writeFileSync(join(ws.root, 'notes.txt'), 'the run workspace');
    const read = (await reader.start(request(ws, fakeHost(), { prompt: [{ type: 'text', text: join(ws.root, 'notes.txt') }] }))) as DaemonRun & { pid: number };
    expect(read.pid).toBe(readerPid);
    expect(textOf((await read.result).output)).toBe('read: the run workspace');
    // The file root is the run's workspace, not the warm process's cwd (the temp dir).
    writeFileSync(join(ws.outside, 'secret.txt'), 'outside');
    const again = await read.resume!([{ type: 'text', text: join(ws.outside, 'secret.txt') }]);
    expect(textOf((await again.result).output)).toMatch(/^read-error -32602 /);
    await again.dispose();
    await read.dispose();

    const asker = warmProvider('permission', { warm: 1, permission: 'ask' });
    await waitFor(() => status(asker).ready === 1, 10_000, 'the asking agent warm');
    const host = fakeHost(async () => ({ outcome: 'selected', optionId: 'yes' }));
    const asked = await asker.start(request(ws, host));
    expect(textOf((await asked.result).output)).toBe('permission: yes');
    expect(host.asks.map((a) => a.title)).toEqual(['Edit config.json']);
    await asked.dispose();
  });

  it('an image prompt for a warm agent without image support is refused, and the pool refills', async () => {
    const p = warmProvider('echo', { warm: 1 });
    const [warmPid] = await readyPool(p, 1);
    const error = await rejection(p.start(request(ws, fakeHost(), { prompt: [{ type: 'image', mimeType: 'image/png', data: 'iVBORw0KGgo=' }] })));
    expect(error.code).toBe('INVALID_REQUEST');
    expect(processGone(warmPid!)).toBe(true);
    await waitFor(() => status(p).ready === 1, 10_000, 'the pool to refill');
    expect(status(p)).toMatchObject({ inUse: 0, warmStarts: 1 });
  });

  it('reaps a warm process idle past warmIdleMs and re-warms only on the next start', async () => {
    const p = warmProvider('echo', { warm: 1, warmIdleMs: 200 });
    const [idlePid] = await readyPool(p, 1);
    await waitFor(() => status(p).reaped === 1, 10_000, 'the idle warm agent to be reaped');
    await waitFor(() => processGone(idlePid!), 5_000, 'the reaped agent to be gone');
    expect(status(p)).toMatchObject({ ready: 0, warming: 0 });
    expect(recordedPids(ws.recordPath)).toEqual([idlePid]);

    // The next start finds the pool cold, spawns its own and warms the pool again.
    const run = (await p.start(request(ws, fakeHost()))) as DaemonRun & { pid: number };
    expect(status(p)).toMatchObject({ coldStarts: 1, warmStarts: 0 });
    expect(run.pid).not.toBe(idlePid);
    await run.result;
    await waitFor(() => pidsOf('initialize').length === 3, 10_000, 'the pool to be warmed again');
    await run.dispose();
  });

  it("a start with its own env spawns its own process: a warm one was spawned without it", async () => {
    const p = warmProvider('echo', { warm: 1 });
    const [warmPid] = await readyPool(p, 1);
    const run = (await p.start(request(ws, fakeHost(), { env: { RUN_SPECIFIC: 'yes' } }))) as DaemonRun & { pid: number };
    expect(run.pid).not.toBe(warmPid);
    const started = readRecord(ws.recordPath).find((e) => e.event === 'start' && e['pid'] === run.pid)!;
    expect((started['env'] as Record<string, string>)['RUN_SPECIFIC']).toBe('yes');
    expect(status(p)).toMatchObject({ ready: 1, coldStarts: 1, warmStarts: 0 });
    await run.result;
    await run.dispose();
  });

  it('close stops warm processes still initializing', async () => {
    const p = warmProvider('no-init', { warm: 2, initializeTimeoutMs: 20_000 });
    await waitFor(() => readRecord(ws.recordPath).filter((e) => e.event === 'initialize').length === 2, 10_000, 'both warm-ups to send initialize');
    expect(status(p)).toMatchObject({ ready: 0, warming: 2 });
    await p.close!();
    expect(recordedPids(ws.recordPath).every(processGone)).toBe(true);
    expect(status(p)).toMatchObject({ ready: 0, warming: 0 });
    expect(status(p).lastError).toBeUndefined();
  });

  it('a failing warm-up is shown in status and retried only by the next start', async () => {
    const p = warmProvider('exit-before-init', { warm: 1 });
    await waitFor(() => status(p).lastError, 10_000, 'the warm-up failure');
    expect(status(p).lastError).toMatch(/exited with code 2[\s\S]*missing configuration file/);
    expect(status(p)).toMatchObject({ ready: 0, warming: 0 });
    expect(recordedPids(ws.recordPath)).toHaveLength(1);

    const error = await rejection(p.start(request(ws, fakeHost())));
    expect(error.code).toBe('START_FAILED');
    // The start spawned its own (cold) and triggered one more warm-up: three processes in all.
    await waitFor(() => recordedPids(ws.recordPath).length === 3 && status(p).warming === 0, 10_000, 'the retried warm-up');
    expect(recordedPids(ws.recordPath).every(processGone)).toBe(true);
  });
});
