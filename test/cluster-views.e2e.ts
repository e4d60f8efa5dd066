/**
 * Any member answers for any run of the pool, with real daemons (the built CLI) on a real
 * nats-server: run info names the member executing the run (`worker`, protocol 1.3; absent for
 * an older client), a run waiting for a cluster slot is not `running`, a member lists, inspects
 * and waits on a run submitted and executed through another, a client re-attaches through
 * another member after its own was killed and gets the real outcome, and another client's run
 * is refused on every member.
 */
import { hostname } from 'node:os';
import { readFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import type { RemoteSubagentRun } from '../client/types.js';
import type { RunEvent, RunInfo } from '../protocol/index.js';
import { clusterScene } from './support/cluster-scene.js';
import { waitFor, type DaemonProcess } from './support/daemon-process.js';
import { RawPeer } from './support/raw-peer.js';

const scene = clusterScene('subagentd-cluster-views-');
const { clients, records } = scene;
const peers: RawPeer[] = [];

// Registered after the scene, so it runs before the scene's cleanup: peers close first.
afterEach(() => {
  for (const peer of peers.splice(0)) peer.close();
});

/** A scripted model: one step of `delayMs` with a tool call, then "done". */
function member(options: { cap: number; delayMs: number; slots?: number; detachGraceMs?: number }): Promise<DaemonProcess> {
  return scene.member(
    {
      model: { default: scene.scriptedModel(options.delayMs) },
      limits: { maxConcurrentRuns: options.cap },
      ...(options.detachGraceMs !== undefined && { detachGraceMs: options.detachGraceMs }),
    },
    { ackWaitMs: 1000, slots: options.slots },
  );
}

/** A daemon run's handle, with the token that proves ownership from any connection. */
const daemonRun = (run: Promise<unknown>): Promise<RemoteSubagentRun> => run as Promise<RemoteSubagentRun>;

/** A raw client that said `protocolVersion` at initialize. */
async function peer(socket: string, protocolVersion?: string): Promise<RawPeer> {
  const raw = await RawPeer.connect(socket);
  peers.push(raw);
  const token = readFileSync(`${socket}.token`, 'utf8').trim();
  const hello = await raw.request('initialize', { protocolVersion: protocolVersion ?? '1.3.0', clientInfo: { name: 'views-test', version: '0' }, token });
  expect(hello.error).toBeUndefined();
  return raw;
}

async function ask<T>(raw: RawPeer, method: string, params: unknown): Promise<T> {
  const reply = await raw.request(method, params, 10_000);
  if (reply.error) throw Object.assign(new Error(reply.error.message), { code: reply.error.data?.code });
  return reply.result as T;
}

const refusal = (raw: RawPeer, method: string, params: unknown): Promise<unknown> => ask(raw, method, params).then(() => 'answered', (error: unknown) => error);

const parent = { sessionId: 'views-test', cwd: process.cwd() };
const prompt = [{ type: 'text' as const, text: 'go' }];
const done = { stopReason: 'completed', output: [{ type: 'text', text: 'done' }] };

describe('any member answers for any run of the pool', () => {
  it('run info names the executing member on both members (absent for a 1.2 client); a run waiting for a cluster slot is not running', async () => {
    // Cap 1 across the pool; only A executes (B has no slots), so a second run must wait in the queue.
    const a = await member({ cap: 1, delayMs: 1500 });
    const b = await member({ cap: 1, delayMs: 1500, slots: 0 });
    const store = await records();
    const viaA = await clients.connect(a.socket);
    const viaB = await clients.connect(b.socket);
    const first = await viaA.start('spawn', { prompt, parent, signal: AbortSignal.timeout(30_000) });
    // Through B, whose own admission has room: it waits for the pool's one slot, held by `first`.
    const second = viaB.start('spawn', { prompt, parent: { ...parent, sessionId: 'views-other' }, signal: AbortSignal.timeout(30_000) });
    await waitFor(() => [...store.all()].some(({ record }) => record.runId !== first.id && record.state === 'queued'), 10_000, () => 'the second run queued');

    // 1.5 adds the member's workspaces (any cwd here: `/`); a 1.3 client's closed WorkerRef is sent without them.
    const executor = { id: store.seen(first.id)!.record.worker!.id, host: hostname(), pid: a.proc.pid, workspaces: ['/'] };
    const { workspaces: _workspaces, ...executor13 } = executor;
    for (const socket of [a.socket, b.socket]) {
      const raw = await peer(socket);
      const { runs } = await ask<{ runs: RunInfo[] }>(raw, 'runs/list', {});
      // Only the run holding the slot is running anywhere; the queued one is not listed as running.
      expect(runs.filter((run) => run.state === 'running').map((run) => run.runId)).toEqual([first.id]);
      expect(runs.find((run) => run.runId === first.id)!.worker).toEqual(executor13);
      const { run } = await ask<{ run: RunInfo }>(raw, 'run/inspect', { runId: first.id });
      expect(run).toMatchObject({ runId: first.id, state: 'running', mine: false, worker: executor13 });
      expect(run.worker).not.toHaveProperty('workspaces');
      const current = await peer(socket, '1.5.0');
      expect((await ask<{ run: RunInfo }>(current, 'run/inspect', { runId: first.id })).run.worker).toEqual(executor);
      // A 1.2 client's closed RunInfo has no `worker`: it is not sent one.
      const old = await peer(socket, '1.2.0');
      const oldList = await ask<{ runs: RunInfo[] }>(old, 'runs/list', {});
      expect(oldList.runs.map((r) => r.runId)).toContain(first.id);
      expect(oldList.runs.every((r) => !('worker' in r))).toBe(true);
      expect('worker' in (await ask<{ run: RunInfo }>(old, 'run/inspect', { runId: first.id })).run).toBe(false);
    }
    // B counts the queued run as starting, not running.
    expect((await viaB.ops.status()).runs).toMatchObject({ starting: 1, running: 0 });

    expect(await first.result).toMatchObject(done);
    const later = await second;
    expect(await later.result).toMatchObject(done);
    // Both members name A for the run B's client submitted: A executed it.
    for (const service of [viaA, viaB]) expect((await service.ops.inspect(later.id)).run.worker).toEqual(executor);
    // Each member pages through its own runs and the pool's as one list, newest first.
    for (const service of [viaA, viaB]) {
      const page = await service.ops.runsPage({ limit: 1 });
      expect(page.runs.map((r) => r.runId)).toEqual([later.id]);
      const next = await service.ops.runsPage({ limit: 1, cursor: page.nextCursor! });
      expect(next.runs.map((r) => r.runId)).toEqual([first.id]);
      expect(next.nextCursor).toBeUndefined();
    }
    await Promise.all([first.dispose(), later.dispose()]);
  }, 40_000);

  it('member B lists, inspects and waits on a run submitted through A and executed on A; another client is refused on every member', async () => {
    const a = await member({ cap: 2, delayMs: 2000 });
    const b = await member({ cap: 2, delayMs: 2000, slots: 0 });
    const store = await records();
    const owner = await clients.connect(a.socket);
    const run = await daemonRun(owner.start('spawn', { prompt, parent, signal: AbortSignal.timeout(30_000) }));
    const executor = { id: store.seen(run.id)!.record.worker!.id, host: hostname(), pid: a.proc.pid, workspaces: ['/'] };

    const onB = await peer(b.socket, '1.5.0');
    const { runs } = await ask<{ runs: RunInfo[] }>(onB, 'runs/list', {});
    expect(runs).toEqual([expect.objectContaining({ runId: run.id, state: 'running', provider: 'spawn', mine: false, worker: executor })]);
    // Another client, on either member: the record is open to all, the run is not.
    for (const socket of [a.socket, b.socket]) {
      const stranger = await peer(socket);
      expect((await ask<{ run: RunInfo; events?: unknown }>(stranger, 'run/inspect', { runId: run.id })).events).toBeUndefined();
      for (const [method, params] of [
        ['run/wait', { runId: run.id }],
        ['run/cancel', { runId: run.id }],
        ['run/dispose', { runId: run.id }],
        ['run/attach', { runId: run.id, runToken: 'x'.repeat(32) }],
      ] as const) {
        expect(await refusal(stranger, method, params), `${method} on ${socket === a.socket ? 'A' : 'B'}`).toMatchObject({ code: 'NOT_OWNER' });
      }
    }

    // The owner's token re-attaches the run through B while it still executes on A; B waits on it.
    const events: RunEvent[] = [];
    const viaB = await clients.connect(b.socket);
    const adopted = await viaB.adopt(run.id, run.runToken, { onEvent: (event) => events.push(event) });
    expect(store.seen(run.id)!.record.state).toBe('running');
    expect(await adopted.wait()).toMatchObject(done);
    // A kept executing it, and sent the rest of its events to B.
    expect((await store.get(run.id))!.record.worker).toEqual(executor);
    expect(events.length).toBeGreaterThan(0);
    expect((await viaB.ops.inspect(run.id)).run).toMatchObject({ state: 'settled', stopReason: 'completed', mine: true, worker: executor });
    await adopted.dispose();
  }, 40_000);

  it('a client that moves its run from A to B and back keeps it running: the member it leaves hands it over, telling its waiters, and the events follow the client', async () => {
    const a = await member({ cap: 2, delayMs: 3000 });
    const b = await member({ cap: 2, delayMs: 3000, slots: 0 });
    const store = await records();
    const first = await clients.connect(a.socket);
    const run = await daemonRun(first.start('spawn', { prompt, parent, signal: AbortSignal.timeout(30_000) }));
    const memberA = store.seen(run.id)!.record.worker!.id;
    const waitOnA = run.wait().then(() => 'answered', (error: unknown) => error);

    const viaB = await clients.connect(b.socket);
    const onB = await viaB.adopt(run.id, run.runToken);
    expect((await store.get(run.id))!.record.ownerMember).not.toBe(memberA);
    // A let go of the run without stopping it: its waiter is told where the run went.
    expect(await waitOnA).toMatchObject({ code: 'HANDED_OVER', message: expect.stringContaining('re-attached through cluster member') });
    await first.close();
    const waitOnB = onB.wait().then(() => 'answered', (error: unknown) => error);

    // Back through A: the owner moves back there, and the events with it.
    const events: RunEvent[] = [];
    const viaA = await clients.connect(a.socket);
    const onA = await viaA.adopt(run.id, run.runToken, { onEvent: (event) => events.push(event) });
    expect((await store.get(run.id))!.record.ownerMember).toBe(memberA);
    expect(await waitOnB).toMatchObject({ code: 'HANDED_OVER' });
    expect(await onA.wait()).toMatchObject(done);
    expect(events.length).toBeGreaterThan(0);
    const final = (await store.get(run.id))!.record;
    expect(final).toMatchObject({ state: 'settled', attempt: 1, worker: { pid: a.proc.pid } });
    // Each member answers from the pool record: one run, settled, executed by A.
    for (const service of [viaA, viaB]) {
      const runs = await service.ops.runs();
      expect(runs.filter((r) => r.runId === run.id)).toEqual([expect.objectContaining({ state: 'settled', worker: final.worker })]);
    }
    await onA.dispose();
  }, 40_000);

  it('a client of A re-attaches its run through B after A is killed, and gets the real outcome once B has taken the run over', async () => {
    const a = await member({ cap: 2, delayMs: 2500 });
    const store = await records();
    const owner = await clients.connect(a.socket);
    const run = await daemonRun(owner.start('spawn', { prompt, parent, signal: AbortSignal.timeout(30_000) }));
    expect(store.seen(run.id)!.record.worker!.pid).toBe(a.proc.pid);
    const b = await member({ cap: 2, delayMs: 200 });
    a.proc.kill('SIGKILL');

    const viaB = await clients.connect(b.socket);
    const adopted = await viaB.adopt(run.id, run.runToken);
    expect(await adopted.wait()).toMatchObject(done);
    const final = (await store.get(run.id))!.record;
    expect(final).toMatchObject({ state: 'settled', attempt: 2, ownerMember: final.worker!.id, worker: { pid: b.proc.pid, host: hostname() } });
    expect((await viaB.ops.inspect(run.id)).run).toMatchObject({ state: 'settled', mine: true, worker: final.worker });
    // Another client of B still cannot touch it.
    expect(await refusal(await peer(b.socket), 'run/wait', { runId: run.id })).toMatchObject({ code: 'NOT_OWNER' });
    await adopted.dispose();
  }, 40_000);
});
