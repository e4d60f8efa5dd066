/**
 * The shared concurrency budget at the wire of real daemons: the admission queue is fair (one
 * client flooding 200 starts does not hold back others starting 10 each: round-robin across
 * connections, not first come first served, asserted on the grant order with every start queued
 * behind a held slot, so the machine's speed cannot change the outcome), and past `maxQueued` a start is OVERLOADED at once,
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
    // One slot: grants happen one at a time, so the daemon's publish order is its grant order.
    daemon = await startLoadDaemon({ limits: { maxConcurrentRuns: 1, maxRunsPerConnection: 1, maxQueued: 1000 }, detachGraceMs: 0 });
    cleanups.push(() => daemon.stop());
  });

  it('with everything queued at once, slots go round-robin across connections, not first come first served', async () => {
    const FLOOD = 200;
    const OTHERS = 4;
    const EACH = 10;
    const echo = [{ type: 'text' as const, text: 'echo x' }];

    const monitor = await client('monitor', daemon.socket);
    const holder = await client('holder', daemon.socket);
    const flooder = await client('flooder', daemon.socket);
    const others = await Promise.all(Array.from({ length: OTHERS }, (_, i) => client(`other-${i}`, daemon.socket)));

    // A held slot, so nothing is granted until every start is queued: no timing decides the order.
    const held = await holder.start('echo', { prompt: [{ type: 'text', text: 'hang' }], parent, signal: AbortSignal.timeout(60_000) });
    const owners = new Map<string, string>();
    const submit = (service: RemoteSubagentService, name: string, count: number): Array<Promise<string>> =>
      Array.from({ length: count }, async () => {
        const run = await service.start('echo', { prompt: echo, parent, signal: AbortSignal.timeout(60_000) });
        owners.set(run.id, name);
        const result = await run.result;
        await run.dispose();
        return result.stopReason;
      });
    const flood = submit(flooder, 'F', FLOOD);
    await pollUntil(() => monitor.ops.status(), (s) => s.admission.queued === FLOOD, 10_000, 'the flood to queue');
    const rest = others.flatMap((service, i) => submit(service, `o${i}`, EACH));
    await pollUntil(() => monitor.ops.status(), (s) => s.admission.queued === FLOOD + OTHERS * EACH, 10_000, 'every start to queue');

    await held.dispose();
    const reasons = await Promise.all([...flood, ...rest]);
    expect(new Set(reasons)).toEqual(new Set(['completed']));

    // runs/list answers newest first; reversed, with one slot, that is the order slots were granted.
    const order = (await monitor.ops.runs()).reverse().map((run) => owners.get(run.runId)).filter((who): who is string => who !== undefined);
    expect(order).toHaveLength(FLOOD + OTHERS * EACH);
    // Five queues served in turn: the first 50 grants are 10 from each connection …
    const first = order.slice(0, (OTHERS + 1) * EACH);
    const counts = Object.fromEntries(['F', ...others.map((_, i) => `o${i}`)].map((who) => [who, first.filter((w) => w === who).length]));
    expect(counts, `grant order ${order.join(' ')}`).toEqual({ F: EACH, o0: EACH, o1: EACH, o2: EACH, o3: EACH });
    // … each round of five gives every connection one slot …
    for (let round = 0; round < EACH; round++) expect(new Set(first.slice(round * 5, round * 5 + 5)).size).toBe(OTHERS + 1);
    // … and the flooder's remaining 190 come only after the others are done.
    expect(new Set(order.slice(first.length))).toEqual(new Set(['F']));

    const status = await pollUntil(() => monitor.ops.status(), (s) => s.admission.running === 0 && s.admission.queued === 0, 5000, 'an idle budget');
    expect(status.runs.running).toBe(0);
    figures.push(`fairness (budget 1, all queued first): the first ${first.length} grants went ${EACH} to each of ${OTHERS + 1} connections`);
  }, 60_000);
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
      // Refused at once, not after waiting for a slot: the slot is still held (checked below).
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
