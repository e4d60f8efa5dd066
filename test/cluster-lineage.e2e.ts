/**
 * Lineages in a pool (daemon/cluster/lent-slots.ts): a parent executing on a member, waiting on
 * a nested child in the foreground, lends it its execution slot, so the child runs on the
 * parent's member under the parent's ticket, never waiting for the cluster's cap or a member's
 * `cluster.slots`. Real nats-server, real members (the built CLI), the scripted model: every
 * level replays the same script (call `subagent`, then answer), capped by the lineage's depth.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import type { RemoteSubagentService } from '../client/index.js';
import type { RunInfo, SubagentResult } from '../protocol/index.js';
import { clusterScene } from './support/cluster-scene.js';
import { killAndWait, waitFor, type DaemonProcess } from './support/daemon-process.js';
import { RunPool } from './support/e2e-daemon.js';
import { pollUntil } from './support/load-daemon.js';
import { chain, within } from './support/lineage.js';

const scene = clusterScene('subagentd-cluster-lineage-');
const { clients } = scene;
const runs = new RunPool();
const prompt = [{ type: 'text' as const, text: 'start' }];
const delegate = { name: 'subagent', arguments: { description: 'one level deeper', prompt: 'delegate this again' } };

/** A member whose in-process children delegate with the `subagent` tool, following `steps`. */
function member(steps: unknown[], cap: number, slots: number, ackWaitMs = 15_000): Promise<DaemonProcess> {
  const script = join(scene.dir(), `script-${steps.length}-${JSON.stringify(steps).length}.json`);
  writeFileSync(script, JSON.stringify({ steps }));
  return scene.member(
    { delegation: { spawn: { providers: ['spawn'] } }, model: { default: `scripted:${script}` }, limits: { maxConcurrentRuns: cap } },
    { ackWaitMs, slots },
  );
}



async function startRoot(service: RemoteSubagentService, sessionId: string, cwd: string, maxDepth?: number): Promise<{ id: string; result: Promise<SubagentResult> }> {
  const run = runs.track(await service.start('spawn', { prompt, parent: { sessionId, cwd }, signal: new AbortController().signal, ...(maxDepth !== undefined && { maxDepth }) }));
  return { id: run.id, result: run.result };
}

it('maxConcurrentRuns: 1, one slot — a three-level lineage completes on its root\'s one ticket, on its root\'s member', async () => {
  try {
    // The front executes its own root, which delegates once its start was answered: before, the
    // nested start queued behind its parent's ticket for good.
    const steps = [{ toolCalls: [delegate], delayMs: 300 }, { text: 'done at my level' }];
    const a = await member(steps, 1, 1);
    const service = await clients.connect(a.socket);
    const root = await startRoot(service, 'root', scene.dir());
    expect(await within(30_000, 'the lineage on one ticket', root.result)).toMatchObject({ stopReason: 'completed' });
    const lineage = chain(await service.ops.runs(), root.id);
    expect(lineage.map((r) => r.stopReason)).toEqual(['completed', 'completed', 'completed']);
    // The root's front executes it: the nested runs are its client's, as on a single daemon.
    expect(lineage.map((r) => r.mine)).toEqual([true, true, true]);
    // Each child ran on the slot its waiting parent lent it: on the root's member.
    expect(new Set(lineage.map((r) => r.worker?.id)).size).toBe(1);
  } finally {
    await runs.disposeAll();
  }
}, 60_000);

it('a root that delegates at once, before its start was answered: its lineage completes, and is its client\'s', async () => {
  try {
    const a = await member([{ toolCalls: [delegate] }, { text: 'done at my level' }], 1, 1);
    const service = await clients.connect(a.socket);
    const root = await startRoot(service, 'root', scene.dir());
    expect(await within(30_000, 'the lineage', root.result)).toMatchObject({ stopReason: 'completed' });
    const lineage = chain(await service.ops.runs(), root.id);
    expect(lineage.map((r) => [r.stopReason, r.mine])).toEqual([['completed', true], ['completed', true], ['completed', true]]);
  } finally {
    await runs.disposeAll();
  }
}, 60_000);

it('a front that executes nothing: the lineage runs on the member executing its root, owned there', async () => {
  try {
    const steps = [{ toolCalls: [delegate] }, { text: 'done at my level' }];
    const front = await member(steps, 1, 0);
    const executor = await member(steps, 1, 1);
    const service = await clients.connect(front.socket);
    const root = await startRoot(service, 'root', scene.dir());
    expect(await within(30_000, 'the lineage away from its front', root.result)).toMatchObject({ stopReason: 'completed' });
    const lineage = chain(await service.ops.runs(), root.id);
    expect(lineage.map((r) => r.stopReason)).toEqual(['completed', 'completed', 'completed']);
    const executorId = (await (await clients.connect(executor.socket)).ops.status()).worker?.id;
    expect(lineage.map((r) => r.worker?.id)).toEqual([executorId, executorId, executorId]);
    // Away from the root's front, the nested runs belong to the member executing their parents.
    expect(lineage.map((r) => r.mine)).toEqual([true, false, false]);
  } finally {
    await runs.disposeAll();
  }
}, 60_000);

it('after-step on a root executing away from its front reaches every descendant on the executing member: each ends within one step', async () => {
  try {
    // Each level delegates, then works in slow steps; the third level's call is refused, so it is
    // the one working when the root is told to stop after its step. Before, only the root heard
    // it: its nested runs, the executing member's own, finished whole turns.
    const work = { toolCalls: [{ name: 'list_directory', arguments: { path: '.' } }], delayMs: 500 };
    const steps = [{ toolCalls: [delegate] }, ...Array(20).fill(work), { text: 'finished every step' }];
    const front = await member(steps, 1, 0);
    const executor = await member(steps, 1, 1);
    const service = await clients.connect(front.socket);
    const root = await startRoot(service, 'root', scene.dir());
    const stepsOf = (info: RunInfo): number =>
      readFileSync(join(executor.stateDir, 'sessions', `${info.id}.jsonl`), 'utf8')
        .trim()
        .split('\n')
        .filter((line) => (JSON.parse(line) as { type?: string }).type === 'assistant/message').length;
    const working = (lineage: RunInfo[]): boolean => lineage.length === 3 && existsSync(join(executor.stateDir, 'sessions', `${lineage[2]!.id}.jsonl`)) && stepsOf(lineage[2]!) >= 2;
    const lineage = await pollUntil(async () => chain(await service.ops.runs(), root.id), working, 30_000, 'the third level working');
    const before = lineage.map(stepsOf);
    await service.ops.cancel({ runId: root.id, level: 'after-step' });
    expect(await within(30_000, 'the root after its step', root.result)).toMatchObject({ stopReason: 'aborted' });
    const ended = await pollUntil(async () => chain(await service.ops.runs(), root.id), (all) => all.every((r) => r.state !== 'running'), 30_000, 'the lineage settled');
    expect(ended.map((r) => r.stopReason)).toEqual(['aborted', 'aborted', 'aborted']);
    const afterSteps = ended.map(stepsOf);
    for (let i = 0; i < 3; i++) expect(afterSteps[i]!).toBeLessThanOrEqual(before[i]! + 1);
  } finally {
    await runs.disposeAll();
  }
}, 90_000);

it('2 members, one slot each — 2 clients × 6 delegating roots all settle; a third client\'s start is admitted in its fair turn; status shows how slots are held', async () => {
  try {
    // Root and child delegate (the child's call is refused at maxDepth 2), then answer after a pause.
    const steps = [{ toolCalls: [delegate] }, { text: 'done', delayMs: 400 }];
    const a = await member(steps, 4, 1);
    const b = await member(steps, 4, 1);
    const [ca, cb, cc] = await Promise.all([clients.connect(a.socket), clients.connect(b.socket), clients.connect(a.socket)]);
    const cwd = scene.dir();
    const PER_CLIENT = 6;
    const started = [ca!, cb!].flatMap((service, s) => Array.from({ length: PER_CLIENT }, () => startRoot(service, `client-${s}`, cwd, 2)));
    type Sample = { held: number; lent: number; slots: number; descendants: number };
    const samples: Sample[] = [];
    const sample = async (): Promise<Sample[]> =>
      Promise.all([ca!, cb!].map(async (service) => {
        const { admission } = await service.ops.status();
        const execution = admission.execution!;
        return { held: execution.held, lent: execution.lent, slots: execution.slots, descendants: admission.descendants ?? 0 };
      }));
    // Until some member runs a nested child on a lent slot while both hold their one ticket.
    const deadline = Date.now() + 30_000;
    for (;;) {
      const now = await sample();
      samples.push(...now);
      if (now.some((m) => m.lent > 0 && m.descendants > 0)) break;
      if (Date.now() > deadline) throw new Error(`never saw a nested run on a lent slot: ${JSON.stringify(samples.slice(-4))}`);
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    // The third client's root, once the others' fill the pool's queue.
    const store = await scene.records();
    const queued = (): number => [...store.all()].filter(({ record }) => record.state === 'queued' && record.owner.startsWith('client-')).length;
    await waitFor(() => queued() >= 4, 30_000, () => `the roots to fill the queue (${queued()} queued)`);
    const thirdStart = startRoot(cc!, 'client-third', cwd, 2);
    const [roots, third] = await Promise.all([Promise.all(started), thirdStart]);
    const results = await within(120_000, 'every lineage to settle', Promise.all([...roots, third].map((r) => r.result)));
    expect(results.map((r) => r.stopReason)).toEqual(Array(2 * PER_CLIENT + 1).fill('completed'));
    // A member never held more tickets than its one slot; nested runs ran beside it.
    for (const s of samples) expect(s).toMatchObject({ slots: 1 });
    expect(Math.max(...samples.map((s) => s.held))).toBeLessThanOrEqual(1);
    // Every root had its nested child, on its own member.
    const listed = await ca!.ops.runs();
    for (const root of [...roots, third]) {
      const lineage = chain(listed, root.id);
      expect(lineage.map((r) => r.stopReason)).toEqual(['completed', 'completed']);
      expect(lineage[1]!.worker?.id).toBe(lineage[0]!.worker?.id);
    }
    // Fair turn: of the roots queued before the third client's, at most the claims already under way went first.
    const record = (id: string) => store.seen(id)!.record;
    const thirdRecord = record(third.id);
    const overtook = roots.map((r) => record(r.id)).filter((r) => r.queuedAt < thirdRecord.queuedAt && r.claimedAt! > thirdRecord.queuedAt && r.claimedAt! < thirdRecord.claimedAt!);
    const stillQueued = roots.map((r) => record(r.id)).filter((r) => r.queuedAt < thirdRecord.queuedAt && r.claimedAt! > thirdRecord.queuedAt);
    expect(stillQueued.length).toBeGreaterThan(2);
    expect(overtook.length).toBeLessThanOrEqual(2);
    const after = await sample();
    for (const m of after) expect(m).toMatchObject({ held: 0, lent: 0, descendants: 0 });
  } finally {
    await runs.disposeAll();
  }
}, 180_000);

it('kill -9 of the member executing a lineage: the parent is taken over under its own ticket, the nested run it lent its slot to is ended, and the root completes', async () => {
  try {
    // The child works for a while after its own (refused) delegation: long enough to kill its member then.
    const steps = [{ toolCalls: [delegate], delayMs: 300 }, { text: 'done', delayMs: 4000 }];
    const ackWaitMs = 2000;
    const front = await member(steps, 1, 0, ackWaitMs);
    const executors = [await member(steps, 1, 1, ackWaitMs), await member(steps, 1, 1, ackWaitMs)];
    const ids = await Promise.all(executors.map(async (m) => (await (await clients.connect(m.socket)).ops.status()).worker!.id));
    const store = await scene.records();
    const service = await clients.connect(front.socket);
    const root = await startRoot(service, 'root', scene.dir(), 2);
    const child = () => [...store.all()].map((e) => e.record).find((r) => r.lentBy === root.id);
    await waitFor(() => child()?.childId !== undefined, 30_000, () => 'the nested run to start on its parent\'s slot');
    const lent = child()!;
    const doomed = ids.indexOf(lent.worker!.id);
    expect(lent).toMatchObject({ state: 'running', lease: store.seen(root.id)!.record.lease });
    await killAndWait(executors[doomed]!);
    expect(await within(60_000, 'the root after its member died', root.result)).toMatchObject({ stopReason: 'completed' });
    const parent = store.seen(root.id)!.record;
    expect(parent).toMatchObject({ attempt: 2, worker: { id: ids[1 - doomed] } });
    // The nested run its dead member left behind was ended by the member that took its parent over.
    await waitFor(() => store.seen(lent.runId)!.record.state !== 'running', 10_000, () => 'the left-behind nested run to be ended');
    expect(store.seen(lent.runId)!.record).toMatchObject({ state: 'settled', result: { stopReason: 'aborted' } });
    expect(store.seen(lent.runId)!.record.result!.diagnostic).toContain(`taken over from ${ids[doomed]}`);
  } finally {
    await runs.disposeAll();
  }
}, 120_000);
