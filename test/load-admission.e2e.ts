/**
 * The shared concurrency budget at the wire of real daemons: the admission queue is fair (one
 * client flooding 200 starts does not hold back others starting 10 each: round-robin across
 * connections, not first come first served), and past `maxQueued` a start is OVERLOADED at once,
 * naming the limits, while queued starts can still be cancelled and the budget recovers.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, SubagentError, type RemoteSubagentService } from '../client/index.js';
import { pollUntil, startLoadDaemon, type LoadDaemon } from './support/load-daemon.js';

const figures: string[] = [];
const cleanups: Array<() => Promise<void> | void> = [];
const parent = { sessionId: 'admission', cwd: '/tmp' };

afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
  if (figures.length > 0) console.log(`[load-admission]\n  ${figures.join('\n  ')}`);
});

async function client(name: string, socket: string): Promise<RemoteSubagentService> {
  const service = await connect({
    socket,
    clientInfo: { name, version: '0' },
    requestTimeoutMs: 10_000,
    logger: { error: (message, error) => console.error(`[${name}] ${message}`, error ?? '') },
  });
  cleanups.push(() => service.close());
  return service;
}

describe('fairness: one flooding client does not hold back the others', () => {
  let daemon: LoadDaemon;

  beforeAll(async () => {
    daemon = await startLoadDaemon({ limits: { maxConcurrentRuns: 2, maxRunsPerConnection: 2, maxQueued: 1000 }, detachGraceMs: 0 });
    cleanups.push(() => daemon.stop());
  });

  it('others starting 10 each finish long before the flooder’s 200 do', async () => {
    const FLOOD = 200;
    const OTHERS = 4;
    const EACH = 10;
    // 'slow-start 15' holds its slot for ~15 ms of readiness, then completes at once.
    const prompt = [{ type: 'text' as const, text: 'slow-start 15' }];

    const monitor = await client('monitor', daemon.socket);
    const flooder = await client('flooder', daemon.socket);
    const others = await Promise.all(Array.from({ length: OTHERS }, (_, i) => client(`other-${i}`, daemon.socket)));

    // The order in which starts are granted (a start answers once its slot is granted and its
    // ~15 ms readiness passed): 'F' the flooder, 'o' any other client.
    const grants: Array<'F' | 'o'> = [];
    let flooderDone = 0;
    const flood = Array.from({ length: FLOOD }, async () => {
      const run = await flooder.start('echo', { prompt, parent, signal: AbortSignal.timeout(60_000) });
      grants.push('F');
      const result = await run.result;
      flooderDone += 1;
      await run.dispose();
      return result.stopReason;
    });

    // The flood is queued before anyone else asks.
    const queuedAtArrival = (await pollUntil(() => monitor.ops.status(), (s) => s.admission.queued >= FLOOD / 2, 10_000, 'the flood to queue'))
      .admission.queued;

    const t0 = performance.now();
    const otherRuns = others.flatMap((client) =>
      Array.from({ length: EACH }, async () => {
        const run = await client.start('echo', { prompt, parent, signal: AbortSignal.timeout(60_000) });
        grants.push('o');
        const result = await run.result;
        await run.dispose();
        return result.stopReason;
      }),
    );
    const otherReasons = await Promise.all(otherRuns);
    const othersMs = performance.now() - t0;
    const flooderRemaining = FLOOD - flooderDone;
    const floodReasons = await Promise.all(flood);
    const floodMs = performance.now() - t0;

    expect(new Set(otherReasons)).toEqual(new Set(['completed']));
    expect(new Set(floodReasons)).toEqual(new Set(['completed']));
    // First come first served would have made the others wait for the whole flood.
    expect(flooderRemaining, `flooder had ${flooderRemaining} runs left when the others finished`).toBeGreaterThanOrEqual(FLOOD / 2);
    // Round-robin over 5 connections: while the others are served, the flooder gets about one
    // grant in five (10 of 50); allow twice that for timing noise.
    const window = grants.slice(grants.indexOf('o'), grants.lastIndexOf('o') + 1);
    const flooderInWindow = window.filter((g) => g === 'F').length;
    expect(flooderInWindow, `grant order ${grants.join('')}`).toBeLessThanOrEqual((2 * OTHERS * EACH) / OTHERS);

    const status = await pollUntil(() => monitor.ops.status(), (s) => s.admission.running === 0 && s.admission.queued === 0, 5000, 'an idle budget');
    expect(status.runs.running).toBe(0);
    figures.push(
      `fairness (budget 2): flood queued ${queuedAtArrival}; ${OTHERS}×${EACH} other runs done in ${othersMs.toFixed(0)} ms, ` +
        `the flooder got ${flooderInWindow} of ${window.length} grants meanwhile and had ${flooderRemaining} runs to go (flood done at ${floodMs.toFixed(0)} ms)`,
    );
  }, 30_000);
});

describe('past maxQueued a start is OVERLOADED', () => {
  const LIMITS = { maxConcurrentRuns: 1, maxRunsPerConnection: 1, maxQueued: 2 };
  let daemon: LoadDaemon;

  beforeAll(async () => {
    daemon = await startLoadDaemon({ limits: LIMITS, detachGraceMs: 0 });
    cleanups.push(() => daemon.stop());
  });

  it('at once, naming the limits, for every client; queued starts can be cancelled; the budget recovers', async () => {
    const a = await client('a', daemon.socket);
    const b = await client('b', daemon.socket);
    const monitor = await client('monitor', daemon.socket);
    const hang = [{ type: 'text' as const, text: 'hang' }];

    const holder = await a.start('echo', { prompt: hang, parent, signal: AbortSignal.timeout(20_000) });
    const cancelQueued = new AbortController();
    const queued = [a, b].map((c) => c.start('echo', { prompt: hang, parent, signal: cancelQueued.signal }));
    queued.forEach((p) => p.catch(() => undefined));
    const full = await pollUntil(() => monitor.ops.status(), (s) => s.admission.queued === LIMITS.maxQueued, 5000, 'a full queue');
    expect(full.admission).toMatchObject({ running: 1, queued: 2, limits: LIMITS });

    for (const who of [a, b]) {
      const t = performance.now();
      const error = await who.start('echo', { prompt: [{ type: 'text', text: 'echo x' }], parent, signal: AbortSignal.timeout(5000) }).then(
        () => undefined,
        (e: unknown) => e,
      );
      const ms = performance.now() - t;
      expect(error).toBeInstanceOf(SubagentError);
      expect((error as SubagentError).code).toBe('OVERLOADED');
      for (const named of ['maxConcurrentRuns 1', 'maxRunsPerConnection 1', 'maxQueued 2']) expect((error as Error).message).toContain(named);
      // Refused at once, not after waiting for a slot.
      expect(ms).toBeLessThan(2000);
      figures.push(`OVERLOADED answered in ${ms.toFixed(1)} ms: ${(error as Error).message}`);
    }
    // The refused starts took nothing: still one running, two queued.
    expect((await monitor.ops.status()).admission).toMatchObject({ running: 1, queued: 2 });

    // Cancelling the queued starts frees the queue; disposing the holder frees the slot.
    cancelQueued.abort();
    for (const p of queued) await expect(p).rejects.toMatchObject({ code: 'ABORTED' });
    await holder.dispose();
    await pollUntil(() => monitor.ops.status(), (s) => s.admission.running === 0 && s.admission.queued === 0, 5000, 'an idle budget');

    // The daemon accepts work again.
    const after = await b.start('echo', { prompt: [{ type: 'text', text: 'echo again' }], parent, signal: AbortSignal.timeout(5000) });
    expect((await after.result).stopReason).toBe('completed');
    await after.dispose();
  }, 30_000);
});
