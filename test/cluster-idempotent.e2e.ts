/**
 * Idempotent starts in a pool: real daemons on a real nats-server, the keys in the pool's KV bucket.
 *
 * 1. A front member (it executes nothing) is killed with kill -9 while its 50 starts are
 *    unanswered: some wait in the pool's queue (its slots are taken by another client's runs),
 *    the rest in the front's own admission queue. No member runs the queued ones: they are parked.
 *    Each task's client sends its start again, under its idempotency key, through one of the two
 *    members left (alternately). Every task executes exactly once (one record with a child per
 *    task, counted from the pool's records), and the retries of the queued starts come back with
 *    their original run ids: they adopted the parked starts instead of starting afresh.
 * 2. The same key from one parent session through member A, then member B: the same run id,
 *    one child; the same key from another parent session is a start of its own.
 * 3. A key is claimed with its run's token in one write (pool-start-keys.ts): a repeat through
 *    another member while the first start is still being made (a slow local start) waits, and
 *    gets the run only once it was answered, attached by that token. A keyed start that failed
 *    frees its key: its retry starts afresh.
 */
import { describe, expect, it } from 'vitest';
import type { RemoteSubagentRun } from '../client/index.js';
import { clusterScene } from './support/cluster-scene.js';

const scene = clusterScene('subagentd-idem-');
const { clients, records } = scene;
const TASKS = 50;
const CAP = 4;

const text = (value: unknown): string => ((value as { type?: string; text?: string }[] | undefined)?.[0]?.text ?? '');
const task = (i: number) => ({ prompt: [{ type: 'text' as const, text: `task-${i}` }], parent: { sessionId: `client-${i}`, cwd: process.cwd() }, idempotencyKey: `key-${i}` });

describe('idempotent starts in a pool', () => {
  it('kill -9 of the front with 50 starts unanswered: the queued ones are parked, each client retries on another member, every task executes once, queued ones under their first run id', async () => {
    const config = { model: { default: scene.scriptedModel(1500) }, limits: { maxConcurrentRuns: CAP } };
    const front = await scene.member(config, { ackWaitMs: 3000, slots: 0 });
    const worker = await scene.member(config, { ackWaitMs: 3000 });
    const other = await scene.member(config, { ackWaitMs: 3000, slots: 0 });
    const store = await records();
    const doomed = await clients.connect(front.socket);
    // The pool's slots are all taken by another client's runs, so the front's starts wait in the queue.
    const busy = await clients.connect(worker.socket);
    const blockers = await Promise.all(
      Array.from({ length: CAP }, () => busy.start('spawn', { prompt: [{ type: 'text', text: 'blocker' }], parent: { sessionId: 'blocker', cwd: process.cwd() }, signal: AbortSignal.timeout(120_000) })),
    );
    const answered = new Map<number, RemoteSubagentRun>();
    const starts = Array.from({ length: TASKS }, (_, i) =>
      doomed.start('spawn', { ...task(i), signal: AbortSignal.timeout(120_000) }).then(
        (run) => void answered.set(i, run as RemoteSubagentRun),
        () => undefined,
      ),
    );
    const queuedFromFront = () => [...store.all()].map((r) => r.record).filter((record) => record.owner.startsWith('client-') && record.state === 'queued');
    for (let i = 0; queuedFromFront().length < CAP; i++) {
      if (i > 1500) throw new Error(`only ${queuedFromFront().length} of the front's starts reached the queue`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    front.proc.kill('SIGKILL');
    await Promise.all(starts);
    const unanswered = Array.from({ length: TASKS }, (_, i) => i).filter((i) => !answered.has(i));
    expect(unanswered).toHaveLength(TASKS);
    // The run ids the pool's queue held when the front died, by task.
    const queuedRunIds = new Map(queuedFromFront().map((record) => [text(record.request.prompt), record.runId]));
    expect(queuedRunIds.size).toBeGreaterThanOrEqual(CAP);
    for (const blocker of blockers) expect(await blocker.result).toMatchObject({ stopReason: 'completed' });
    // The queued starts are parked once a slot frees: nobody runs them without their client.
    for (let i = 0; ; i++) {
      const mine = [...store.all()].map((r) => r.record).filter((record) => queuedRunIds.has(text(record.request.prompt)));
      if (mine.every((record) => record.state === 'queued' && record.parked !== undefined)) break;
      expect(mine.filter((record) => record.childId !== undefined)).toEqual([]);
      if (i > 4000) throw new Error(`the queued starts were not parked: ${JSON.stringify(mine.map((r) => [r.state, r.parked]))}`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    // Each client whose start was never answered sends it again, same key, through a member left.
    const retryWorker = await clients.connect(worker.socket);
    const retryOther = await clients.connect(other.socket);
    const retried = await Promise.all(
      unanswered.map(async (i) => {
        const run = await (i % 2 === 0 ? retryWorker : retryOther).start('spawn', { ...task(i), signal: AbortSignal.timeout(120_000) });
        return { i, runId: run.id, result: await run.result };
      }),
    );
    for (const { result } of retried) expect(result).toMatchObject({ stopReason: 'completed' });
    // The retries of the queued starts got those starts' run ids.
    for (const { i, runId } of retried) {
      const first = queuedRunIds.get(`task-${i}`);
      if (first !== undefined) expect(runId).toBe(first);
    }
    // Every record with a child is one execution of its task.
    for (let i = 0; ; i++) {
      const all = [...store.all()].map((r) => r.record);
      if (all.every((r) => r.state !== 'running') || i > 500) break;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    const all = [...store.all()].map((r) => r.record).filter((record) => record.owner !== 'blocker');
    const executions = new Map<string, number>();
    for (const record of all) {
      if (record.childId === undefined) continue;
      const name = text(record.request.prompt);
      executions.set(name, (executions.get(name) ?? 0) + 1);
    }
    expect([...executions].filter(([, n]) => n !== 1)).toEqual([]);
    expect(executions.size).toBe(TASKS);
    // Nothing was dropped or left parked: every record of the tasks ran its child.
    expect(all.filter((record) => record.childId === undefined)).toEqual([]);
    expect(all).toHaveLength(TASKS);
  }, 240_000);

  it('the same key through member A, then through member B: the same run id and one child; another parent session gets a run of its own', async () => {
    const config = { model: { default: scene.scriptedModel(300) }, limits: { maxConcurrentRuns: CAP } };
    const a = await scene.member(config, { ackWaitMs: 3000 });
    const b = await scene.member(config, { ackWaitMs: 3000, slots: 0 });
    const store = await records();
    const parent = { sessionId: 'client-ab', cwd: process.cwd() };
    const request = { prompt: [{ type: 'text' as const, text: 'once' }], parent, idempotencyKey: 'key-ab' };
    const first = await (await clients.connect(a.socket)).start('spawn', { ...request, signal: AbortSignal.timeout(60_000) });
    const viaB = await clients.connect(b.socket);
    const again = await viaB.start('spawn', { ...request, signal: AbortSignal.timeout(60_000) });
    expect(again.id).toBe(first.id);
    expect(await again.result).toMatchObject({ stopReason: 'completed' });
    // Settled now: a third repeat through B still answers that run.
    const third = await viaB.start('spawn', { ...request, signal: AbortSignal.timeout(60_000) });
    expect(third.id).toBe(first.id);
    const stranger = await viaB.start('spawn', { ...request, parent: { ...parent, sessionId: 'client-other' }, signal: AbortSignal.timeout(60_000) });
    expect(stranger.id).not.toBe(first.id);
    expect(await stranger.result).toMatchObject({ stopReason: 'completed' });
    const once = [...store.all()].map((r) => r.record).filter((record) => record.owner === 'client-ab');
    expect(once.map((record) => record.runId)).toEqual([first.id]);
  }, 120_000);

  it('a repeat through another member while the first start is still being made waits for its answer, then attaches that run', async () => {
    const config = { limits: { maxConcurrentRuns: CAP } };
    const a = await scene.member(config, { ackWaitMs: 3000, slots: 1 });
    const b = await scene.member(config, { ackWaitMs: 3000, slots: 0 });
    const store = await records();
    const viaA = await clients.connect(a.socket);
    const parent = { sessionId: 'client-slow', cwd: process.cwd() };
    // A's first run leaves its ticket as a spare: the keyed start below is a local start, whose
    // record is written only when it is answered.
    const warm = await viaA.start('echo', { prompt: [{ type: 'text', text: 'echo warm' }], parent, signal: AbortSignal.timeout(60_000) });
    await warm.result;
    await warm.dispose();
    // A keyed start that fails removes its key (a removal marker in the bucket): its retry claims
    // the key over the marker and starts afresh.
    const keyed = (text: string, idempotencyKey: string, via = viaA) => via.start('echo', { prompt: [{ type: 'text', text }], parent, idempotencyKey, signal: AbortSignal.timeout(60_000) });
    await expect(keyed('fail-start', 'key-failed')).rejects.toMatchObject({ code: 'START_FAILED' });
    const retried = await keyed('echo retried', 'key-failed');
    expect(await retried.result).toMatchObject({ stopReason: 'completed' });
    await retried.dispose();
    const request = { prompt: [{ type: 'text' as const, text: 'slow-start 1500' }], parent, idempotencyKey: 'key-slow' };
    const answered: string[] = [];
    const first = viaA.start('echo', { ...request, signal: AbortSignal.timeout(60_000) }).then((run) => (answered.push('A'), run));
    await new Promise((resolve) => setTimeout(resolve, 400));
    expect(answered).toEqual([]);
    const again = (await clients.connect(b.socket)).start('echo', { ...request, signal: AbortSignal.timeout(60_000) }).then((run) => (answered.push('B'), run));
    const [one, two] = await Promise.all([first, again]);
    expect(answered).toEqual(['A', 'B']);
    expect(two.id).toBe(one.id);
    expect((await store.get(one.id))!.record).toMatchObject({ local: true });
    expect(await two.result).toMatchObject({ stopReason: 'completed' });
    const made = [...store.all()].map((r) => r.record).filter((record) => record.owner === 'client-slow' && record.runId !== warm.id && record.runId !== retried.id);
    expect(made.map((record) => record.runId)).toEqual([one.id]);
  }, 60_000);
});
