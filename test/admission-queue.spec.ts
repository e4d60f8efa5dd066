import { describe, expect, it } from 'vitest';
import { SubagentError } from '../protocol/index.js';
import { AdmissionQueue } from '../daemon/store/admission-queue.js';
import type { Lease } from '../daemon/store/run-ledger.js';

const never = new AbortController().signal;

describe('AdmissionQueue', () => {
  it('grants up to the global cap, then queues', async () => {
    const q = new AdmissionQueue({ maxConcurrentRuns: 2, maxRunsPerConnection: 10, maxQueued: 10 });
    const a = await q.acquire('a', never);
    await q.acquire('a', never);
    let third = false;
    const pending = q.acquire('a', never).then((r) => ((third = true), r));
    await Promise.resolve();
    expect(third).toBe(false);
    expect(q.stats()).toMatchObject({ running: 2, queued: 1 });
    a.release();
    await pending;
    expect(third).toBe(true);
  });

  it('serves connections round-robin and each FIFO', async () => {
    const q = new AdmissionQueue({ maxConcurrentRuns: 1, maxRunsPerConnection: 10, maxQueued: 100 });
    let lease = await q.acquire('hog', never);
    const order: string[] = [];
    const waits: Array<Promise<void>> = [];
    const enqueue = (owner: string, tag: string): void => {
      waits.push(q.acquire(owner, never).then((r: Lease) => {
        order.push(tag);
        lease = r;
      }));
    };
    for (let i = 0; i < 4; i++) enqueue('hog', `hog${i}`);
    enqueue('b', 'b0');
    enqueue('c', 'c0');
    enqueue('b', 'b1');
    for (let i = 0; i < 7; i++) {
      lease.release();
      await new Promise((r) => setImmediate(r));
    }
    await Promise.all(waits);
    expect(order).toEqual(['hog0', 'b0', 'c0', 'hog1', 'b1', 'hog2', 'hog3']);
  });

  it("tells each waiter its place in the grant order, and again as the line moves", async () => {
    const q = new AdmissionQueue({ maxConcurrentRuns: 1, maxRunsPerConnection: 10, maxQueued: 100 });
    let lease = await q.acquire('hog', never);
    const order: string[] = [];
    const told = new Map<string, number[]>();
    const waits: Array<Promise<void>> = [];
    const enqueue = (owner: string, tag: string): void => {
      told.set(tag, []);
      const onPosition = (position: number): void => void told.get(tag)!.push(position);
      waits.push(q.acquire(owner, never, onPosition).then((r: Lease) => {
        order.push(tag);
        lease = r;
      }));
    };
    for (let i = 0; i < 3; i++) enqueue('hog', `hog${i}`);
    enqueue('b', 'b0');
    enqueue('b', 'b1');
    await Promise.resolve();
    // Told once per batch of changes: the five entries above are one batch.
    expect(told.get('b1')).toEqual([4]);
    for (let i = 0; i < 5; i++) {
      lease.release();
      await new Promise((r) => setImmediate(r));
    }
    await Promise.all(waits);
    expect(order).toEqual(['hog0', 'b0', 'hog1', 'b1', 'hog2']);
    // The first place told is the place granted; each later one is one closer, down to 1.
    for (const [index, tag] of order.entries()) {
      expect(told.get(tag), tag).toEqual(Array.from({ length: index + 1 }, (_, k) => index + 1 - k));
    }
  });

  it('moves the line up when a waiter gives up', async () => {
    const q = new AdmissionQueue({ maxConcurrentRuns: 1, maxRunsPerConnection: 10, maxQueued: 100 });
    await q.acquire('a', never);
    const quitter = new AbortController();
    const gaveUp = q.acquire('b', quitter.signal).catch((error: unknown) => error);
    const told: number[] = [];
    void q.acquire('c', never, (position) => void told.push(position));
    await Promise.resolve();
    quitter.abort();
    expect(await gaveUp).toBeInstanceOf(SubagentError);
    await Promise.resolve();
    expect(told).toEqual([2, 1]);
  });

  it('holds a connection to its own cap while others proceed', async () => {
    const q = new AdmissionQueue({ maxConcurrentRuns: 10, maxRunsPerConnection: 1, maxQueued: 10 });
    await q.acquire('a', never);
    let aSecond = false;
    void q.acquire('a', never).then(() => (aSecond = true));
    await q.acquire('b', never);
    await Promise.resolve();
    expect(aSecond).toBe(false);
    expect(q.stats().byConnection).toMatchObject({ a: { running: 1, queued: 1 }, b: { running: 1, queued: 0 } });
  });

  it('is OVERLOADED past the queue bound, naming the limits', async () => {
    const q = new AdmissionQueue({ maxConcurrentRuns: 1, maxRunsPerConnection: 1, maxQueued: 1 });
    await q.acquire('a', never);
    void q.acquire('a', never);
    const error = await q.acquire('b', never).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SubagentError);
    expect((error as SubagentError).code).toBe('OVERLOADED');
    expect((error as SubagentError).message).toMatch(/maxConcurrentRuns 1.*maxQueued 1/);
  });

  it('a queued start honours its AbortSignal and frees its place', async () => {
    const q = new AdmissionQueue({ maxConcurrentRuns: 1, maxRunsPerConnection: 1, maxQueued: 1 });
    const lease = await q.acquire('a', never);
    const abort = new AbortController();
    const waiting = q.acquire('b', abort.signal);
    abort.abort();
    await expect(waiting).rejects.toMatchObject({ code: 'ABORTED' });
    expect(q.stats().queued).toBe(0);
    lease.release();
    expect(q.stats().running).toBe(0);
    lease.release(); // idempotent
    expect(q.stats().running).toBe(0);
  });
});
