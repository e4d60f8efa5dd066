/**
 * Starts nobody can see are not run: real daemons on a real nats-server. A front member (it
 * executes nothing) is killed with kill -9 while its 50 starts are unanswered: some wait in the
 * pool's queue (its slots are taken by another client's runs), the rest in the front's own
 * admission queue. The member left refuses to run those (their front is gone: nobody waits for them),
 * each task's client sends its start again, under its idempotency key, to that member, and every
 * task executes exactly once: one record with a child per task, counted from the pool's records.
 */
import { describe, expect, it } from 'vitest';
import type { RemoteSubagentRun } from '../client/index.js';
import { clusterScene } from './support/cluster-scene.js';

const scene = clusterScene('subagentd-idem-');
const { clients, records } = scene;
const TASKS = 50;
const CAP = 4;

const text = (value: unknown): string => ((value as { type?: string; text?: string }[] | undefined)?.[0]?.text ?? '');

describe('idempotent starts in a pool', () => {
  it('kill -9 of the front with 50 starts unanswered: the queued ones never run, each client retries on another member, every task executes once', async () => {
    const config = { model: { default: scene.scriptedModel(1500) }, limits: { maxConcurrentRuns: CAP } };
    const front = await scene.member(config, { ackWaitMs: 3000, slots: 0 });
    const worker = await scene.member(config, { ackWaitMs: 3000 });
    const store = await records();
    const doomed = await clients.connect(front.socket);
    const task = (i: number) => ({ prompt: [{ type: 'text' as const, text: `task-${i}` }], parent: { sessionId: `client-${i}`, cwd: process.cwd() }, idempotencyKey: `key-${i}` });
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
    const queuedFromFront = (): number => [...store.all()].filter(({ record }) => record.owner.startsWith('client-') && record.state === 'queued').length;
    for (let i = 0; queuedFromFront() < CAP; i++) {
      if (i > 1500) throw new Error(`only ${queuedFromFront()} of the front's starts reached the queue`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    front.proc.kill('SIGKILL');
    await Promise.all(starts);
    const unanswered = Array.from({ length: TASKS }, (_, i) => i).filter((i) => !answered.has(i));
    expect(unanswered).toHaveLength(TASKS);
    for (const blocker of blockers) expect(await blocker.result).toMatchObject({ stopReason: 'completed' });
    // Each client whose start was never answered sends it again, same key, to the member left.
    const retry = await clients.connect(worker.socket);
    const results = await Promise.all(
      unanswered.map(async (i) => {
        const run = await retry.start('spawn', { ...task(i), signal: AbortSignal.timeout(120_000) });
        return run.result;
      }),
    );
    for (const result of results) expect(result).toMatchObject({ stopReason: 'completed' });
    // Every record with a child is one execution of its task.
    const executions = new Map<string, number>();
    for (let i = 0; ; i++) {
      const all = [...store.all()].map((r) => r.record);
      if (all.every((r) => r.state !== 'queued' && r.state !== 'running') || i > 500) break;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    const all = [...store.all()].map((r) => r.record);
    for (const record of all) {
      if (record.childId === undefined || record.owner === 'blocker') continue;
      const name = text(record.request.prompt);
      executions.set(name, (executions.get(name) ?? 0) + 1);
    }
    const twice = [...executions].filter(([, n]) => n !== 1);
    expect(twice).toEqual([]);
    expect(executions.size).toBe(TASKS);
    // The starts left behind by the dead front ended without a child, saying why.
    const dropped = all.filter((r) => r.childId === undefined);
    expect(dropped.length).toBe(CAP);
    for (const record of dropped) expect(record.startError?.message ?? record.result?.diagnostic ?? '').toMatch(/front member .* is gone/);
  }, 180_000);
});
