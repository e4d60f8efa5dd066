/**
 * Local starts (daemon/cluster/spare-tickets.ts), with real daemons (the built CLI) on a real
 * nats-server: a member that holds a spare ticket and a free slot executes its own client's start
 * at once, its record created `running` (`local`), never queued. Shown here: such a run survives
 * kill -9 of its member (its ticket comes back after the lease and another member resumes it, the
 * client re-attaching through that member); the cluster-wide cap holds with local starts among
 * the runs; and a member busy with local starts of its client does not starve another member's
 * client (its queued runs are claimed in their fair turn while the first client keeps starting).
 * A member's one control subscription (`<prefix>.control.<memberId>.*`) answers a request it
 * cannot read, or for a run not there, with an error and goes on serving the runs it holds.
 * A local start whose child settles before its record's create has left is created settled
 * (daemon/cluster/answer-writes.ts): its key's history has no `running` step. A queued run that
 * no live member serves is marked `unserved` by its front and stops nobody's local starts.
 */
import { join } from 'node:path';
import { Kvm } from '@nats-io/kv';
import { describe, expect, it } from 'vitest';
import type { RemoteSubagentRun, RemoteSubagentService } from '../client/index.js';
import { clusterNames } from '../daemon/cluster/names.js';
import { SlotQueue } from '../daemon/cluster/slot-queue.js';
import type { ClusterRun } from '../daemon/cluster/cluster-run.js';
import type { SubagentResult } from '../protocol/index.js';
import { rejection } from './support/assertions.js';
import { clusterScene, peakOf } from './support/cluster-scene.js';
import type { DaemonProcess } from './support/daemon-process.js';

const scene = clusterScene();
const { clients, records, link } = scene;

/** A member whose children each take one scripted step of `delayMs` with a tool call, then answer "done". */
function member(options: { cap: number; delayMs: number; slots?: number }): Promise<DaemonProcess> {
  return scene.member(
    { model: { default: scene.scriptedModel(options.delayMs) }, limits: { maxConcurrentRuns: options.cap } },
    { ackWaitMs: 1000, slots: options.slots },
  );
}

const prompt = [{ type: 'text' as const, text: 'go' }];
const parentOf = (sessionId: string) => ({ sessionId, cwd: process.cwd() });

async function oneRun(service: RemoteSubagentService, sessionId: string, provider = 'spawn'): Promise<{ runId: string; result: SubagentResult }> {
  const run = await service.start(provider, { prompt, parent: parentOf(sessionId), signal: AbortSignal.timeout(60_000) });
  const result = await run.result;
  await run.dispose();
  return { runId: run.id, result };
}

async function waitUntil(check: () => boolean, ms: number, what: string): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe('local starts: a front with a spare ticket executes its own start at once', () => {
  it('kill -9 of the member executing a local start: after the lease another member resumes it, and the client gets the outcome through that member', async () => {
    const doomed = await member({ cap: 2, delayMs: 4000 });
    const store = await records();
    const service = await clients.connect(doomed.socket);
    // Its first run goes through the queue (no spare yet) and leaves its ticket here as a spare.
    await oneRun(service, 'local-kill', 'echo');
    const run = (await service.start('spawn', { prompt, parent: parentOf('local-kill'), signal: AbortSignal.timeout(60_000) })) as RemoteSubagentRun;
    const first = store.seen(run.id)?.record ?? (await store.get(run.id))!.record;
    expect(first).toMatchObject({ local: true, attempt: 1, worker: { pid: doomed.proc.pid } });
    expect(first.lease).toBeGreaterThan(0);
    await waitUntil(() => store.seen(run.id)?.record.childId !== undefined, 10_000, 'the child of the local start');
    // Another member joins, then the one executing the run dies mid-step (its model step takes 4 s).
    const heir = await member({ cap: 2, delayMs: 200 });
    doomed.proc.kill('SIGKILL');
    await waitUntil(() => store.seen(run.id)?.record.worker?.pid === heir.proc.pid, 30_000, 'the takeover by the other member');
    // The client's member died with it: it re-attaches the run through the heir, with its token.
    const viaHeir = await clients.connect(heir.socket);
    const adopted = await viaHeir.adopt(run.id, run.runToken);
    expect(await adopted.result).toMatchObject({ stopReason: 'completed', output: [{ type: 'text', text: 'done' }] });
    const final = (await store.get(run.id))!.record;
    expect(final.lease).toBe(first.lease); // the spare ticket was its lease, and came back as such
    expect(final.childId).toBe(first.childId);
    expect(final.attempt).toBeGreaterThanOrEqual(2);
    await adopted.dispose();
  }, 90_000);

  it('the spares of a member killed while idle come back after the lease and leave the queue: no ticket is left circulating', async () => {
    // The heir serves no workspace the runs use: every run executes on the doomed member, whose
    // tickets stay there as spares; the heir still gets them back after the kill.
    const heir = await scene.member({ limits: { maxConcurrentRuns: 4 } }, { ackWaitMs: 1000, workspaces: [join(scene.dir(), 'elsewhere')] });
    const doomed = await member({ cap: 4, delayMs: 30 });
    const service = await clients.connect(doomed.socket);
    await Promise.all(
      [0, 1].map(async () => {
        for (let k = 0; k < 3; k++) await oneRun(service, 'idle-spares', 'echo');
      }),
    );
    doomed.proc.kill('SIGKILL');
    const queue = await SlotQueue.open(await scene.link(), clusterNames(), { cap: 4, ackWaitMs: 1000 });
    const deadline = Date.now() + 30_000;
    let depth = await queue.depth();
    while ((depth.leased > 0 || depth.waiting > 0) && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      depth = await queue.depth();
    }
    expect(depth).toEqual({ leased: 0, waiting: 0 });
    expect(heir.proc.exitCode).toBeNull();
  }, 60_000);

  it('a local start whose child cannot be made, or that is cancelled before it is ready, fails as a queued one would, leaves no record, and its ticket goes on to the next', async () => {
    const only = await member({ cap: 1, delayMs: 30 });
    const store = await records();
    const service = await clients.connect(only.socket);
    const echo = (text: string, signal = AbortSignal.timeout(60_000)) => service.start('echo', { prompt: [{ type: 'text', text }], parent: parentOf('local-fail'), signal });
    const warm = await echo('echo warm');
    await warm.result;
    await warm.dispose();
    const lease = (await store.get(warm.id))!.record.lease;
    await expect(echo('fail-start')).rejects.toMatchObject({ code: 'START_FAILED', message: expect.stringContaining('fixture refused to start') });
    const cancel = new AbortController();
    const slow = echo('slow-start 60000', cancel.signal);
    setTimeout(() => cancel.abort(), 300);
    await expect(slow).rejects.toMatchObject({ code: 'ABORTED' });
    // With a cap of 1, the next run executes only if the one ticket came back: locally, on it.
    const next = await echo('echo after');
    expect(await next.result).toMatchObject({ stopReason: 'completed' });
    await next.dispose();
    // Its dispose is told to the members' views, not stored: the record keeps the outcome.
    expect((await store.get(next.id))!.record).toMatchObject({ local: true, lease, state: 'settled' });
    await waitUntil(() => store.seen(next.id)?.record.state === 'disposed', 10_000, 'the dispose told to the views');
    // The failed and cancelled starts left no record: every record is one of the two runs.
    expect([...store.all()].map(({ record }) => record.runId).sort()).toEqual([warm.id, next.id].sort());
  }, 60_000);

  it('the cluster-wide cap holds with local starts among the runs: never more than maxConcurrentRuns execute across the pool', async () => {
    const cap = 2;
    const a = await member({ cap, delayMs: 30 });
    const alone = await clients.connect(a.socket);
    // Alone, A's client starts one run after another: after the first, each executes on A's spare.
    const warm: { runId: string; result: SubagentResult }[] = [];
    for (let k = 0; k < 3; k++) warm.push(await oneRun(alone, 'a-1'));
    // Then a second member, and four clients over both, more runs at once than the cap: each
    // member would run 2 at once on its own (4 in all) without the shared cap.
    const b = await member({ cap, delayMs: 30 });
    const owners = ['a-1', 'a-2', 'b-1', 'b-2'];
    const services = [alone, ...(await Promise.all([a.socket, b.socket, b.socket].map((socket) => clients.connect(socket))))];
    const results = await Promise.all(
      services.map(async (service, i) => {
        const done: { runId: string; result: SubagentResult }[] = [];
        for (let k = 0; k < 10; k++) done.push(await oneRun(service, owners[i]!));
        return done;
      }),
    );
    const all = [...warm, ...results.flat()];
    for (const { result } of all) expect(result).toMatchObject({ stopReason: 'completed', output: [{ type: 'text', text: 'done' }] });
    const store = await records();
    const byId = new Map([...store.all()].map(({ record }) => [record.runId, record]));
    const mine = all.map(({ runId }) => byId.get(runId)!);
    expect(mine.every((r) => r !== undefined)).toBe(true);
    expect(mine.slice(1, 3).every((r) => r.local === true && r.worker?.pid === a.proc.pid)).toBe(true);
    expect(peakOf(mine)).toBeLessThanOrEqual(cap);
    expect(peakOf(mine)).toBe(cap);
    expect(mine.every((r) => r.state === 'settled' && r.attempt === 1)).toBe(true); // read from the bucket: disposes are told, not stored
  }, 90_000);

  it('a member busy with local starts of one client does not starve another member\'s client: its queued runs are claimed in their fair turn', async () => {
    const cap = 2;
    const a = await member({ cap, delayMs: 150 });
    const b = await member({ cap, delayMs: 150 });
    const store = await records();
    const busy = await clients.connect(a.socket);
    const other = await clients.connect(b.socket);
    let flooding = true;
    const busyRuns: string[] = [];
    // The busy client keeps the cap full through A, one run after another on each of two lanes.
    const flood = Promise.all(
      [0, 1].map(async () => {
        while (flooding) busyRuns.push((await oneRun(busy, 'busy')).runId);
      }),
    );
    await waitUntil(() => busyRuns.some((runId) => store.seen(runId)?.record.local === true), 30_000, 'a local start of the busy client');
    // The other client queues 4 runs through B while A's client goes on starting.
    const waiting = await Promise.all(Array.from({ length: 4 }, () => oneRun(other, 'other')));
    flooding = false;
    await flood;
    for (const { result } of waiting) expect(result).toMatchObject({ stopReason: 'completed' });
    const others = waiting.map(({ runId }) => store.seen(runId)?.record ?? undefined);
    expect(others.every((r) => r !== undefined && r.claimedAt !== undefined)).toBe(true);
    const firstQueued = Math.min(...others.map((r) => Date.parse(r!.queuedAt)));
    const lastClaimed = Math.max(...others.map((r) => Date.parse(r!.claimedAt!)));
    // While the other client waited, the busy one got no more than its turns: each freed slot
    // goes to the client with fewer runs executing, so the two alternate (a view's lag aside).
    const busyMeanwhile = busyRuns
      .map((runId) => store.seen(runId)?.record)
      .filter((r) => r?.claimedAt !== undefined && Date.parse(r.claimedAt) > firstQueued && Date.parse(r.claimedAt) < lastClaimed);
    expect(busyMeanwhile.length).toBeLessThanOrEqual(2 * others.length + 2);
  }, 90_000);

  it("a member's control subscription refuses what it cannot read, says absent for a run not there, and still controls its runs", async () => {
    const only = await member({ cap: 2, delayMs: 30 });
    const store = await records();
    const service = await clients.connect(only.socket);
    const run = await service.start('echo', { prompt: [{ type: 'text', text: 'hang' }], parent: parentOf('control'), signal: AbortSignal.timeout(60_000) });
    await waitUntil(() => store.seen(run.id)?.record.worker !== undefined, 10_000, 'the record naming its member');
    const memberId = store.seen(run.id)!.record.worker!.id;
    const nats = await link();
    const names = clusterNames();
    const ask = async (runId: string, payload: string): Promise<unknown> => (await nats.nc.request(names.controlSubject(memberId, runId), payload, { timeout: 5000 })).json();
    expect(await ask(run.id, 'not json')).toMatchObject({ error: { code: 'RUN_STATE' } });
    expect(await ask(run.id, JSON.stringify({ op: 'explode' }))).toMatchObject({ error: { code: 'INVALID_REQUEST' } });
    expect(await ask('run_nobody_here', JSON.stringify({ op: 'cancel' }))).toEqual({ absent: true });
    // The run was neither disposed nor cancelled by any of that, and its member still controls it.
    expect(store.seen(run.id)!.record.state).toBe('running');
    expect(await ask(run.id, JSON.stringify({ op: 'cancel' }))).toEqual({ ok: true });
    expect(await run.result).toMatchObject({ stopReason: 'aborted' });
    await run.dispose();
  }, 60_000);

  it('a local start that settles before its record has left is created settled (one write), and its dispose is told, not stored; a longer one is created running', async () => {
    const only = await member({ cap: 2, delayMs: 30 });
    const service = await clients.connect(only.socket);
    await oneRun(service, 'one-write', 'echo'); // through the queue: its ticket stays here as a spare
    const store = await records();
    const kv = await new Kvm((await link()).js).open(clusterNames().recordsBucket);
    /** Every stored revision of the run's record, once every member's view was told it is disposed. */
    const historyOf = async (runId: string): Promise<ClusterRun[]> => {
      await waitUntil(() => store.seen(runId)?.record.state === 'disposed', 10_000, 'the dispose told to the views');
      const states: ClusterRun[] = [];
      for await (const entry of await kv.history({ key: `run.${runId}` })) if (entry.operation === 'PUT') states.push(entry.json<ClusterRun>());
      return states;
    };
    const short = await oneRun(service, 'one-write', 'echo');
    const states = await historyOf(short.runId);
    expect(states.map((r) => r.state)).toEqual(['settled']);
    expect(states[0]).toMatchObject({ local: true, attempt: 1, result: short.result });
    expect(states[0]!.tokenHash).toBeDefined();
    expect(states[0]!.childId).toBeDefined();
    // Another member lists it disposed all the same: its view was told too.
    const b = await member({ cap: 2, delayMs: 30, slots: 0 });
    const onB = await clients.connect(b.socket);
    const stateOnB = async (): Promise<string | undefined> => (await onB.ops.runsPage({ limit: 20 })).runs.find((r) => r.runId === short.runId)?.state;
    expect(await stateOnB()).toBe('settled'); // B joined after the dispose: it has only the stored record
    const again = await oneRun(service, 'one-write', 'echo');
    const deadline = Date.now() + 10_000;
    let seenOnB: string | undefined;
    while ((seenOnB = (await onB.ops.runsPage({ limit: 20 })).runs.find((r) => r.runId === again.runId)?.state) !== 'disposed' && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    expect(seenOnB).toBe('disposed');
    // A child still working when its start is answered: created running, settled by its member.
    const cancel = new AbortController();
    const long = await service.start('echo', { prompt: [{ type: 'text', text: 'hang' }], parent: parentOf('one-write'), signal: cancel.signal });
    cancel.abort();
    expect(await long.result).toMatchObject({ stopReason: 'aborted' });
    await long.dispose();
    const longStates = await historyOf(long.id);
    expect(longStates.map((r) => r.state)).toEqual(['running', 'settled']);
    expect(longStates[0]).toMatchObject({ local: true });
  }, 60_000);

  it('a queued run no live member serves is marked unserved by its front, and local starts in a served workspace go on meanwhile', async () => {
    const only = await scene.member(
      { model: { default: scene.scriptedModel(30) }, limits: { maxConcurrentRuns: 2 } },
      { ackWaitMs: 1000, workspaces: [process.cwd()], workspaceWaitMs: 30_000 },
    );
    const store = await records();
    const service = await clients.connect(only.socket);
    const cancel = new AbortController();
    // Its cwd exists on the member, outside the roots it serves: nobody can claim it.
    const waiting = service.start('echo', { prompt: [{ type: 'text', text: 'echo nowhere' }], parent: { sessionId: 'unserved', cwd: scene.dir() }, signal: cancel.signal });
    const marked = () => [...store.all()].find(({ record }) => record.owner === 'unserved')?.record;
    await waitUntil(() => marked()?.unserved !== undefined, 15_000, 'the unserved mark');
    expect(marked()!.state).toBe('queued');
    // The first run goes through the queue and leaves its ticket here as a spare; the next executes at once on it.
    await oneRun(service, 'served', 'echo');
    const next = await oneRun(service, 'served', 'echo');
    expect((store.seen(next.runId) ?? (await store.get(next.runId))!).record).toMatchObject({ local: true });
    cancel.abort();
    expect(await rejection(waiting)).toMatchObject({ code: 'ABORTED' });
  }, 60_000);
});
